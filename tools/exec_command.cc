#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <optional>
#include <iostream>
#include <string>

#include "runtime/limits.h"
#include "runtime/policy.h"
#include "runtime/result.h"
#include "runtime/units.h"
#include "tools/commands.h"
#include "supervisor/json_text.h"
#include "worker_proto/client.h"

namespace corral::cli {
namespace {

Result to_result(const proto::ExecResult& r, std::string out, std::string err) {
  Result res;
  res.status = static_cast<ExitStatus>(r.status());
  if (r.exit_code()) res.exit_code = *r.exit_code();
  res.signal = r.signal();
  res.timed_out = r.timed_out();
  res.output_truncated = r.output_truncated();
  res.out = std::move(out);
  res.err = std::move(err);
  res.out_bytes = r.stdout_bytes();
  res.err_bytes = r.stderr_bytes();
  res.wall_ms = r.wall_ms();
  res.user_cpu_ms = r.user_cpu_ms();
  res.sys_cpu_ms = r.sys_cpu_ms();
  res.max_rss_kb = r.max_rss_kb();
  if (r.memory_peak_kb()) res.memory_peak_kb = *r.memory_peak_kb();
  if (r.launched()) res.launched = *r.launched();
  if (r.enforced())
    for (const auto* e : *r.enforced()) res.enforced.push_back(e->str());
  res.temp_dir = proto::str(r.temp_dir());
  res.setup_step = proto::str(r.setup_step());
  res.setup_errno = r.setup_errno();
  res.message = proto::str(r.message());
  if (r.mode() && r.network()) {  // the effective policy, after the scope's narrowing
    Policy p;
    p.mode = *r.mode() == proto::Mode::read_only            ? Mode::read_only
             : *r.mode() == proto::Mode::danger_full_access ? Mode::danger_full_access
                                                            : Mode::workspace_write;
    p.network = *r.network() == proto::Network::allowed ? Network::allowed : Network::denied;
    auto strings = [](const flatbuffers::Vector<flatbuffers::Offset<flatbuffers::String>>* v) {
      std::vector<std::string> list;
      if (v)
        for (const auto* s : *v) list.push_back(s->str());
      return list;
    };
    p.workspaces = strings(r.workspaces());
    p.deny_read = strings(r.deny_read());
    p.protect = strings(r.protect());
    res.policy = std::move(p);
  }
  return res;
}

std::string result_json(const Result& r) {
  Json j = Json::object();
  j["status"] = status_name(r.status);
  j["exit_code"] = r.exit_code ? Json(*r.exit_code) : Json(nullptr);
  j["signal"] = r.signal ? Json(r.signal) : Json(nullptr);
  j["timed_out"] = r.timed_out;
  j["output_truncated"] = r.output_truncated;
  j["stdout"] = r.out;
  j["stderr"] = r.err;
  j["wall_ms"] = r.wall_ms;
  j["user_cpu_ms"] = r.user_cpu_ms;
  j["sys_cpu_ms"] = r.sys_cpu_ms;
  j["max_rss_kb"] = r.max_rss_kb ? Json(r.max_rss_kb) : Json(nullptr);  // 0: not measured
  j["memory_peak_kb"] = r.memory_peak_kb ? Json(*r.memory_peak_kb) : Json(nullptr);
  j["enforced"] = r.enforced;
  j["temp_dir"] = r.temp_dir;
  if (r.status == ExitStatus::setup_error) {
    j["setup_step"] = r.setup_step;
    j["setup_errno"] = r.setup_errno;
  }
  if (r.launched) j["launched"] = *r.launched;
  if (r.policy) {  // the effective policy, after the scope's narrowing
    j["mode"] = mode_name(r.policy->mode);
    j["network"] = network_name(r.policy->network);
    j["workspaces"] = r.policy->workspaces;
    j["deny_read"] = r.policy->deny_read;
    j["protect"] = r.policy->protect;
  }
  if (!r.message.empty()) j["message"] = r.message;
  return json_text(j);
}

bool build_policy(const ExecOptions& o, proto::ExecArgs& a, std::string& error) {
  a.mode = wire_mode(o.mode);
  a.network = wire_network(o.net);
  a.scope = o.scope;
  a.background = o.background;
  a.authorize = !o.authorize_cmd.empty();
  for (const auto& w : o.workspaces) a.workspaces.push_back(absolute(w));
  for (const auto& d : o.deny_read) a.deny_read.push_back(absolute(d));
  for (const auto& p : o.protect) a.protect.push_back(absolute(p));
  for (const auto& s : o.allow_sockets) a.allow_sockets.push_back(absolute(s));
  for (const auto& b : o.binds) {
    // SRC:DST[:ro|rw]
    auto first = b.find(':');
    if (first == std::string::npos) return error = "--bind needs SRC:DST[:ro|rw], got '" + b + "'", false;
    proto::ExecArgs::BindArg arg;
    arg.source = absolute(b.substr(0, first));
    std::string rest = b.substr(first + 1);
    auto second = rest.rfind(':');
    if (second != std::string::npos) {
      const std::string mode = rest.substr(second + 1);
      if (mode == "ro" || mode == "rw") {
        arg.writable = mode == "rw";
        rest = rest.substr(0, second);
      } else if (mode.find('/') == std::string::npos) {
        // Not a path's tail: a mistyped mode (RW, readonly) must not become part of DST.
        return error = "--bind " + b + ": unknown mode '" + mode + "' (ro or rw)", false;
      }
    }
    arg.target = rest;
    if (arg.source.empty() || arg.target.empty() || arg.target[0] != '/')
      return error = "--bind needs SRC:DST[:ro|rw] with an absolute DST, got '" + b + "'", false;
    a.binds.push_back(arg);
  }
  a.memory_bytes = o.memory;
  a.pids = o.pids;
  a.cpu_time_ms = o.cpu_time_ms.value_or(0);
  a.cpus = o.cpus.value_or(0);
  a.max_file_size = o.max_file_size.value_or(0);
  return true;
}

// Builds the request; false (with a message) for a usage error. Values arrive bounds-checked.
bool build_args(const ExecOptions& o, proto::ExecArgs& a, std::string& error) {
  if (o.shell.has_value() == !o.argv.empty()) {
    error = o.shell ? "give either --sh 'STRING' or -- PROGRAM ARGS, not both"
                    : "no command: use `corral exec -- PROGRAM ARGS...` or `corral exec --sh 'STRING'`";
    return false;
  }
  a.argv = o.argv;
  if (o.shell) {
    if (o.shell->empty()) return error = "--sh needs a non-empty string", false;
    a.shell = *o.shell;
  }
  a.timeout_ms = o.timeout_ms.value_or(0);
  // 0 on the wire means "default"; a zero grace is 1 ms, i.e. SIGKILL right after SIGTERM.
  if (o.grace_ms) a.grace_ms = std::max<std::uint64_t>(1, *o.grace_ms);
  a.max_output_bytes = o.max_output.value_or(0);
  for (const auto& kv : o.env) {
    auto eq = kv.find('=');  // the option's validator made sure there is one, after a name
    a.env.emplace_back(kv.substr(0, eq), kv.substr(eq + 1));
  }
  if (!o.cwd.empty()) {
    char* real = ::realpath(o.cwd.c_str(), nullptr);
    a.cwd = real ? real : o.cwd;  // a missing dir is reported by the supervisor (chdir)
    std::free(real);
    if (a.cwd[0] != '/') {
      char buf[4096];
      if (::getcwd(buf, sizeof buf)) a.cwd = std::string(buf) + "/" + a.cwd;
    }
  }
  if (!build_policy(o, a, error)) return false;
  if (!o.stdin_file.empty()) {
    auto data = read_input(o.stdin_file, limits::kMaxStdin, "--stdin", error);
    if (!data) return false;
    a.stdin_data = std::move(*data);
  }
  return true;
}

}  // namespace

int run_exec(const ExecOptions& o) {
  proto::ExecArgs args;
  std::string error;
  if (!build_args(o, args, error)) return complain(kExecCorralFailed, error);

  if (o.background) {
    if (o.json) return complain(kExecCorralFailed, "--json is for the result record; use `corral poll ID --json`");
    proto::Received reply;
    if (request(o.socket, proto::make_exec(1, args), reply) != kOk) return kExecCorralFailed;
    const proto::BackgroundStarted* started = reply.msg->body_as_BackgroundStarted();
    if (!started) return complain(kExecCorralFailed, "unexpected reply to a background start");
    std::cout << proto::str(started->id()) << std::endl;  // alone on the last line
    return kOk;
  }

  auto client = proto::Client::connect(o.socket, "corral-exec");
  if (!client) return complain(kExecCorralFailed, client.error().message);

  proto::Client::ChunkFn stream;
  if (!o.json) stream = [](proto::Stream s, std::string_view d) { write_all(s == proto::Stream::err ? 2 : 1, d); };
  proto::Client::AuthorizeFn authorizer;
  if (!o.authorize_cmd.empty())
    authorizer = [&](std::string_view description) {
      std::string out, err;
      return run_shell(o.authorize_cmd, std::string(description) + "\n", out, err);
    };
  auto replied = (*client)->exec(1, args, stream, authorizer);
  if (!replied) return complain(kExecCorralFailed, replied.error().message);
  proto::ExecReply& reply = *replied;
  if (const proto::Error* e = reply.error()) return complain(kExecCorralFailed, proto::str(e->message()));
  const proto::ExecResult* r = reply.result();
  if (!r) return complain(kExecCorralFailed, "unexpected final reply from the supervisor");

  Result result = to_result(*r, std::move(reply.out), std::move(reply.err));
  if (o.json) {
    write_all(1, result_json(result) + "\n");
  } else if (result.launched && !*result.launched) {
    complain(0, result.message.empty() ? std::string("not launched") : result.message);
  } else if (result.status == ExitStatus::setup_error) {
    complain(0, result.message);
  } else if (result.status != ExitStatus::exited && !result.message.empty()) {
    complain(0, result.message);
  }
  return cli_exit_code(result);
}

}  // namespace corral::cli
