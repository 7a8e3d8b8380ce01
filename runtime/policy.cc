#include "runtime/policy.h"

#include <filesystem>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "runtime/unique_fd.h"

#include <filesystem>

#include <algorithm>
#include <memory>

#include "runtime/units.h"

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

// Resolves every host path the policy names, with the calling thread's credentials.
Status resolve_all(Policy& policy, ResolvedPaths& out) {
  const bool writable_ws = policy.mode != Mode::read_only;
  auto one = [](const std::string& what, std::string& p, bool writable, std::vector<HostPath>& into) -> Status {
    if (Status st = check_path(what, p); !st.ok()) return st;
    auto r = resolve_host_path(p, what);
    if (!r.ok()) return r.status();
    const bool dir = S_ISDIR(r->st.st_mode);
    if (Status st = check_access(*r, dir ? (R_OK | X_OK) : R_OK, what); !st.ok()) return st;
    if (writable) {
      if (Status st = writable_root_allowed(*r, what); !st.ok()) return st;
      if (Status st = check_access(*r, dir ? (W_OK | X_OK) : W_OK, what); !st.ok()) return st;
    }
    p = r->path;
    into.push_back(std::move(*r));
    return {};
  };
  for (auto& w : policy.workspaces)
    if (Status st = one("--workspace", w, writable_ws, out.workspaces); !st.ok()) return st;
  for (auto& d : policy.deny_read)
    if (Status st = one("--deny-read", d, false, out.deny_read); !st.ok()) return st;
  for (auto& p : policy.protect)
    if (Status st = one("--protect", p, false, out.protect); !st.ok()) return st;
  for (auto& b : policy.binds) {
    if (Status st = one("--bind source", b.source, b.writable && policy.mode != Mode::read_only, out.bind_sources); !st.ok())
      return st;
  }
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

Status normalize(Policy& policy, const Credentials* peer) {
  for (auto& b : policy.binds) {
    if (Status st = check_path("--bind target", b.target); !st.ok()) return st;
    b.target = lexical(b.target);
    if (b.writable && policy.mode == Mode::read_only)
      return Status::invalid("--bind " + b.source + ":" + b.target + ":rw is not allowed in read-only mode");
  }
  auto resolved = std::make_shared<ResolvedPaths>();
  if (Status st = with_credentials(peer, [&] { return resolve_all(policy, *resolved); }); !st.ok()) return st;
  if (peer && peer->uid != 0 && ::geteuid() == 0) resolved->peer_ids = std::make_pair(peer->uid, peer->gid);
  policy.resolved = std::move(resolved);
  // Against the workspace roots as resolved (canonical).
  for (const auto& b : policy.binds)
    if (std::string why = hides(b.target, policy); !why.empty())
      return Status::invalid("--bind target " + b.target + " is refused: " + why);
  if (Status st = refuse_guard_bypass(policy); !st.ok()) return st;
  const Caps& c = policy.caps;
  if (c.limits_memory() && (*c.memory_bytes < cap_limits::kMinMemory || *c.memory_bytes > cap_limits::kMaxMemory))
    return Status::invalid("--memory must be 0 (unlimited) or between 4M and 1024G");
  if (c.limits_pids() && *c.pids > cap_limits::kMaxPids)
    return Status::invalid("--pids must be 0 (unlimited) or between 1 and 1000000");
  if (c.cpus && !(*c.cpus >= cap_limits::kMinCpus && *c.cpus <= cap_limits::kMaxCpus))
    return Status::invalid("--cpus must be between " + format_rate(cap_limits::kMinCpus) + " and " +
                           format_rate(cap_limits::kMaxCpus));
  if (c.cpu_time && *c.cpu_time < cap_limits::kMinCpuTime)
    return Status::invalid("--cpu-time must be at least 10ms");
  if (c.max_file_size && (*c.max_file_size < 1 || *c.max_file_size > cap_limits::kMaxFileSize))
    return Status::invalid("--max-file-size must be between 1 byte and 1P");
  return {};
}

bool beneath(const std::string& path, const std::string& root) {
  return path == root || path.rfind(root == "/" ? root : root + "/", 0) == 0;
}

Status refuse_guard_bypass(const Policy& policy) {
  const bool writable_ws = policy.mode != Mode::read_only;
  auto check = [&](const std::string& what, const std::string& root, bool writable) -> Status {
    if (beneath(root, "/proc"))
      return Status::invalid(what + " " + root + " lies in the host's /proc, which would show the host's processes; "
                             "the command has a /proc of its own");
    for (const auto& d : policy.deny_read)
      if (beneath(root, d) && root != d)
        return Status::invalid(what + " " + root + " lies beneath --deny-read " + d + ", which it would show again");
    if (writable)
      for (const auto& p : policy.protect)
        if (beneath(root, p))
          return Status::invalid(what + " " + root + " is or lies beneath --protect " + p +
                                 ", which it would make writable; bind it read-only");
    return {};
  };
  for (const auto& w : policy.workspaces)
    if (Status st = check("workspace root", w, writable_ws); !st.ok()) return st;
  for (const auto& b : policy.binds)
    if (Status st = check("--bind source", b.source, b.writable && writable_ws); !st.ok()) return st;
  return {};
}

Status refuse_hidden(const Policy& policy, const std::vector<std::string>& hidden) {
  for (const auto& h : hidden) {
    // Either way round: a root that contains one shows it; one inside it (the socket itself,
    // another scope's temp dir) shows a part of it.
    auto contains = [&h](const std::string& root) { return beneath(h, root) || beneath(root, h); };
    auto refuse = [&h](const std::string& what) {
      return Status::invalid(what + " contains or lies in " + h + ", one of the supervisor's own directories (its "
                             "socket's, its temp root or its crash records), which no sandbox may see");
    };
    for (const auto& w : policy.workspaces)
      if (contains(w)) return refuse("workspace root " + w);
    for (const auto& b : policy.binds)
      if (contains(b.source)) return refuse("--bind source " + b.source);
    // A socket is no directory: refused where it lies in one of them (the supervisor's own).
    for (const auto& a : policy.allow_sockets)
      if (beneath(a.path, h)) return refuse("--allow-socket " + a.path);
  }
  return {};
}

}  // namespace corral

