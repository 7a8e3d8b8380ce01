// Policy: what isolation a command asks for (docs/threat-model.md "Policy by mode"), as a value.
//
// Dangerous switches are spelled out: Mode::danger_full_access and Network::allowed are never
// defaults, and code that grants them names them (grep for "danger_full_access").
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "runtime/host_path.h"
#include "runtime/limits.h"
#include "runtime/status.h"

namespace corral {

enum class Mode { read_only, workspace_write, danger_full_access };
enum class Network { denied, allowed };

const char* mode_name(Mode m);        // "read-only", "workspace-write", "danger-full-access"
const char* network_name(Network n);  // "denied", "allowed"
StatusOr<Mode> parse_mode(const std::string& s);
StatusOr<Network> parse_network(const std::string& s);

// A host path shown at another path inside the sandbox.
struct Bind {
  std::string source;
  std::string target;
  bool writable = false;
};

// A host socket a request names with --allow-socket: reachable from the confining modes,
// where every other host socket is not (docs/threat-model.md, "Host IPC"). normalize()
// resolves the path (no symlinks anywhere on it) and records what it found.
struct AllowedSocket {
  std::string path;
  std::uint64_t dev = 0, ino = 0;  // the socket's identity: the broker allows exactly this inode
  std::uint32_t uid = 0, gid = 0, mode = 0;
};
inline constexpr std::size_t kMaxAllowedSockets = 16;

// Absent: not asked for (the scope's cap; else, for memory and pids, the supervisor's default
// bound, docs/design.md "Bounds"). memory_bytes and pids may be 0: unlimited, said explicitly,
// so that no default applies.
struct Caps {
  std::optional<std::uint64_t> memory_bytes;       // whole tree (cgroup)
  std::optional<std::uint64_t> pids;               // whole tree (cgroup)
  std::optional<std::chrono::milliseconds> cpu_time;  // total CPU of the tree; past it: cpu_limit
  std::optional<double> cpus;                      // a rate: 0.5 = half a CPU (cgroup CFS quota)
  std::optional<std::uint64_t> max_file_size;      // RLIMIT_FSIZE, bytes
  // A finite memory / pids cap was asked for (and must be enforced, or the launch refused).
  bool limits_memory() const { return memory_bytes && *memory_bytes != 0; }
  bool limits_pids() const { return pids && *pids != 0; }
  bool any_cgroup() const { return limits_memory() || limits_pids() || cpu_time || cpus; }
};


// What normalize() resolved, parallel to the Policy's own lists: the descriptors that mounts,
// idmaps and Landlock use (never the names again). Shared by copies of the Policy.
struct ResolvedPaths {
  std::vector<HostPath> workspaces, deny_read, protect, bind_sources;
  // Whose rights a writable root carries inside (its idmapped mount, runtime/sandbox.cc
  // plan_view): a non-root peer's uid and gid, checked by a root supervisor, are the ids the
  // sandbox uid writes as; absent (a root peer, or a supervisor checking with its own rights),
  // each root's owner. Being able to write a directory is not owning what is in it (/var/tmp).
  std::optional<std::pair<uid_t, gid_t>> peer_ids;
};

struct Policy {
  bool sandboxed = true;  // false only for the engine's own unit tests of the bare path
  Mode mode = Mode::workspace_write;
  Network network = Network::denied;
  std::vector<std::string> workspaces;   // absolute; first is the default for file tools
  std::vector<std::string> deny_read;    // masked inside
  std::vector<std::string> protect;      // read-only even inside a writable root
  std::vector<Bind> binds;
  std::vector<AllowedSocket> allow_sockets;  // --allow-socket, also shown at its own path
  Caps caps;
  std::shared_ptr<const ResolvedPaths> resolved;  // set by normalize()
};

// --allow-socket: checks each path (absolute, no "..", at most kMaxAllowedSockets), opens it
// with no symlink anywhere on the way, and records the socket's identity (refused if it is not
// a socket). The message names the option.
Status resolve_allow_sockets(Policy& policy);

// Checks shapes and bounds (absolute paths, no "..", caps in range, binds ro in read-only
// mode) and resolves every host path by descriptor walk (runtime/host_path.h) with `peer`'s
// credentials when given (a root supervisor checking a peer): every path must exist and be
// readable by the peer; a root writable in the sandbox (workspace roots outside read-only mode,
// rw bind sources) must be writable by the peer and not a system directory. The names are
// replaced by their canonical form and the descriptors kept in `resolved`. The message names
// the option.
Status normalize(Policy& policy, const Credentials* peer = nullptr);

// Whether `path` is `root` or lies beneath it (both canonical; lexical, no I/O).
bool beneath(const std::string& path, const std::string& root);

// A workspace root or --bind source (canonical: after normalize()) that is or contains one of
// `hidden` (the supervisor's own directories, masked in every view: its socket's, its temp
// root, its crash-cleanup records) would show it again, writable where the root is; an
// --allow-socket inside one would show and admit that socket (the supervisor's own, say):
// refused, naming both. docs/threat-model.md "What corral guarantees".
Status refuse_hidden(const Policy& policy, const std::vector<std::string>& hidden);

// A root that would show what a guard hides (docs/threat-model.md "Guard the thing"): a
// workspace root or --bind source beneath a --deny-read path (the path itself is masked where
// it shows, so naming it exactly is harmless), a writable one at or beneath a --protect path,
// or any in the host's /proc. Guards are placed where a root contains them; a root inside one
// would show its contents with no guard at all. Called by normalize() on every effective
// policy (the scope's guards included after narrow()). Refused, naming both.
Status refuse_guard_bypass(const Policy& policy);

// What one request (a command, a background command, a worker, an authorized launch, a file
// tool call or a child scope) asks for, on top of the scope it runs in. Absent means "the
// scope's". Paths are already normalized (canonical).
struct PolicyRequest {
  std::optional<Mode> mode;
  std::optional<Network> network;
  std::vector<std::string> workspaces;  // empty: the scope's
  std::vector<std::string> deny_read;   // added to the scope's
  std::vector<std::string> protect;     // added to the scope's
  std::vector<Bind> binds;
  Caps caps;                            // an absent cap: the scope's
};

// Whether a scope's policy bounds what runs in it. Named scopes are ceilings; a connection's
// implicit scope and a uid's default scope are not (they only supply defaults).
enum class Ceiling { none, bounded };

// The one narrowing rule (docs/threat-model.md "Scopes narrow"): the effective policy of `request`
// run in a scope whose policy is `scope`.
//  - Absent mode / network / workspaces / caps take the scope's.
//  - The scope's deny_read and protect always apply, added to the request's.
//  - Under Ceiling::bounded nothing may widen: mode (read-only < workspace-write <
//    danger-full-access), network (denied < allowed), workspaces (each beneath one of the
//    scope's, when the scope names any; so must be every writable bind's source), writable
//    binds (refused in a read-only scope), caps (no larger than a finite scope cap; a request
//    without that cap gets the scope's). A request over its ceiling fails with step "ceiling",
//    errno EPERM, and a message naming both sides.
// Pure: touches no file system.
[[nodiscard]] StatusOr<Policy> narrow(const Policy& scope, Ceiling ceiling, const PolicyRequest& request);

}  // namespace corral
