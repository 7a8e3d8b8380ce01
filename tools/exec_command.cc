#include <fcntl.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <iostream>
#include <string>
#include <sstream>

#include "runtime/limits.h"
#include "runtime/policy.h"
#include "runtime/result.h"
#include "runtime/units.h"
#include "tools/commands.h"
#include "tools/json_writer.h"
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
  return res;
}

std::string result_json(const Result& r) {
  JsonWriter j;
  j.begin_object();
  j.field("status", status_name(r.status));
  j.field("exit_code", r.exit_code);
  j.key("signal");
  if (r.signal) j.value(r.signal);
  else j.null();
  j.field("timed_out", r.timed_out);
  j.field("output_truncated", r.output_truncated);
  j.field("stdout", r.out);
  j.field("stderr", r.err);
  j.field("wall_ms", r.wall_ms);
  j.field("user_cpu_ms", r.user_cpu_ms);
  j.field("sys_cpu_ms", r.sys_cpu_ms);
  j.field("max_rss_kb", r.max_rss_kb);
  j.field("memory_peak_kb", r.memory_peak_kb);
  j.begin_array("enforced");
  for (const auto& e : r.enforced) j.value(e);
  j.end_array();
  j.field("temp_dir", r.temp_dir);
  if (r.status == ExitStatus::setup_error) {
    j.field("setup_step", r.setup_step);
    j.field("setup_errno", r.setup_errno);
  }
  if (r.launched) j.field("launched", *r.launched);
  if (!r.message.empty()) j.field("message", r.message);
  j.end_object();
  return j.str();
}

bool build_policy(const ExecOptions& o, proto::ExecArgs& a, std::string& error) {
  if (!parse_mode_arg(o.mode, a.mode, error)) return false;
  if (!parse_net_arg(o.net, a.network, error)) return false;
  a.scope = o.scope;
  a.background = o.background;
  a.authorize = !o.authorize_cmd.empty();
  for (const auto& w : o.workspaces) a.workspaces.push_back(absolute(w));
  for (const auto& d : o.deny_read) a.deny_read.push_back(absolute(d));
  for (const auto& p : o.protect) a.protect.push_back(absolute(p));
  for (const auto& b : o.binds) {
    // SRC:DST[:ro|rw]
    auto first = b.find(':');
    if (first == std::string::npos) return error = "--bind needs SRC:DST[:ro|rw], got '" + b + "'", false;
    proto::ExecArgs::BindArg arg;
    arg.source = absolute(b.substr(0, first));
    std::string rest = b.substr(first + 1);
    auto second = rest.rfind(':');
    if (second != std::string::npos && (rest.substr(second + 1) == "ro" || rest.substr(second + 1) == "rw")) {
      arg.writable = rest.substr(second + 1) == "rw";
      rest = rest.substr(0, second);
    }
    arg.target = rest;
    if (arg.source.empty() || arg.target.empty() || arg.target[0] != '/')
      return error = "--bind needs SRC:DST[:ro|rw] with an absolute DST, got '" + b + "'", false;
    a.binds.push_back(arg);
  }
  if (!o.memory.empty()) {
    auto m = parse_size(o.memory);
    if (!m.ok()) return error = "--memory: " + m.status().message(), false;
    if (*m < cap_limits::kMinMemory || *m > cap_limits::kMaxMemory)
      return error = "--memory must be between 4M and 1024G (got '" + o.memory + "')", false;
    a.memory_bytes = *m;
  }
  if (!o.pids.empty()) {
    char* end = nullptr;
    unsigned long long v = std::strtoull(o.pids.c_str(), &end, 10);
    if (o.pids[0] == '-' || *end || v < 1 || v > cap_limits::kMaxPids)
      return error = "--pids must be a whole number between 1 and 1000000 (got '" + o.pids + "')", false;
    a.pids = v;
  }
  if (!o.cpu_time.empty()) {
    auto t = parse_duration(o.cpu_time);
    if (!t.ok()) return error = "--cpu-time: " + t.status().message(), false;
    if (*t < cap_limits::kMinCpuTime) return error = "--cpu-time must be at least 10ms (got '" + o.cpu_time + "')", false;
    a.cpu_time_ms = static_cast<std::uint64_t>(t->count());
  }
  if (!o.cpus.empty()) {
    char* end = nullptr;
    double v = std::strtod(o.cpus.c_str(), &end);
    if (*end || !(v > 0) || v > cap_limits::kMaxCpus)
      return error = "--cpus must be a number more than 0 and at most 1024 (got '" + o.cpus + "')", false;
    a.cpus = v;
  }
  if (!o.max_file_size.empty()) {
    auto m = parse_size(o.max_file_size);
    if (!m.ok()) return error = "--max-file-size: " + m.status().message(), false;
    if (*m < 1) return error = "--max-file-size must be at least 1 byte", false;
    a.max_file_size = *m;
  }
  return true;
}

