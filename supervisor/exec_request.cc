#include "supervisor/exec_request.h"

#include <filesystem>

#include "runtime/units.h"
#include "supervisor/audit.h"
#include "supervisor/background.h"
#include "supervisor/json_text.h"
#include "supervisor/requests.h"
#include "worker_proto/messages.h"

namespace corral::supervisor {

using std::chrono::milliseconds;

StatusOr<Mode> from_wire(proto::Mode m) {
  switch (m) {
    case proto::Mode::read_only: return Mode::read_only;
    case proto::Mode::workspace_write: return Mode::workspace_write;
    case proto::Mode::danger_full_access: return Mode::danger_full_access;
  }
  return Status::invalid("unknown mode " + std::to_string(static_cast<int>(m)));
}

StatusOr<Network> from_wire(proto::Network n) {
  switch (n) {
    case proto::Network::denied: return Network::denied;
    case proto::Network::allowed: return Network::allowed;
  }
  return Status::invalid("unknown network policy " + std::to_string(static_cast<int>(n)));
}

proto::Mode to_wire(Mode m) {
  switch (m) {
    case Mode::read_only: return proto::Mode::read_only;
    case Mode::danger_full_access: return proto::Mode::danger_full_access;
    case Mode::workspace_write: break;
  }
  return proto::Mode::workspace_write;
}

proto::Network to_wire(Network n) { return n == Network::allowed ? proto::Network::allowed : proto::Network::denied; }

std::vector<std::string> strings(const flatbuffers::Vector<flatbuffers::Offset<flatbuffers::String>>* v) {
  std::vector<std::string> out;
  if (v)
    for (const auto* s : *v) out.push_back(s ? s->str() : std::string());
  return out;
}

StatusOr<Policy> request_policy(const proto::ExecRequest& req, const Policy& scope_policy, Ceiling ceiling,
                              const Credentials* peer) {
  PolicyRequest asked;
  if (auto m = req.mode(); m.has_value()) {
    auto mode = from_wire(*m);
    if (!mode.ok()) return mode.status();
    asked.mode = *mode;
  }
  if (auto n = req.network(); n.has_value()) {
    auto net = from_wire(*n);
    if (!net.ok()) return net.status();
    asked.network = *net;
  }
  // The request's own paths, canonical; the scope's are already.
  // normalize() refuses a writable bind only for a request that itself says read-only; one
  // that inherits a read-only scope's mode is refused by narrow(), naming the scope.
  Policy own;
  own.mode = asked.mode.value_or(Mode::workspace_write);
  own.workspaces = strings(req.workspaces());
  own.deny_read = strings(req.deny_read());
  own.protect = strings(req.protect());
  if (req.binds()) {
    for (const auto* b : *req.binds()) {
      if (!b) continue;
      own.binds.push_back({proto::str(b->source()), proto::str(b->target()), b->writable()});
    }
  }
  if (req.memory_bytes()) own.caps.memory_bytes = *req.memory_bytes();
  if (req.pids()) own.caps.pids = *req.pids();
  if (req.cpu_time_ms()) own.caps.cpu_time = milliseconds(req.cpu_time_ms());
  if (req.cpus() != 0) own.caps.cpus = req.cpus();
  if (req.max_file_size()) own.caps.max_file_size = req.max_file_size();
  if (Status st = normalize(own, peer); !st.ok()) return st;
  asked.workspaces = std::move(own.workspaces);
  asked.deny_read = std::move(own.deny_read);
  asked.protect = std::move(own.protect);
  asked.binds = std::move(own.binds);
  asked.caps = own.caps;
  auto narrowed = narrow(scope_policy, ceiling, asked);
  if (!narrowed.ok()) return narrowed;
  // The effective paths (the scope's included) resolved once more, with the peer's
  // credentials: the descriptors the launch mounts from (runtime/host_path.h).
  if (Status st = normalize(*narrowed, peer); !st.ok()) return st;
  return narrowed;
}

StatusOr<ExecSpec> to_spec(const proto::ExecRequest& req, const ServerOptions& options, const Policy& scope_policy,
                           Ceiling ceiling, const Credentials* peer) {
  ExecSpec spec;
  if (req.argv()) {
    for (const auto* a : *req.argv()) spec.argv.push_back(a ? a->str() : std::string());
  }
  if (req.shell()) spec.shell = req.shell()->str();
  if (req.env()) {
    for (const auto* e : *req.env()) {
      if (!e || !e->name()) return Status::invalid("an environment entry has no name");
      spec.env.emplace_back(e->name()->str(), proto::str(e->value()));
    }
  }
  if (req.cwd()) {
    spec.cwd = req.cwd()->str();
    if (spec.cwd.empty() || spec.cwd[0] != '/')
      return Status::invalid("cwd must be an absolute path, got '" + spec.cwd + "'");
  }
  if (req.stdin()) spec.stdin_data.emplace(reinterpret_cast<const char*>(req.stdin()->data()), req.stdin()->size());

  spec.timeout = req.timeout_ms() ? milliseconds(req.timeout_ms()) : limits::kDefaultTimeout;
  if (req.timeout_ms() > static_cast<std::uint64_t>(options.max_timeout.count()))
    return Status::invalid("timeout " + format_duration(milliseconds(req.timeout_ms())) +
                           " is over the maximum " + format_duration(options.max_timeout) +
                           " (serve --max-timeout)");
  if (req.grace_ms() > static_cast<std::uint64_t>(limits::kMaxGrace.count()))
    return Status::invalid("grace " + format_duration(milliseconds(req.grace_ms())) +
                           " is over the maximum " + format_duration(limits::kMaxGrace));
  spec.grace = req.grace_ms() ? milliseconds(req.grace_ms()) : limits::kDefaultGrace;
  if (req.max_output_bytes() > limits::kMaxOutput)
    return Status::invalid("max output " + format_size(req.max_output_bytes()) +
                           " is over the maximum " + format_size(limits::kMaxOutput));
  spec.max_output = req.max_output_bytes() ? req.max_output_bytes() : limits::kDefaultMaxOutput;
  // Output reaches the client as chunks; the supervisor does not keep a second copy.
  spec.retain_output = false;

  auto policy = request_policy(req, scope_policy, ceiling, peer);
  if (!policy.ok()) return policy.status();
  // --allow-socket is the request's alone (a scope carries none).
  for (const auto& path : strings(req.allow_sockets())) policy->allow_sockets.push_back({path});
  if (Status st = resolve_allow_sockets(*policy); !st.ok()) return st;
  // A missing bind target is made in the sandbox's own view, never on the host
  // (docs/threat-model.md "Binds"), but not where that would cost the command something it
  // was given: directly in / (which cannot be layered), or inside a writable workspace root
  // (whose directory would turn read-only).
  for (const auto& b : policy->binds) {
    std::error_code ec;
    if (std::filesystem::exists(b.target, ec)) continue;
    auto beneath = [&](const std::string& root) { return b.target.rfind(root + "/", 0) == 0; };
    if (policy->mode != Mode::read_only)
      for (const auto& w : policy->workspaces)
        if (beneath(w))
          return Status::invalid("--bind target " + b.target + " does not exist inside the writable workspace root " +
                                 w + ": corral does not create mount points in a workspace; create it first, or bind "
                                 "outside the workspace");
    if (beneath("/tmp")) continue;  // made in the scope's temp dir
    const std::string first = b.target.substr(0, b.target.find('/', 1));
    if (!std::filesystem::exists(first, ec))
      return Status::invalid("--bind target " + b.target + " is refused: " + first +
                             " does not exist, and corral makes no mount point directly in /; bind beneath an "
                             "existing directory (such as /mnt or /opt)");
  }
  // The supervisor's own directories are masked at their own paths in every sandbox; a root
  // that contains one would show it again.
  if (Status st = refuse_hidden(*policy, options.hidden_paths); !st.ok()) return st;
  spec.policy = std::move(policy).value();
  if (Status st = validate(spec); !st.ok()) return st;
  return spec;
}

proto::ExecResultInfo exec_result_info(const Result& r) {
  proto::ExecResultInfo out;
  out.status = static_cast<proto::ExitStatus>(r.status);
  out.exit_code = r.exit_code;
  out.signal = r.signal;
  out.timed_out = r.timed_out;
  out.output_truncated = r.output_truncated;
  out.wall_ms = r.wall_ms;
  out.user_cpu_ms = r.user_cpu_ms;
  out.sys_cpu_ms = r.sys_cpu_ms;
  out.max_rss_kb = r.max_rss_kb;
  out.memory_peak_kb = r.memory_peak_kb;
  out.enforced = r.enforced;
  out.temp_dir = r.temp_dir;
  out.setup_step = r.setup_step;
  out.setup_errno = r.setup_errno;
  out.message = r.message;
  out.stdout_bytes = r.out_bytes;
  out.stderr_bytes = r.err_bytes;
  out.launched = r.launched;
  if (r.policy)
    out.policy = proto::ExecResultInfo::PolicyInfo{to_wire(r.policy->mode), to_wire(r.policy->network),
                                                   r.policy->workspaces, r.policy->deny_read, r.policy->protect};
  return out;
}


}  // namespace corral::supervisor

