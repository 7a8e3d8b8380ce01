#include "supervisor/exec_request.h"

#include <filesystem>

#include "runtime/units.h"
#include "worker_proto/json.h"
#include "worker_proto/messages.h"

namespace corral::supervisor {

using std::chrono::milliseconds;

StatusOr<ExecSpec> to_spec(const proto::ExecRequest& req, const ServerOptions& options, const Policy& scope_defaults) {
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

  Policy policy;
  switch (req.mode()) {
    case proto::Mode::read_only: policy.mode = Mode::read_only; break;
    case proto::Mode::workspace_write: policy.mode = Mode::workspace_write; break;
    case proto::Mode::danger_full_access: policy.mode = Mode::danger_full_access; break;
    default: return Status::invalid("unknown mode " + std::to_string(static_cast<int>(req.mode())));
  }
  switch (req.network()) {
    case proto::Network::denied: policy.network = Network::denied; break;
    case proto::Network::allowed: policy.network = Network::allowed; break;
    default: return Status::invalid("unknown network policy " + std::to_string(static_cast<int>(req.network())));
  }
  auto strings = [](const flatbuffers::Vector<flatbuffers::Offset<flatbuffers::String>>* v) {
    std::vector<std::string> out;
    if (v)
      for (const auto* s : *v) out.push_back(s ? s->str() : std::string());
    return out;
  };
  policy.workspaces = strings(req.workspaces());
  if (policy.workspaces.empty()) policy.workspaces = scope_defaults.workspaces;
  if (req.mode() == proto::Mode::workspace_write) policy.mode = scope_defaults.mode;
  if (req.network() == proto::Network::denied) policy.network = scope_defaults.network;
  policy.deny_read = strings(req.deny_read());
  policy.protect = strings(req.protect());
  if (req.binds()) {
    for (const auto* b : *req.binds()) {
      if (!b) continue;
      policy.binds.push_back({proto::str(b->source()), proto::str(b->target()), b->writable()});
    }
  }
  if (req.memory_bytes()) policy.caps.memory_bytes = req.memory_bytes();
  if (req.pids()) policy.caps.pids = req.pids();
  if (req.cpu_time_ms()) policy.caps.cpu_time = milliseconds(req.cpu_time_ms());
  if (req.cpus() != 0) policy.caps.cpus = req.cpus();
  if (req.max_file_size()) policy.caps.max_file_size = req.max_file_size();
  if (Status st = normalize(policy); !st.ok()) return st;
  // A mount point can be created only where the view is writable: under /tmp (the scope's
  // temp dir) or a writable workspace root; elsewhere the target must already exist.
  for (const auto& b : policy.binds) {
    auto beneath = [&](const std::string& root) { return b.target == root || b.target.rfind(root + "/", 0) == 0; };
    bool creatable = beneath("/tmp");
    if (policy.mode != Mode::read_only)
      for (const auto& w : policy.workspaces) creatable |= beneath(w);
    std::error_code ec;
    if (!creatable && policy.mode != Mode::danger_full_access && !std::filesystem::exists(b.target, ec))
      return Status::invalid("--bind target " + b.target +
                             " does not exist, and the view is read-only outside /tmp and the workspace roots: "
                             "bind to an existing path or to one under /tmp");
  }
  // The socket directory is masked at its own path in every sandbox; a bind would show it
  // again at another path, so a bind may not contain it.
  for (const auto& hidden : options.hidden_paths) {
    auto contains = [&](const std::string& root) {
      return hidden == root || hidden.rfind(root == "/" ? root : root + "/", 0) == 0;
    };
    for (const auto& b : policy.binds)
      if (contains(b.source))
        return Status::invalid("--bind source " + b.source + " contains the supervisor's socket directory " + hidden);
  }
  spec.policy = std::move(policy);
  if (Status st = validate(spec); !st.ok()) return st;
  return spec;
}

proto::Frame make_exec_result(std::uint64_t request_id, const Result& r) {
  flatbuffers::FlatBufferBuilder fbb(256);
  auto body = build_exec_result(fbb, r);
  return proto::finish_frame(fbb, proto::CreateMessage(fbb, request_id, proto::Body::ExecResult, body.Union()));
}

flatbuffers::Offset<proto::ExecResult> build_exec_result(flatbuffers::FlatBufferBuilder& fbb, const Result& r) {
  auto enforced = fbb.CreateVectorOfStrings(r.enforced);
  auto temp_dir = fbb.CreateString(r.temp_dir);
  auto step = r.setup_step.empty() ? 0 : fbb.CreateString(r.setup_step);
  auto message = r.message.empty() ? 0 : fbb.CreateString(r.message);
  proto::ExecResultBuilder b(fbb);
  b.add_status(static_cast<proto::ExitStatus>(r.status));
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
  b.add_stdout_bytes(r.out_bytes);
  b.add_stderr_bytes(r.err_bytes);
  return b.Finish();
}


std::string describe_command(const ExecSpec& spec) {
  std::string out;
  if (spec.shell) {
    out = "sh=";
    proto::append_json_string(out, *spec.shell);
    return out;
  }
  out = "argv=[";
  for (std::size_t i = 0; i < spec.argv.size(); ++i) {
    if (i) out.push_back(',');
    proto::append_json_string(out, spec.argv[i]);
  }
  out.push_back(']');
  return out;
}

}  // namespace corral::supervisor

