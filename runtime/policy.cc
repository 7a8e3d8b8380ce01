#include "runtime/policy.h"

#include <filesystem>

#include <stdlib.h>

#include <memory>

namespace corral {

const char* mode_name(Mode m) {
  switch (m) {
    case Mode::read_only: return "read-only";
    case Mode::workspace_write: return "workspace-write";
    case Mode::danger_full_access: return "danger-full-access";
  }
  return "?";
}

const char* network_name(Network n) { return n == Network::allowed ? "allowed" : "denied"; }

StatusOr<Mode> parse_mode(const std::string& s) {
  if (s == "read-only") return Mode::read_only;
  if (s == "workspace-write") return Mode::workspace_write;
  if (s == "danger-full-access") return Mode::danger_full_access;
  return Status::invalid("unknown mode '" + s + "' (read-only, workspace-write, danger-full-access)");
}

StatusOr<Network> parse_network(const std::string& s) {
  if (s == "denied") return Network::denied;
  if (s == "allowed") return Network::allowed;
  return Status::invalid("unknown network policy '" + s + "' (denied, allowed)");
}

namespace {

bool has_dotdot(const std::string& p) {
  std::size_t start = 0;
  while (start <= p.size()) {
    std::size_t end = p.find('/', start);
    if (end == std::string::npos) end = p.size();
    if (p.compare(start, end - start, "..") == 0 && end - start == 2) return true;
    start = end + 1;
  }
  return false;
}

Status check_path(const std::string& what, const std::string& p) {
  if (p.empty() || p[0] != '/') return Status::invalid(what + " must be an absolute path, got '" + p + "'");
  if (p.find('\0') != std::string::npos) return Status::invalid(what + " contains a NUL byte");
  if (has_dotdot(p)) return Status::invalid(what + " '" + p + "' contains '..'");
  return {};
}

// Resolves symlinks so that a mount lands where the path really is.
Status canonical(const std::string& what, std::string& p) {
  if (Status st = check_path(what, p); !st.ok()) return st;
  std::unique_ptr<char, decltype(&free)> real(::realpath(p.c_str(), nullptr), &free);
  if (!real) return Status::from_errno("path", errno, what + " '" + p + "'");
  p = real.get();
  return {};
}

// "/a//b/./c/" -> "/a/b/c" (no "..": check_path refused it).
std::string lexical(const std::string& p) {
  std::string out = std::filesystem::path(p).lexically_normal().string();
  while (out.size() > 1 && out.back() == '/') out.pop_back();
  return out;
}

// Why a bind at `target` would hide what the sandbox needs, or empty (docs/threat-model.md
// "Binds"). `target` is lexically normal.
std::string hides(const std::string& target, const Policy& policy) {
  auto at_or_beneath = [&](const std::string& root) { return target == root || target.rfind(root + "/", 0) == 0; };
  auto contains = [&](const std::string& path) { return target == "/" || path == target || path.rfind(target + "/", 0) == 0; };
  if (target == "/") return "it would hide the whole view";
  if (at_or_beneath("/proc")) return "/proc is the command's own PID namespace's";
  if (at_or_beneath("/dev")) return "/dev holds the sandbox's own device nodes";
  if (contains("/tmp")) return "/tmp is the scope's temp dir";
  for (const auto& w : policy.workspaces)
    if (contains(w)) return "it would hide the workspace root " + w;
  return {};
}

}  // namespace

Status normalize(Policy& policy) {
  for (auto& w : policy.workspaces)
    if (Status st = canonical("--workspace", w); !st.ok()) return st;
  for (auto& d : policy.deny_read)
    if (Status st = canonical("--deny-read", d); !st.ok()) return st;
  for (auto& p : policy.protect)
    if (Status st = canonical("--protect", p); !st.ok()) return st;
  for (auto& b : policy.binds) {
    if (Status st = canonical("--bind source", b.source); !st.ok()) return st;
    if (Status st = check_path("--bind target", b.target); !st.ok()) return st;
    b.target = lexical(b.target);
    if (std::string why = hides(b.target, policy); !why.empty())
      return Status::invalid("--bind target " + b.target + " is refused: " + why);
    if (b.writable && policy.mode == Mode::read_only)
      return Status::invalid("--bind " + b.source + ":" + b.target + ":rw is not allowed in read-only mode");
  }
  const Caps& c = policy.caps;
  if (c.memory_bytes && (*c.memory_bytes < cap_limits::kMinMemory || *c.memory_bytes > cap_limits::kMaxMemory))
    return Status::invalid("--memory must be between 4M and 1024G");
  if (c.pids && (*c.pids < 1 || *c.pids > cap_limits::kMaxPids))
    return Status::invalid("--pids must be between 1 and 1000000");
  if (c.cpus && (!(*c.cpus > 0) || *c.cpus > cap_limits::kMaxCpus))
    return Status::invalid("--cpus must be more than 0 and at most 1024");
  if (c.cpu_time && *c.cpu_time < cap_limits::kMinCpuTime)
    return Status::invalid("--cpu-time must be at least 10ms");
  if (c.max_file_size && (*c.max_file_size < 1 || *c.max_file_size > cap_limits::kMaxFileSize))
    return Status::invalid("--max-file-size must be between 1 byte and 1P");
  return {};
}

}  // namespace corral