namespace corral::supervisor {

namespace {

// What will run: the command, where, with what environment names and isolation. Shared by the
// authorization description and the audit record.
void add_command(Json& out, const ExecSpec& spec, const std::string& default_cwd) {
  if (spec.shell) out["sh"] = *spec.shell;
  else out["argv"] = spec.argv;
  out["cwd"] = spec.cwd.empty() ? default_cwd : spec.cwd;
}

void add_policy(Json& out, const ExecSpec& spec) {
  if (!spec.policy) {
    out["sandbox"] = nullptr;
    return;
  }
  const Policy& p = *spec.policy;
  out["mode"] = mode_name(p.mode);
  out["network"] = network_name(p.network);
  out["workspaces"] = p.workspaces;
  out["deny_read"] = p.deny_read;
  out["protect"] = p.protect;
  Json allow_sockets = Json::array();
  for (const auto& a : p.allow_sockets) allow_sockets.push_back(a.path);
  out["allow_sockets"] = std::move(allow_sockets);
  Json binds = Json::array();
  for (const auto& b : p.binds) binds.push_back(b.source + ":" + b.target + (b.writable ? ":rw" : ":ro"));
  out["binds"] = std::move(binds);
  Json caps = Json::object();
  if (p.caps.memory_bytes) caps["memory_bytes"] = *p.caps.memory_bytes;
  if (p.caps.pids) caps["pids"] = *p.caps.pids;
  if (p.caps.cpu_time) caps["cpu_time_ms"] = p.caps.cpu_time->count();
  if (p.caps.cpus) caps["cpus"] = *p.caps.cpus;
  if (p.caps.max_file_size) caps["max_file_size"] = *p.caps.max_file_size;
  out["caps"] = std::move(caps);
}

}  // namespace

std::string authorization_description(const ExecSpec& spec, const std::string& scope) {
  Json out = Json::object();
  add_command(out, spec, "/tmp");  // as the command sees it
  Json env_names = Json::array();
  for (const auto& [k, v] : spec.env) env_names.push_back(k);
  out["env"] = std::move(env_names);
  add_policy(out, spec);
  out["timeout_ms"] = spec.timeout.count();
  out["max_output_bytes"] = spec.max_output;
  out["scope"] = scope;
  return json_text(out);
}

std::string launch_record(uid_t peer_uid, pid_t peer_pid, std::uint64_t request_id, const ExecSpec& spec,
                          const Result& result) {
  Json out = Json::object();
  out["peer_uid"] = peer_uid;
  out["peer_pid"] = peer_pid;
  out["request"] = request_id;
  add_command(out, spec, result.temp_dir);  // the host path (the spec's is filled in at launch)
  add_policy(out, spec);
  out["timeout_ms"] = spec.timeout.count();
  out["max_output"] = spec.max_output;
  out["status"] = status_name(result.status);
  out["exit_code"] = result.exit_code ? Json(*result.exit_code) : Json(nullptr);
  out["signal"] = result.signal;
  out["wall_ms"] = result.wall_ms;
  out["output_bytes"] = result.out_bytes + result.err_bytes;
  out["truncated"] = result.output_truncated;
  if (!result.setup_step.empty()) {
    out["setup_step"] = result.setup_step;
    out["setup_errno"] = result.setup_errno;
  }
  return json_text(out);
}

}  // namespace corral::supervisor