namespace corral {

namespace {

int mode_rank(Mode m) {
  switch (m) {
    case Mode::read_only: return 0;
    case Mode::workspace_write: return 1;
    case Mode::danger_full_access: return 2;
  }
  return 3;  // unreachable: an unknown value is never narrower than anything
}

bool beneath_any(const std::string& path, const std::vector<std::string>& roots) {
  for (const auto& r : roots)
    if (beneath(path, r)) return true;
  return false;
}

Status over_ceiling(const std::string& what) { return Status::refused("ceiling", EPERM, what); }

std::string list(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : ", ") + s;
  return out;
}

void add_unique(std::vector<std::string>& to, const std::vector<std::string>& from) {
  for (const auto& p : from)
    if (std::find(to.begin(), to.end(), p) == to.end()) to.push_back(p);
}

// One cap: the request's, the scope's when the request has none, refused over a finite
// scope cap under a ceiling. 0 is unlimited (memory and pids say it explicitly), so it is over
// every finite cap.
template <class T, class Show>
Status narrow_cap(const char* option, const std::optional<T>& scope, const std::optional<T>& asked, bool bounded,
                  Show show, std::optional<T>& out) {
  if (!asked) {
    out = scope;
    return {};
  }
  const bool scope_finite = scope && *scope != T{};
  if (bounded && scope_finite && (*asked == T{} || *asked > *scope))
    return over_ceiling(std::string(option) + " " + (*asked == T{} ? std::string("0 (unlimited)") : show(*asked)) +
                        " is over the scope's " + option + " " + show(*scope));
  out = asked;
  return {};
}

}  // namespace