// Builds the request; false (with a message) for a usage error.
bool build_args(const ExecOptions& o, proto::ExecArgs& a, std::string& error) {
  if (o.has_shell == !o.argv.empty()) {
    error = o.has_shell ? "give either --sh 'STRING' or -- PROGRAM ARGS, not both"
                        : "no command: use `corral exec -- PROGRAM ARGS...` or `corral exec --sh 'STRING'`";
    return false;
  }
  a.argv = o.argv;
  if (o.has_shell) {
    if (o.shell.empty()) return error = "--sh needs a non-empty string", false;
    a.shell = o.shell;
  }
  if (!o.timeout.empty()) {
    auto t = parse_duration(o.timeout);
    if (!t.ok()) return error = "--timeout: " + t.status().message(), false;
    if (t->count() <= 0) return error = "--timeout must be more than 0 (got '" + o.timeout + "')", false;
    if (*t > limits::kMaxTimeout)
      return error = "--timeout " + o.timeout + " is over the maximum " + format_duration(limits::kMaxTimeout), false;
    a.timeout_ms = static_cast<std::uint64_t>(t->count());
  }
  if (!o.grace.empty()) {
    auto g = parse_duration(o.grace);
    if (!g.ok()) return error = "--grace: " + g.status().message(), false;
    if (*g > limits::kMaxGrace)
      return error = "--grace " + o.grace + " is over the maximum " + format_duration(limits::kMaxGrace), false;
    // 0 on the wire means "default"; a zero grace is 1 ms, i.e. SIGKILL right after SIGTERM.
    a.grace_ms = std::max<std::uint64_t>(1, static_cast<std::uint64_t>(g->count()));
  }
  if (!o.max_output.empty()) {
    auto m = parse_size(o.max_output);
    if (!m.ok()) return error = "--max-output: " + m.status().message(), false;
    if (*m == 0) return error = "--max-output must be at least 1 byte", false;
    if (*m > limits::kMaxOutput)
      return error = "--max-output " + o.max_output + " is over the maximum " + format_size(limits::kMaxOutput), false;
    a.max_output_bytes = *m;
  }
  for (const auto& kv : o.env) {
    auto eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) return error = "--env needs NAME=VALUE, got '" + kv + "'", false;
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
    std::string data;
    if (o.stdin_file == "-") {
      std::ostringstream ss;
      ss << std::cin.rdbuf();
      data = ss.str();
    } else {
      std::ifstream in(o.stdin_file, std::ios::binary);
      if (!in) return error = "--stdin: cannot open " + o.stdin_file + ": " + std::strerror(errno), false;
      std::ostringstream ss;
      ss << in.rdbuf();
      data = ss.str();
    }
    if (data.size() > limits::kMaxStdin)
      return error = "--stdin: " + std::to_string(data.size()) + " bytes is over the " +
                     format_size(limits::kMaxStdin) + " limit", false;
    a.stdin_data = std::move(data);
  }
  return true;
}

}  // namespace

int run_exec(const ExecOptions& o) {
  proto::ExecArgs args;
  std::string error;
  if (!build_args(o, args, error)) return complain(kUsage, error);

  if (o.background) {
    if (o.json) return complain(kUsage, "--json is for the result record; use `corral poll ID --json`");
    proto::Received reply;
    if (request(o.socket, proto::make_exec(1, args), reply) != kOk) return kExecCorralFailed;
    const proto::BackgroundStarted* started = reply.msg->body_as_BackgroundStarted();
    if (!started) return complain(kExecCorralFailed, "unexpected reply to a background start");
    std::cout << proto::str(started->id()) << std::endl;  // alone on the last line
    return kOk;
  }

  auto client = proto::Client::connect(o.socket, error, "corral-exec");
  if (!client) return complain(kExecCorralFailed, error);

  proto::ExecReply reply;
  proto::Client::ChunkFn stream;
  if (!o.json) stream = [](proto::Stream s, std::string_view d) { write_all(s == proto::Stream::err ? 2 : 1, d); };
  proto::Client::AuthorizeFn authorizer;
  if (!o.authorize_cmd.empty())
    authorizer = [&](std::string_view description) {
      std::string out, err;
      return run_shell(o.authorize_cmd, std::string(description) + "\n", out, err);
    };
  if (!client->exec(1, args, stream, reply, authorizer)) return complain(kExecCorralFailed, client->error());
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