namespace corral::supervisor {

std::string authorization_description(const ExecSpec& spec, const std::string& scope) {
  std::string out = "{";
  auto key = [&](const char* k) {
    if (out.size() > 1) out.push_back(',');
    proto::append_json_string(out, k);
    out.push_back(':');
  };
  auto list = [&](const char* k, const std::vector<std::string>& v) {
    key(k);
    out.push_back('[');
    for (std::size_t i = 0; i < v.size(); ++i) {
      if (i) out.push_back(',');
      proto::append_json_string(out, v[i]);
    }
    out.push_back(']');
  };
  if (spec.shell) {
    key("sh");
    proto::append_json_string(out, *spec.shell);
  } else {
    list("argv", spec.argv);
  }
  key("cwd");
  proto::append_json_string(out, spec.cwd.empty() ? "/tmp" : spec.cwd);
  std::vector<std::string> env_names;
  for (const auto& [k, v] : spec.env) env_names.push_back(k);
  list("env", env_names);
  const Policy& p = *spec.policy;
  key("mode");
  proto::append_json_string(out, mode_name(p.mode));
  key("network");
  proto::append_json_string(out, network_name(p.network));
  list("workspaces", p.workspaces);
  list("deny_read", p.deny_read);
  list("protect", p.protect);
  std::vector<std::string> binds;
  for (const auto& b : p.binds) binds.push_back(b.source + ":" + b.target + (b.writable ? ":rw" : ":ro"));
  list("binds", binds);
  key("caps");
  out.push_back('{');
  std::string caps;
  auto cap = [&](const char* k, const std::string& v) {
    if (!caps.empty()) caps.push_back(',');
    proto::append_json_string(caps, k);
    caps.push_back(':');
    caps += v;
  };
  if (p.caps.memory_bytes) cap("memory_bytes", std::to_string(*p.caps.memory_bytes));
  if (p.caps.pids) cap("pids", std::to_string(*p.caps.pids));
  if (p.caps.cpu_time) cap("cpu_time_ms", std::to_string(p.caps.cpu_time->count()));
  if (p.caps.cpus) cap("cpus", std::to_string(*p.caps.cpus));
  if (p.caps.max_file_size) cap("max_file_size", std::to_string(*p.caps.max_file_size));
  out += caps + "}";
  key("timeout_ms");
  out += std::to_string(spec.timeout.count());
  key("max_output_bytes");
  out += std::to_string(spec.max_output);
  key("scope");
  proto::append_json_string(out, scope);
  out.push_back('}');
  return out;
}

std::string describe_policy(const ExecSpec& spec) {
  if (!spec.policy) return "sandbox=none";
  const Policy& p = *spec.policy;
  std::string out = std::string("mode=") + mode_name(p.mode) + " net=" + network_name(p.network);
  auto list = [&](const char* name, const std::vector<std::string>& v) {
    if (v.empty()) return;
    out += std::string(" ") + name + "=[";
    for (std::size_t i = 0; i < v.size(); ++i) {
      if (i) out.push_back(',');
      proto::append_json_string(out, v[i]);
    }
    out.push_back(']');
  };
  list("workspaces", p.workspaces);
  list("deny_read", p.deny_read);
  list("protect", p.protect);
  for (const auto& b : p.binds) out += " bind=" + b.source + ":" + b.target + (b.writable ? ":rw" : ":ro");
  if (p.caps.memory_bytes) out += " memory=" + format_size(*p.caps.memory_bytes);
  if (p.caps.pids) out += " pids=" + std::to_string(*p.caps.pids);
  if (p.caps.cpu_time) out += " cpu_time=" + format_duration(*p.caps.cpu_time);
  if (p.caps.cpus) out += " cpus=" + std::to_string(*p.caps.cpus);
  if (p.caps.max_file_size) out += " max_file_size=" + format_size(*p.caps.max_file_size);
  return out;
}

}  // namespace corral::supervisor