StatusOr<Policy> narrow(const Policy& scope, Ceiling ceiling, const PolicyRequest& request) {
  const bool bounded = ceiling == Ceiling::bounded;
  Policy out;
  out.sandboxed = scope.sandboxed;
  out.mode = request.mode.value_or(scope.mode);
  if (bounded && mode_rank(out.mode) > mode_rank(scope.mode))
    return over_ceiling(std::string("mode ") + mode_name(out.mode) + " is over the scope's mode " +
                        mode_name(scope.mode));
  out.network = request.network.value_or(scope.network);
  if (bounded && out.network == Network::allowed && scope.network == Network::denied)
    return over_ceiling("network allowed is over the scope's network denied");

  out.workspaces = request.workspaces.empty() ? scope.workspaces : request.workspaces;
  if (bounded && !scope.workspaces.empty())
    for (const auto& w : request.workspaces)
      if (!beneath_any(w, scope.workspaces))
        return over_ceiling("workspace " + w + " is not beneath the scope's workspaces " + list(scope.workspaces));

  out.binds = request.binds;
  for (const auto& b : out.binds) {
    if (!b.writable || !bounded) continue;
    if (scope.mode == Mode::read_only)
      return over_ceiling("--bind " + b.source + ":" + b.target + ":rw is writable; the scope's mode is read-only");
    if (!scope.workspaces.empty() && !beneath_any(b.source, scope.workspaces))
      return over_ceiling("--bind " + b.source + ":" + b.target + ":rw is writable outside the scope's workspaces " +
                          list(scope.workspaces));
  }

  out.deny_read = scope.deny_read;
  add_unique(out.deny_read, request.deny_read);
  out.protect = scope.protect;
  add_unique(out.protect, request.protect);

  auto bytes = [](std::uint64_t v) { return format_size(v); };
  auto count = [](std::uint64_t v) { return std::to_string(v); };
  auto ms = [](std::chrono::milliseconds v) { return format_duration(v); };
  auto rate = [](double v) { return format_rate(v); };
  const Caps& sc = scope.caps;
  const Caps& rc = request.caps;
  if (Status st = narrow_cap("--memory", sc.memory_bytes, rc.memory_bytes, bounded, bytes, out.caps.memory_bytes); !st.ok())
    return st;
  if (Status st = narrow_cap("--pids", sc.pids, rc.pids, bounded, count, out.caps.pids); !st.ok()) return st;
  if (Status st = narrow_cap("--cpu-time", sc.cpu_time, rc.cpu_time, bounded, ms, out.caps.cpu_time); !st.ok())
    return st;
  if (Status st = narrow_cap("--cpus", sc.cpus, rc.cpus, bounded, rate, out.caps.cpus); !st.ok()) return st;
  if (Status st = narrow_cap("--max-file-size", sc.max_file_size, rc.max_file_size, bounded, bytes,
                             out.caps.max_file_size);
      !st.ok())
    return st;
  // Whatever the ceiling, a read-only result shows no writable bind.
  if (out.mode == Mode::read_only)
    for (const auto& b : out.binds)
      if (b.writable)
        return Status::invalid("--bind " + b.source + ":" + b.target + ":rw is not allowed in read-only mode");
  return out;
}

Status resolve_allow_sockets(Policy& policy) {
  if (policy.allow_sockets.size() > kMaxAllowedSockets)
    return Status::invalid("too many --allow-socket paths (max " + std::to_string(kMaxAllowedSockets) + ")");
  for (auto& a : policy.allow_sockets) {
    if (Status st = check_path("--allow-socket", a.path); !st.ok()) return st;
    // No symlink anywhere: a link planted in a directory a sandbox can write must not turn
    // the name the peer gave into another socket. Name the socket by its real path.
    struct open_how how {};
    how.flags = O_PATH | O_CLOEXEC;
    how.resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
    UniqueFd fd(static_cast<int>(::syscall(SYS_openat2, AT_FDCWD, a.path.c_str(), &how, sizeof how)));
    if (!fd) {
      if (errno == ELOOP)
        return Status::invalid("--allow-socket " + a.path + " goes through a symlink: name the socket by its real path");
      return Status::from_errno("path", errno, "--allow-socket '" + a.path + "'");
    }
    struct stat st {};
    if (::fstat(fd.get(), &st) < 0) return Status::from_errno("path", errno, "--allow-socket '" + a.path + "'");
    if (!S_ISSOCK(st.st_mode)) return Status::invalid("--allow-socket " + a.path + " is not a socket");
    a.dev = st.st_dev;
    a.ino = st.st_ino;
    a.uid = st.st_uid;
    a.gid = st.st_gid;
    a.mode = st.st_mode & 07777;
  }
  return {};
}

}  // namespace corral
