// WorkerRequests: the handler of worker requests and their host channels (supervisor/requests.h).
#include <fcntl.h>
#include <sys/stat.h>

#include <cstring>

#include <filesystem>

#include <spdlog/spdlog.h>

#include <asio/post.hpp>

#include "supervisor/requests.h"
#include "supervisor/exec_request.h"
#include "supervisor/worker.h"
#include "worker_proto/messages.h"

namespace corral::supervisor {

using proto::ErrorCode;

namespace {

// The shipped Python worker's directory, <dir of the corral executable>/../share/corral/python,
// as laid out both in the build tree and in an installed tree (docs/design.md "Installed
// layout"). /proc/self/exe names the executable as it was started. Empty, with `error` set, if
// the worker is not there (looked for again next time: it may be installed later).
std::string python_dir(std::string& error) {
  std::error_code ec;
  std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) {
    error = "cannot read /proc/self/exe: " + ec.message();
    return {};
  }
  std::filesystem::path dir = exe.parent_path().parent_path() / "share" / "corral" / "python";
  if (!std::filesystem::is_regular_file(dir / "corral_eval_worker.py", ec)) {
    error = "the shipped Python worker is not installed: no " + (dir / "corral_eval_worker.py").string();
    return {};
  }
  return dir.string();
}

std::string worker_key(const Scope& scope, const std::string& name) { return scope.id() + "/" + name; }

bool valid_name(const std::string& n) {
  if (n.empty() || n.size() > 64) return false;
  for (char c : n)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.')) return false;
  return true;
}

// A worker runs a trusted program: an absolute path to a regular, executable file that the
// sandbox cannot have written (outside every writable root, not writable by group or others),
// resolved by descriptor walk (runtime/host_path.h) with the peer's credentials. The descriptor
// is what runs: the same name inside the view may be another file (/tmp is the scope's temp
// dir there). `exec` asks for the execute bit (a program) rather than read (a script).
StatusOr<HostPath> check_trusted(const std::string& path, const Policy& policy, const std::string& temp_dir,
                                 const Credentials& peer, const char* what, bool exec) {
  if (path.empty() || path[0] != '/') return Status::invalid(std::string(what) + " must be an absolute path, got '" + path + "'");
  StatusOr<HostPath> r = Status::invalid("unresolved");
  Status st = with_credentials(&peer, [&] {
    r = resolve_host_path(path, what);
    if (!r.ok()) return r.status();
    return check_access(*r, exec ? X_OK : R_OK, what);
  });
  if (!st.ok()) return st;
  const struct stat& info = r->st;
  if (!S_ISREG(info.st_mode)) return Status::invalid(std::string(what) + " '" + path + "' is not a regular file");
  if (exec && !(info.st_mode & 0111)) return Status::invalid(std::string(what) + " '" + path + "' is not executable");
  if (info.st_mode & 0022) return Status::invalid(std::string(what) + " '" + path + "' is writable by group or others");
  std::vector<std::string> writable = {temp_dir};
  if (policy.mode != Mode::read_only)
    for (const auto& w : policy.workspaces) writable.push_back(w);
  for (const auto& b : policy.binds)
    if (b.writable) writable.push_back(b.source);
  for (const auto& root : writable)
    if (beneath(r->path, root))
      return Status::invalid(std::string(what) + " '" + path + "' lies inside the writable root " + root + "; it must be trusted");
  return r;
}

}  // namespace