// ExecRequests: the handler (supervisor/requests.h).
namespace corral::supervisor {

using proto::ErrorCode;

void ExecRequests::on_exec(const proto::Message& msg) {
  const std::uint64_t id = msg.request_id();
  const proto::ExecRequest& req = *msg.body_as_ExecRequest();
  Context& ctx = s_.ctx();
  if (id == 0) return s_.send_error(0, ErrorCode::invalid_request, "request_id 0 is reserved for connection-level errors");
  if (!req.background() && s_.in_flight(id))
    return s_.send_error(id, ErrorCode::duplicate_request_id,
                         "request id " + std::to_string(id) + " is already in flight; the running request is unaffected");
  if (!req.background() && running_.size() >= ctx.options.max_in_flight)
    return s_.send_error(id, ErrorCode::too_many_requests,
                         "this connection already has " + std::to_string(running_.size()) +
                             " requests in flight (serve --max-in-flight)");
  // A background command outlives the request: without a named scope it goes to the peer
  // uid's default detached scope.
  const bool named = req.scope() && req.scope()->size() > 0;
  auto scope = named ? s_.scope_for(id, req.scope(), nullptr)
               : req.background() ? ctx.scopes->default_for(s_.peer().uid)
                                  : s_.implicit_scope();
  if (!scope) return;
  if (req.authorize() && req.background())
    return s_.send_error(id, ErrorCode::invalid_request, "an authorized launch runs in the foreground (no --background)");
  auto spec = s_.prepare_spec(id, req, *scope, "cmd-");
  if (!spec) return;
  if (req.background()) {
    // Owned and cancellable instead: no deadline and no total output cap unless the request
    // names them (its unread output waits in the background table's bounded buffers).
    if (req.timeout_ms() == 0) spec->timeout = std::chrono::milliseconds(0);
    if (req.max_output_bytes() == 0) spec->unlimited_output = true;
  }
  ExecSpec logged = *spec;
  logged.stdin_data.reset();

  if (req.background()) {
    // The record outlives this connection: its audit line needs the peer, not the connection.
    auto started = ctx.background->start(std::move(*spec), scope, s_.peer().uid,
                                         [peer = s_.peer(), id, logged](const Result& r) { log_launch(peer, id, logged, r); });
    if (!started.ok()) return s_.send_error(id, ErrorCode::too_many_requests, started.status().message());
    BackgroundTable* table = ctx.background.get();
    s_.queue(proto::make_background_started(id, *started, scope->id()), [table, bg = *started] { table->abandon(bg); });
    return;
  }

  // Every callback below holds the session weakly, and this handler only once it locked it
  // (the handler lives as long as its session).
  std::weak_ptr<Session> weak = s_.weak();
  if (req.authorize()) {
    // Prepared up to exec, then the client is asked; it runs only on a grant in time.
    spec->hold_for_authorization = true;
    spec->on_prepared = [this, weak, id, description = authorization_description(*spec, scope->id())] {
      auto keep = weak.lock();
      if (!keep || s_.closed()) return;
      const auto deadline = s_.ctx().options.authorization_deadline;
      s_.queue(proto::make_authorization_request(id, description, static_cast<std::uint64_t>(deadline.count())));
      auto timer = std::make_unique<asio::steady_timer>(s_.io(), deadline);
      timer->async_wait([this, weak, id](std::error_code ec) {
        auto alive = weak.lock();
        if (ec || !alive || !authorizations_.erase(id)) return;
        if (auto it = running_.find(id); it != running_.end()) it->second.authorize(false, "the authorization deadline passed");
      });
      authorizations_[id] = std::move(timer);
    };
  }

  auto sink = [this, weak, id](StreamId stream, std::string_view data) {
    if (auto keep = weak.lock())
      s_.queue(proto::make_output(id, stream == StreamId::err ? proto::Stream::err : proto::Stream::out, data));
  };
  const std::uint64_t hook = scope->attach([this, weak, id] {
    if (auto keep = weak.lock())
      if (auto it = running_.find(id); it != running_.end()) it->second.terminate();
  });
  // The count and the audit line happen whether or not the session is still there.
  auto done = [this, weak, ctx = &ctx, peer = s_.peer(), id, scope, hook, logged = std::move(logged)](Result result) {
    scope->detach(hook);
    --ctx->running_commands;
    log_launch(peer, id, logged, result);
    if (auto keep = weak.lock()) on_done(id, std::move(result));
  };
  // The final reply carries the retained output: promise its room now, not when it completes.
  s_.reserve(id, spec->max_output + kReplyOverheadBytes);
  ++ctx.running_commands;
  auto [it, inserted] = running_.emplace(id, Execution::start(s_.io(), std::move(*spec), sink, done));
  if (paused_) it->second.pause_output();
}

void ExecRequests::on_done(std::uint64_t id, Result result) {
  authorizations_.erase(id);
  s_.release(id);
  s_.queue(proto::make_exec_result(id, exec_result_info(result)));
  running_.erase(id);
}

void ExecRequests::log_launch(const Peer& peer, std::uint64_t id, const ExecSpec& spec, const Result& result) {
  audit("launch " + launch_record(peer.uid, peer.pid, id, spec, result));
}

bool ExecRequests::on_cancel(const proto::Message& msg) {
  auto it = running_.find(msg.request_id());
  if (it == running_.end()) return false;
  if (msg.body_as_Cancel()->force()) it->second.terminate();
  else it->second.stop();
  return true;
}

void ExecRequests::on_authorization(const proto::Message& msg) {
  const std::uint64_t id = msg.request_id();
  auto pending = authorizations_.find(id);
  auto running = running_.find(id);
  if (pending == authorizations_.end() || running == running_.end())
    // A grant launches at most once; a late or repeated answer changes nothing.
    return s_.send_error(id, ErrorCode::unknown_request_id, "no authorization is pending for request " + std::to_string(id));
  authorizations_.erase(pending);  // cancels its deadline
  const proto::Authorization& a = *msg.body_as_Authorization();
  std::string reason = proto::str(a.reason());
  running->second.authorize(a.grant(), reason.empty() ? "denied by the client" : "denied by the client: " + reason);
}

void ExecRequests::pause_output(bool paused) {
  paused_ = paused;
  for (auto& [id, exec] : running_) paused ? exec.pause_output() : exec.resume_output();
}

void ExecRequests::close() {
  authorizations_.clear();  // their commands are terminated below: "not launched"
  for (auto& [id, exec] : running_) exec.terminate();
}

}  // namespace corral::supervisor
