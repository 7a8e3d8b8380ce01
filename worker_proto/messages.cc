#include "worker_proto/messages.h"

namespace corral::proto {
namespace {

template <class T>
Frame finish(flatbuffers::FlatBufferBuilder& fbb, std::uint64_t id, flatbuffers::Offset<T> body) {
  auto msg = CreateMessage(fbb, id, BodyTraits<T>::enum_value, body.Union());
  return finish_frame(fbb, msg);
}

// An absent std::optional is an absent field on the wire.
template <class E>
flatbuffers::Optional<E> opt(const std::optional<E>& v) {
  return v ? flatbuffers::Optional<E>(*v) : flatbuffers::Optional<E>(flatbuffers::nullopt);
}

flatbuffers::Offset<flatbuffers::Vector<std::uint8_t>> write_bytes(flatbuffers::FlatBufferBuilder& fbb,
                                                                    std::string_view data) {
  return fbb.CreateVector(reinterpret_cast<const std::uint8_t*>(data.data()), data.size());
}

flatbuffers::Offset<ExecResult> write_exec_result(flatbuffers::FlatBufferBuilder& fbb, const ExecResultInfo& r) {
  auto enforced = fbb.CreateVectorOfStrings(r.enforced);
  auto temp_dir = fbb.CreateString(r.temp_dir);
  auto step = r.setup_step.empty() ? 0 : fbb.CreateString(r.setup_step);
  auto message = r.message.empty() ? 0 : fbb.CreateString(r.message);
  flatbuffers::Offset<flatbuffers::Vector<flatbuffers::Offset<flatbuffers::String>>> ws, deny, protect;
  if (r.policy) {
    ws = fbb.CreateVectorOfStrings(r.policy->workspaces);
    deny = fbb.CreateVectorOfStrings(r.policy->deny_read);
    protect = fbb.CreateVectorOfStrings(r.policy->protect);
  }
  ExecResultBuilder b(fbb);
  if (r.policy) {
    b.add_mode(r.policy->mode);
    b.add_network(r.policy->network);
    b.add_workspaces(ws);
    b.add_deny_read(deny);
    b.add_protect(protect);
  }
  b.add_status(r.status);
  if (r.exit_code) b.add_exit_code(*r.exit_code);
  b.add_signal(r.signal);
  b.add_timed_out(r.timed_out);
  b.add_output_truncated(r.output_truncated);
  b.add_wall_ms(r.wall_ms);
  b.add_user_cpu_ms(r.user_cpu_ms);
  b.add_sys_cpu_ms(r.sys_cpu_ms);
  b.add_max_rss_kb(r.max_rss_kb);
  if (r.memory_peak_kb) b.add_memory_peak_kb(*r.memory_peak_kb);
  if (r.launched) b.add_launched(*r.launched);
  b.add_enforced(enforced);
  b.add_temp_dir(temp_dir);
  b.add_setup_step(step);
  b.add_setup_errno(r.setup_errno);
  b.add_message(message);
  b.add_stdout_bytes(r.stdout_bytes);
  b.add_stderr_bytes(r.stderr_bytes);
  return b.Finish();
}

flatbuffers::Offset<flatbuffers::Vector<flatbuffers::Offset<Layer>>> write_layers(
    flatbuffers::FlatBufferBuilder& fbb, const std::vector<LayerInfo>& layers) {
  std::vector<flatbuffers::Offset<Layer>> v;
  for (const auto& l : layers)
    v.push_back(CreateLayer(fbb, fbb.CreateString(l.name), l.available, fbb.CreateString(l.reason)));
  return fbb.CreateVector(v);
}

}  // namespace

Frame make_hello(std::string_view client_name) {
  flatbuffers::FlatBufferBuilder fbb(128);
  auto name = fbb.CreateString(client_name);
  return finish(fbb, 0, CreateHello(fbb, kProtocolVersion, name));
}

Frame make_hello_reply(std::string_view server_version, const std::vector<LayerInfo>& layers,
                       std::uint32_t max_frame) {
  flatbuffers::FlatBufferBuilder fbb(512);
  auto version = fbb.CreateString(server_version);
  auto ls = write_layers(fbb, layers);
  return finish(fbb, 0, CreateHelloReply(fbb, kProtocolVersion, version, ls, max_frame));
}

Frame make_exec(std::uint64_t request_id, const ExecArgs& a) {
  flatbuffers::FlatBufferBuilder fbb(256 + (a.stdin_data ? a.stdin_data->size() : 0));
  flatbuffers::Offset<flatbuffers::Vector<flatbuffers::Offset<flatbuffers::String>>> argv;
  if (!a.argv.empty()) argv = fbb.CreateVectorOfStrings(a.argv);
  flatbuffers::Offset<flatbuffers::String> shell;
  if (a.shell) shell = fbb.CreateString(*a.shell);
  std::vector<flatbuffers::Offset<EnvVar>> env;
  for (const auto& [k, v] : a.env) env.push_back(CreateEnvVar(fbb, fbb.CreateString(k), fbb.CreateString(v)));
  auto env_v = env.empty() ? 0 : fbb.CreateVector(env);
  auto strings = [&](const std::vector<std::string>& v) {
    return v.empty() ? flatbuffers::Offset<flatbuffers::Vector<flatbuffers::Offset<flatbuffers::String>>>()
                     : fbb.CreateVectorOfStrings(v);
  };
  auto workspaces = strings(a.workspaces);
  auto deny_read = strings(a.deny_read);
  auto protect = strings(a.protect);
  auto allow_sockets = strings(a.allow_sockets);
  std::vector<flatbuffers::Offset<Bind>> binds;
  for (const auto& b : a.binds)
    binds.push_back(CreateBind(fbb, fbb.CreateString(b.source), fbb.CreateString(b.target), b.writable));
  auto binds_v = binds.empty() ? 0 : fbb.CreateVector(binds);
  auto scope = a.scope.empty() ? 0 : fbb.CreateString(a.scope);
  auto cwd = a.cwd.empty() ? 0 : fbb.CreateString(a.cwd);
  flatbuffers::Offset<flatbuffers::Vector<std::uint8_t>> in;
  if (a.stdin_data)
    in = fbb.CreateVector(reinterpret_cast<const std::uint8_t*>(a.stdin_data->data()), a.stdin_data->size());
  ExecRequestBuilder b(fbb);
  b.add_argv(argv);
  b.add_shell(shell);
  if (!env.empty()) b.add_env(env_v);
  b.add_cwd(cwd);
  b.add_stdin(in);
  b.add_timeout_ms(a.timeout_ms);
  b.add_grace_ms(a.grace_ms);
  b.add_max_output_bytes(a.max_output_bytes);
  if (a.mode) b.add_mode(*a.mode);
  if (a.network) b.add_network(*a.network);
  b.add_workspaces(workspaces);
  b.add_deny_read(deny_read);
  b.add_protect(protect);
  if (!binds.empty()) b.add_binds(binds_v);
  if (a.memory_bytes) b.add_memory_bytes(*a.memory_bytes);
  if (a.pids) b.add_pids(*a.pids);
  b.add_cpu_time_ms(a.cpu_time_ms);
  b.add_cpus(a.cpus);
  b.add_max_file_size(a.max_file_size);
  b.add_scope(scope);
  b.add_background(a.background);
  b.add_authorize(a.authorize);
  b.add_allow_sockets(allow_sockets);
  return finish(fbb, request_id, b.Finish());
}

Frame make_output(std::uint64_t request_id, Stream stream, std::string_view data) {
  // Headroom for the tables around the bytes: a full 64 KiB chunk must not reallocate.
  flatbuffers::FlatBufferBuilder fbb(data.size() + 256);
  auto bytes = fbb.CreateVector(reinterpret_cast<const std::uint8_t*>(data.data()), data.size());
  return finish(fbb, request_id, CreateOutputChunk(fbb, stream, bytes));
}

Frame make_cancel(std::uint64_t request_id, bool force) {
  flatbuffers::FlatBufferBuilder fbb(64);
  return finish(fbb, request_id, CreateCancel(fbb, force));
}

Frame make_status_request(std::uint64_t request_id) {
  flatbuffers::FlatBufferBuilder fbb(64);
  return finish(fbb, request_id, CreateStatusRequest(fbb));
}

Frame make_status_reply(std::uint64_t request_id, const StatusInfo& info) {
  flatbuffers::FlatBufferBuilder fbb(1024);
  auto version = fbb.CreateString(info.server_version);
  auto layers = write_layers(fbb, info.layers);
  auto path = fbb.CreateString(info.socket_path);
  std::vector<flatbuffers::Offset<Bound>> bounds;
  for (const auto& d : info.defaults)
    bounds.push_back(CreateBound(fbb, fbb.CreateString(d.name), d.value, d.enforced, fbb.CreateString(d.how)));
  auto defaults = fbb.CreateVector(bounds);
  return finish(fbb, request_id,
                CreateStatusReply(fbb, version, kProtocolVersion, layers, info.pid, info.uptime_ms,
                                  info.connections, info.running_commands, path, defaults));
}

Frame make_error(std::uint64_t request_id, ErrorCode code, std::string_view message) {
  flatbuffers::FlatBufferBuilder fbb(128 + message.size());
  auto m = fbb.CreateString(message);
  return finish(fbb, request_id, CreateError(fbb, code, m));
}

Frame make_read(std::uint64_t request_id, const FileArgs& a) {
  flatbuffers::FlatBufferBuilder fbb(256);
  auto path = fbb.CreateString(a.path);
  auto ws = fbb.CreateVectorOfStrings(a.workspaces);
  auto scope = a.scope.empty() ? 0 : fbb.CreateString(a.scope);
  return finish(fbb, request_id, CreateReadRequest(fbb, path, ws, a.offset, a.max_bytes, a.binary, opt(a.mode), scope));
}

Frame make_write(std::uint64_t request_id, const FileArgs& a) {
  flatbuffers::FlatBufferBuilder fbb(256 + a.data.size());
  auto path = fbb.CreateString(a.path);
  auto ws = fbb.CreateVectorOfStrings(a.workspaces);
  auto scope = a.scope.empty() ? 0 : fbb.CreateString(a.scope);
  auto data = fbb.CreateVector(reinterpret_cast<const std::uint8_t*>(a.data.data()), a.data.size());
  return finish(fbb, request_id, CreateWriteRequest(fbb, path, ws, data, a.binary, opt(a.mode), scope));
}

Frame make_list(std::uint64_t request_id, const FileArgs& a) {
  flatbuffers::FlatBufferBuilder fbb(256);
  auto path = fbb.CreateString(a.path);
  auto ws = fbb.CreateVectorOfStrings(a.workspaces);
  auto scope = a.scope.empty() ? 0 : fbb.CreateString(a.scope);
  return finish(fbb, request_id, CreateListRequest(fbb, path, ws, a.max_entries, opt(a.mode), scope));
}

Frame make_worker_start(std::uint64_t request_id, const WorkerStartArgs& a) {
  flatbuffers::FlatBufferBuilder fbb(256);
  auto name = fbb.CreateString(a.name);
  auto scope = a.scope.empty() ? 0 : fbb.CreateString(a.scope);
  auto argv = fbb.CreateVectorOfStrings(a.argv);
  auto ws = fbb.CreateVectorOfStrings(a.workspaces);
  auto sockets = a.allow_sockets.empty() ? 0 : fbb.CreateVectorOfStrings(a.allow_sockets);
  WorkerStartBuilder b(fbb);
  b.add_name(name);
  b.add_scope(scope);
  b.add_argv(argv);
  b.add_workspaces(ws);
  if (a.mode) b.add_mode(*a.mode);
  if (a.network) b.add_network(*a.network);
  if (a.memory_bytes) b.add_memory_bytes(*a.memory_bytes);
  if (a.pids) b.add_pids(*a.pids);
  b.add_cpus(a.cpus);
  b.add_idle_timeout_ms(a.idle_timeout_ms);
  b.add_python(a.python);
  b.add_allow_sockets(sockets);
  return finish(fbb, request_id, b.Finish());
}

Frame make_worker_eval(std::uint64_t request_id, const WorkerEvalArgs& a) {
  flatbuffers::FlatBufferBuilder fbb(256 + a.request.size());
  auto name = fbb.CreateString(a.name);
  auto scope = a.scope.empty() ? 0 : fbb.CreateString(a.scope);
  auto data = fbb.CreateVector(reinterpret_cast<const std::uint8_t*>(a.request.data()), a.request.size());
  return finish(fbb, request_id, CreateWorkerEval(fbb, name, scope, data, a.timeout_ms, a.reset, a.serve_host_calls));
}

Frame make_host_reply(std::uint64_t request_id, std::uint64_t call_id, std::string_view data, std::string_view error) {
  flatbuffers::FlatBufferBuilder fbb(128 + data.size());
  auto bytes = fbb.CreateVector(reinterpret_cast<const std::uint8_t*>(data.data()), data.size());
  auto err = error.empty() ? 0 : fbb.CreateString(error);
  return finish(fbb, request_id, CreateHostReply(fbb, call_id, bytes, err));
}

Frame make_authorization(std::uint64_t request_id, bool grant, std::string_view reason) {
  flatbuffers::FlatBufferBuilder fbb(128);
  auto r = reason.empty() ? 0 : fbb.CreateString(reason);
  return finish(fbb, request_id, CreateAuthorization(fbb, grant, r));
}

Frame make_scope_create(std::uint64_t request_id, const ScopeArgs& a) {
  flatbuffers::FlatBufferBuilder fbb(256);
  auto parent = a.parent.empty() ? 0 : fbb.CreateString(a.parent);
  auto ws = a.workspaces.empty() ? 0 : fbb.CreateVectorOfStrings(a.workspaces);
  auto deny = a.deny_read.empty() ? 0 : fbb.CreateVectorOfStrings(a.deny_read);
  auto protect = a.protect.empty() ? 0 : fbb.CreateVectorOfStrings(a.protect);
  return finish(fbb, request_id,
                CreateScopeCreate(fbb, parent, a.detach, opt(a.mode), opt(a.network), ws, deny, protect, opt(a.memory_bytes),
                                  opt(a.pids), a.cpu_time_ms, a.cpus, a.max_file_size));
}

Frame make_scope_close(std::uint64_t request_id, const std::string& id) {
  flatbuffers::FlatBufferBuilder fbb(64);
  auto s = fbb.CreateString(id);
  return finish(fbb, request_id, CreateScopeClose(fbb, s));
}

Frame make_scope_list(std::uint64_t request_id) {
  flatbuffers::FlatBufferBuilder fbb(64);
  return finish(fbb, request_id, CreateScopeListRequest(fbb));
}

Frame make_poll(std::uint64_t request_id, const std::string& id) {
  flatbuffers::FlatBufferBuilder fbb(64);
  auto s = fbb.CreateString(id);
  return finish(fbb, request_id, CreatePoll(fbb, s));
}

Frame make_background_stop(std::uint64_t request_id, const std::string& id, bool force) {
  flatbuffers::FlatBufferBuilder fbb(64);
  auto s = fbb.CreateString(id);
  return finish(fbb, request_id, CreateBackgroundStop(fbb, s, force));
}

Frame make_worker_stop(std::uint64_t request_id, const std::string& name, const std::string& scope, bool force) {
  flatbuffers::FlatBufferBuilder fbb(128);
  auto n = fbb.CreateString(name);
  auto s = fbb.CreateString(scope);
  return finish(fbb, request_id, CreateWorkerStop(fbb, n, s, force));
}

Frame make_worker_list(std::uint64_t request_id, const std::string& scope) {
  flatbuffers::FlatBufferBuilder fbb(128);
  auto s = fbb.CreateString(scope);
  return finish(fbb, request_id, CreateWorkerListRequest(fbb, s));
}

Frame make_worker_logs(std::uint64_t request_id, const std::string& name, const std::string& scope) {
  flatbuffers::FlatBufferBuilder fbb(128);
  auto n = fbb.CreateString(name);
  auto s = fbb.CreateString(scope);
  return finish(fbb, request_id, CreateWorkerLogsRequest(fbb, n, s));
}

Frame make_ack(std::uint64_t request_id) {
  flatbuffers::FlatBufferBuilder fbb(64);
  return finish(fbb, request_id, CreateAck(fbb));
}

Frame make_scope_created(std::uint64_t request_id, const std::string& id, const std::string& temp_dir) {
  flatbuffers::FlatBufferBuilder fbb(128);
  auto i = fbb.CreateString(id);
  auto t = fbb.CreateString(temp_dir);
  return finish(fbb, request_id, CreateScopeCreated(fbb, i, t));
}

Frame make_scope_list_reply(std::uint64_t request_id, const std::vector<ScopeListEntry>& scopes) {
  flatbuffers::FlatBufferBuilder fbb(1024);
  std::vector<flatbuffers::Offset<ScopeInfo>> infos;
  for (const auto& s : scopes) {
    auto ws = fbb.CreateVectorOfStrings(s.workspaces);
    auto deny = fbb.CreateVectorOfStrings(s.deny_read);
    auto protect = fbb.CreateVectorOfStrings(s.protect);
    auto id = fbb.CreateString(s.id);
    auto parent = fbb.CreateString(s.parent);
    auto temp = fbb.CreateString(s.temp_dir);
    ScopeInfoBuilder b(fbb);
    b.add_id(id);
    b.add_parent(parent);
    b.add_owner_uid(s.owner_uid);
    b.add_detached(s.detached);
    b.add_mode(s.mode);
    b.add_network(s.network);
    b.add_workspaces(ws);
    b.add_temp_dir(temp);
    b.add_background(s.background);
    b.add_workers(s.workers);
    b.add_deny_read(deny);
    b.add_protect(protect);
    if (s.memory_bytes) b.add_memory_bytes(*s.memory_bytes);
    if (s.pids) b.add_pids(*s.pids);
    b.add_cpu_time_ms(s.cpu_time_ms);
    b.add_cpus(s.cpus);
    b.add_max_file_size(s.max_file_size);
    b.add_ceiling(s.ceiling);
    infos.push_back(b.Finish());
  }
  auto v = fbb.CreateVector(infos);
  return finish(fbb, request_id, CreateScopeList(fbb, v));
}

Frame make_background_started(std::uint64_t request_id, const std::string& id, const std::string& scope) {
  flatbuffers::FlatBufferBuilder fbb(128);
  auto i = fbb.CreateString(id);
  auto s = fbb.CreateString(scope);
  return finish(fbb, request_id, CreateBackgroundStarted(fbb, i, s));
}

Frame make_exec_result(std::uint64_t request_id, const ExecResultInfo& result) {
  flatbuffers::FlatBufferBuilder fbb(256);
  auto body = write_exec_result(fbb, result);
  return finish(fbb, request_id, body);
}

Frame make_poll_reply(std::uint64_t request_id, const PollInfo& info) {
  flatbuffers::FlatBufferBuilder fbb(256 + info.out.size() + info.err.size());
  auto id = fbb.CreateString(info.id);
  auto state = fbb.CreateString(info.state);
  auto out = write_bytes(fbb, info.out);
  auto err = write_bytes(fbb, info.err);
  flatbuffers::Offset<ExecResult> result;
  if (info.result) result = write_exec_result(fbb, *info.result);
  return finish(fbb, request_id, CreatePollReply(fbb, id, state, out, err, result));
}

Frame make_authorization_request(std::uint64_t request_id, std::string_view description, std::uint64_t deadline_ms) {
  flatbuffers::FlatBufferBuilder fbb(description.size() + 64);
  auto d = fbb.CreateString(description);
  return finish(fbb, request_id, CreateAuthorizationRequest(fbb, d, deadline_ms));
}

Frame make_read_result(std::uint64_t request_id, std::string_view data, std::uint64_t offset, std::uint64_t file_size,
                       bool truncated) {
  flatbuffers::FlatBufferBuilder fbb(data.size() + 256);
  auto d = write_bytes(fbb, data);
  return finish(fbb, request_id, CreateReadResult(fbb, d, offset, file_size, truncated));
}

Frame make_write_result(std::uint64_t request_id, std::uint64_t bytes) {
  flatbuffers::FlatBufferBuilder fbb(64);
  return finish(fbb, request_id, CreateWriteResult(fbb, bytes));
}

Frame make_list_result(std::uint64_t request_id, const std::vector<ListEntry>& entries, bool truncated) {
  flatbuffers::FlatBufferBuilder fbb(256 + entries.size() * 64);
  std::vector<flatbuffers::Offset<DirEntry>> v;
  for (const auto& e : entries) {
    auto name = fbb.CreateString(e.name);
    auto type = fbb.CreateString(e.type);
    v.push_back(CreateDirEntry(fbb, name, type, e.size, e.mtime_ms));
  }
  auto list = fbb.CreateVector(v);
  return finish(fbb, request_id, CreateListResult(fbb, list, truncated));
}

Frame make_worker_started(std::uint64_t request_id, const std::string& name, const std::string& scope) {
  flatbuffers::FlatBufferBuilder fbb(128);
  auto n = fbb.CreateString(name);
  auto s = fbb.CreateString(scope);
  return finish(fbb, request_id, CreateWorkerStarted(fbb, n, s));
}

Frame make_worker_list_reply(std::uint64_t request_id, const std::vector<WorkerListEntry>& workers) {
  flatbuffers::FlatBufferBuilder fbb(512);
  std::vector<flatbuffers::Offset<WorkerInfo>> infos;
  for (const auto& w : workers) {
    auto name = fbb.CreateString(w.name);
    auto scope = fbb.CreateString(w.scope);
    auto state = fbb.CreateString(w.state);
    auto argv = fbb.CreateVectorOfStrings(w.argv);
    infos.push_back(CreateWorkerInfo(fbb, name, scope, state, w.evaluations, argv, w.pid));
  }
  auto v = fbb.CreateVector(infos);
  return finish(fbb, request_id, CreateWorkerList(fbb, v));
}

Frame make_worker_logs_reply(std::uint64_t request_id, std::string_view data) {
  flatbuffers::FlatBufferBuilder fbb(data.size() + 64);
  auto d = write_bytes(fbb, data);
  return finish(fbb, request_id, CreateWorkerLogs(fbb, d));
}

Frame make_worker_eval_result(std::uint64_t request_id, std::string_view reply, std::uint32_t host_calls) {
  flatbuffers::FlatBufferBuilder fbb(reply.size() + 64);
  auto d = write_bytes(fbb, reply);
  return finish(fbb, request_id, CreateWorkerEvalResult(fbb, d, host_calls));
}

Frame make_evaluate(std::uint64_t request_id, std::string_view data) {
  flatbuffers::FlatBufferBuilder fbb(data.size() + 64);
  auto d = write_bytes(fbb, data);
  return finish(fbb, request_id, CreateEvaluate(fbb, d));
}

Frame make_host_call(std::uint64_t request_id, std::uint64_t call_id, std::string_view data) {
  flatbuffers::FlatBufferBuilder fbb(data.size() + 64);
  auto d = write_bytes(fbb, data);
  return finish(fbb, request_id, CreateHostCall(fbb, call_id, d));
}

Frame make_eval_reply(std::uint64_t request_id, std::string_view data) {
  flatbuffers::FlatBufferBuilder fbb(data.size() + 64);
  auto d = write_bytes(fbb, data);
  return finish(fbb, request_id, CreateEvalReply(fbb, d));
}

std::vector<LayerInfo> read_layers(const flatbuffers::Vector<flatbuffers::Offset<Layer>>* v) {
  std::vector<LayerInfo> out;
  if (!v) return out;
  for (const Layer* l : *v) out.push_back({str(l->name()), l->available(), str(l->reason())});
  return out;
}

std::vector<BoundInfo> read_bounds(const flatbuffers::Vector<flatbuffers::Offset<Bound>>* v) {
  std::vector<BoundInfo> out;
  if (!v) return out;
  for (const Bound* b : *v) out.push_back({str(b->name()), b->value(), b->enforced(), str(b->how())});
  return out;
}

}  // namespace corral::proto