// What a worker start does off the loop (WorkerRequests::on_start): the scope's resources and
// the checks of the program and the script.
void WorkerRequests::StartJob::prepare() {
  auto fail = [this](ErrorCode code, Status st) {
    error_code = code;
    error = std::move(st);
  };
  // The program is checked against the scope's temp dir below, so a worker's scope gets its
  // temp dir (and network namespace) now instead of with the launch.
  if (Status st = spec->before_launch(*spec); !st.ok()) return fail(ErrorCode::internal, st);
  spec->before_launch = nullptr;
  auto program = check_trusted(spec->argv[0], *spec->policy, spec->temp_dir, creds, "the worker program", true);
  if (!program.ok()) return fail(ErrorCode::invalid_request, program.status());
  spec->program_fd = program->fd;
  if (python.empty()) return;
  // The script runs from the descriptor checked here, as /dev/fd/4 inside.
  auto script = check_trusted(spec->argv[4], *spec->policy, spec->temp_dir, creds, "the worker script", false);
  if (!script.ok()) return fail(ErrorCode::invalid_request, script.status());
  UniqueFd fd(::open(("/proc/self/fd/" + std::to_string(script->get())).c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return fail(ErrorCode::internal, Status::error("open", errno, "cannot open the worker script: " + std::string(std::strerror(errno))));
  spec->script_fd = std::make_shared<UniqueFd>(std::move(fd));
  const std::string& script_dir = python;  // bound there, read-only
  spec->argv[4] = "/dev/fd/4";
  spec->argv.push_back(script_dir);
}

std::shared_ptr<Worker> WorkerRequests::find(std::uint64_t id, const flatbuffers::String* scope_name,
                                                const flatbuffers::String* name) {
  const bool named = scope_name && scope_name->size() > 0;
  auto scope = named ? s_.scope_for(id, scope_name, nullptr) : s_.ctx().scopes->default_for(s_.peer().uid);
  if (!scope) return nullptr;
  auto it = s_.ctx().workers.find(worker_key(*scope, proto::str(name)));
  if (it == s_.ctx().workers.end()) {
    s_.send_error(id, ErrorCode::not_found, "no worker '" + proto::str(name) + "' in scope " + scope->id());
    return nullptr;
  }
  return it->second;
}

void WorkerRequests::on_start(const proto::Message& msg) {
  const std::uint64_t id = msg.request_id();
  const proto::WorkerStart& req = *msg.body_as_WorkerStart();
  const bool named = req.scope() && req.scope()->size() > 0;
  auto scope = named ? s_.scope_for(id, req.scope(), nullptr) : s_.ctx().scopes->default_for(s_.peer().uid);
  if (!scope) return;
  const std::string name = proto::str(req.name());
  if (!valid_name(name)) {
    s_.send_error(id, ErrorCode::invalid_request, "worker name must be 1-64 of [A-Za-z0-9._-], got '" + name + "'");
    return;
  }
  const std::string key = worker_key(*scope, name);
  if (s_.ctx().workers.count(key) || s_.ctx().starting_workers.count(key)) {
    s_.send_error(id, ErrorCode::invalid_request, "scope " + scope->id() + " already has a worker named '" + name + "'");
    return;
  }
  if (scope->worker_count >= kMaxWorkersPerScope) {
    s_.send_error(id, ErrorCode::too_many_requests, "scope " + scope->id() + " already has " +
                                                     std::to_string(scope->worker_count) + " workers (the limit is " +
                                                     std::to_string(kMaxWorkersPerScope) + ")");
    return;
  }
  // The worker's spec: an ExecRequest's policy rules, with the worker's own fields.
  std::vector<std::string> argv;
  std::string python;  // the shipped Python worker's directory
  if (req.python()) {
    std::string error;
    python = python_dir(error);
    if (python.empty()) {
      s_.send_error(id, ErrorCode::unsupported, error);
      return;
    }
    argv = {"/usr/bin/python3", "-I", "-B", "-u", python + "/corral_eval_worker.py", python};
  } else if (req.argv()) {
    for (const auto* a : *req.argv()) argv.push_back(a ? a->str() : std::string());
  }
  if (argv.empty()) {
    s_.send_error(id, ErrorCode::invalid_request, "no worker program: give argv (an absolute path first) or python");
    return;
  }
  proto::ExecArgs as_exec;
  as_exec.argv = argv;
  if (req.env())
    for (const auto* e : *req.env())
      if (e) as_exec.env.emplace_back(proto::str(e->name()), proto::str(e->value()));
  as_exec.workspaces = strings(req.workspaces());
  // The shipped Python worker's files are shown read-only where they are, also when they
  // live under /tmp (which the sandbox replaces with the scope's temp dir).
  if (req.python()) as_exec.binds.push_back({python, python, false});
  as_exec.allow_sockets = strings(req.allow_sockets());  // resolved, checked and audited as an exec's
  if (req.mode()) as_exec.mode = *req.mode();
  if (req.network()) as_exec.network = *req.network();
  if (req.memory_bytes()) as_exec.memory_bytes = *req.memory_bytes();
  if (req.pids()) as_exec.pids = *req.pids();
  as_exec.cpus = req.cpus();
  const proto::Frame frame = proto::make_exec(id, as_exec);
  auto spec = s_.prepare_spec(id, *proto::GetMessage(frame.data() + proto::kHeaderBytes)->body_as_ExecRequest(), *scope,
                              "worker-");
  if (!spec) return;
  // The scope's temp dir (a tmpfs mount) and network namespace, and the checks of the program
  // and the script (a descriptor walk with the peer's credentials), are filesystem work: off
  // the loop, on the launcher pool. The name and the scope's room are held meanwhile.
  auto job = std::make_shared<StartJob>();
  job->spec = std::make_shared<ExecSpec>(std::move(*spec));
  job->creds = s_.peer().credentials();
  job->python = python;
  job->idle = req.idle_timeout_ms() ? std::chrono::milliseconds(req.idle_timeout_ms()) : kDefaultIdleTimeout;
  Context* ctx = &s_.ctx();
  ctx->starting_workers.insert(key);
  ++scope->worker_count;
  // The job and its hand-back hold the scope weakly (the spec's own hooks do too): neither may
  // be what keeps it alive past the pools' shutdown (supervisor/context.h).
  std::weak_ptr<Scope> weak_scope = scope;
  ctx->launcher->submit([this, job, weak = s_.weak(), ctx, id, key, name, weak_scope, argv0 = argv[0],
                         executor = s_.io().get_executor()] {
    job->prepare();
    asio::post(executor, [this, job, weak, ctx, id, key, name, weak_scope, argv0] {
      ctx->starting_workers.erase(key);
      auto held = weak_scope.lock();
      if (held) --held->worker_count;
      auto keep = weak.lock();  // held to the end: a reply may end the session
      if (!keep) return;  // the session is gone: nobody asked any more
      if (!job->error.ok()) return s_.send_error(id, job->error_code, job->error.message());
      if (!held) return s_.send_error(id, ErrorCode::not_found, "the scope was closed while the worker was starting");
      launch_worker(id, key, name, held, argv0, *job);
    });
  });
}

void WorkerRequests::launch_worker(std::uint64_t id, const std::string& key, const std::string& name,
                                   const std::shared_ptr<Scope>& scope, const std::string& argv0, StartJob& job) {
  if (s_.ctx().workers.count(key)) {  // a start of the same name that finished first
    s_.send_error(id, ErrorCode::invalid_request, "scope " + scope->id() + " already has a worker named '" + name + "'");
    return;
  }
  if (scope->closed()) {
    s_.send_error(id, ErrorCode::not_found, "scope " + scope->id() + " was closed while the worker was starting");
    return;
  }
  ExecSpec* spec = job.spec.get();
  const auto idle = job.idle;
  Context* ctx = &s_.ctx();
  std::weak_ptr<Scope> weak_scope = scope;
  auto worker = std::make_shared<Worker>(s_.io(), name, scope, s_.peer().uid, std::move(*spec), idle,
                                         s_.ctx().options.max_frame, s_.ctx().options.max_worker_queued, [ctx, key, weak_scope] {
                                           ctx->workers.erase(key);
                                           if (auto s = weak_scope.lock()) --s->worker_count;
                                         });
  // The name is taken from now on; the reply waits until the worker is ready (or is not).
  s_.ctx().workers[key] = worker;
  ++scope->worker_count;
  std::weak_ptr<Worker> weak_worker = worker;
  auto on_ready = [this, weak = s_.weak(), weak_worker, id, name, scope_id = scope->id(), argv0](Status st) {
    auto w = weak_worker.lock();
    if (!st.ok()) {
      spdlog::warn("worker start scope={} name={} argv0=\"{}\": {}", scope_id, name, argv0, st.message());
      if (w) w->stop(/*force=*/true);  // leaves the registry
    }
    auto keep = weak.lock();
    if (!keep) return;
    if (!st.ok()) return s_.send_error(id, ErrorCode::internal, st.message());
    s_.queue(proto::make_worker_started(id, name, scope_id));
  };
  if (Status st = worker->start(on_ready); !st.ok()) {
    worker->stop(/*force=*/true);
    s_.send_error(id, ErrorCode::internal, "cannot start worker: " + st.message());
    return;
  }
  spdlog::info("worker start peer_uid={} peer_pid={} scope={} name={} argv0=\"{}\"", s_.peer().uid, s_.peer().pid, scope->id(),
               name, argv0);
}

void WorkerRequests::on_eval(const proto::Message& msg) {
  const std::uint64_t id = msg.request_id();
  const proto::WorkerEval& req = *msg.body_as_WorkerEval();
  if (id == 0) {
    s_.send_error(0, ErrorCode::invalid_request, "request_id 0 is reserved for connection-level errors");
    return;
  }
  if (s_.in_flight(id)) {
    s_.send_error(id, ErrorCode::duplicate_request_id,
               "request id " + std::to_string(id) + " is already in flight; the running request is unaffected");
    return;
  }
  auto worker = find(id, req.scope(), req.name());
  if (!worker) return;
  EvalRequest e;
  e.request_id = id;
  if (req.request()) e.data.assign(reinterpret_cast<const char*>(req.request()->data()), req.request()->size());
  if (req.timeout_ms()) {
    if (req.timeout_ms() > static_cast<std::uint64_t>(s_.ctx().options.max_timeout.count())) {
      s_.send_error(id, ErrorCode::invalid_request, "evaluation timeout is over the maximum (serve --max-timeout)");
      return;
    }
    e.timeout = std::chrono::milliseconds(req.timeout_ms());
  }
  e.serve_host_calls = req.serve_host_calls();
  // The worker knows this session by this handler's address, and reaches it only through
  // these callbacks, which lock the session first.
  e.client = this;
  std::weak_ptr<Session> weak = s_.weak();
  e.send = [this, weak, id](proto::Frame frame) {
    auto keep = weak.lock();
    if (!keep) return;
    // Anything but a relayed HostCall is the evaluation's final reply.
    const auto* m = proto::GetMessage(frame.data() + proto::kHeaderBytes);
    if (m->body_type() != proto::Body::HostCall) {
      evals_.erase(id);
      s_.release(id);
    }
    s_.queue(std::move(frame));
  };
  e.client_congested = [this, weak] {
    auto keep = weak.lock();
    return !keep || s_.congested();
  };
  e.wake_client = [this, weak] {
    if (auto keep = weak.lock()) s_.wake_reader();
  };
  // The worker's reply may be as large as a frame: promise its room now.
  s_.reserve(id, s_.ctx().options.max_frame);
  evals_[id] = worker;
  worker->evaluate(std::move(e), req.reset());
}

void WorkerRequests::on_host_reply(const proto::Message& msg) {
  const std::uint64_t id = msg.request_id();
  const proto::HostReply& r = *msg.body_as_HostReply();
  auto it = evals_.find(id);
  auto worker = it == evals_.end() ? nullptr : it->second.lock();
  std::string data;
  if (r.data()) data.assign(reinterpret_cast<const char*>(r.data()->data()), r.data()->size());
  if (!worker || !worker->host_reply(this, id, r.call_id(), std::move(data), proto::str(r.error())))
    s_.send_error(id, ErrorCode::channel_closed,
               "no open host channel for request " + std::to_string(id) + " call " + std::to_string(r.call_id()) +
                   " (its evaluation has ended); the reply was not delivered");
}

void WorkerRequests::on_stop(const proto::Message& msg) {
  const proto::WorkerStop& req = *msg.body_as_WorkerStop();
  auto worker = find(msg.request_id(), req.scope(), req.name());
  if (!worker) return;
  worker->stop(req.force());
  s_.queue(proto::make_ack(msg.request_id()));
}

void WorkerRequests::on_list(const proto::Message& msg) {
  const std::string only = proto::str(msg.body_as_WorkerListRequest()->scope());
  std::vector<proto::WorkerListEntry> entries;
  for (const auto& [key, w] : s_.ctx().workers) {
    if (!w->scope()->permits(s_.peer().uid) || w->owner() != s_.peer().uid) {
      if (s_.peer().uid != 0) continue;
    }
    if (!only.empty() && w->scope()->id() != only) continue;
    entries.push_back({w->name(), w->scope()->id(), w->state_name(), w->evaluations(), w->argv(),
                       static_cast<std::uint32_t>(std::max(0, static_cast<int>(w->pid())))});
  }
  s_.queue(proto::make_worker_list_reply(msg.request_id(), entries));
}

void WorkerRequests::on_logs(const proto::Message& msg) {
  const proto::WorkerLogsRequest& req = *msg.body_as_WorkerLogsRequest();
  auto worker = find(msg.request_id(), req.scope(), req.name());
  if (!worker) return;
  const std::string& logs = worker->logs();
  s_.queue(proto::make_worker_logs_reply(msg.request_id(), logs));
}

bool WorkerRequests::on_cancel(std::uint64_t id) {
  auto e = evals_.find(id);
  if (e == evals_.end()) return false;
  if (auto w = e->second.lock()) w->cancel(this, id);
  return true;
}

bool WorkerRequests::holds_reading() const {
  for (const auto& [id, weak] : evals_)
    if (auto w = weak.lock(); w && !w->accepts_host_replies()) return true;
  return false;
}

void WorkerRequests::drained() {
  for (auto& [id, weak] : evals_)
    if (auto w = weak.lock()) w->client_drained(this);
}

void WorkerRequests::close() {
  auto evals = std::move(evals_);
  evals_.clear();
  for (auto& [id, weak] : evals)
    if (auto w = weak.lock()) w->client_gone(this);
}

}  // namespace corral::supervisor
