// Policy: what isolation a command asks for (docs/threat-model.md "Policy by mode"), as a value.
//
// Dangerous switches are spelled out: Mode::danger_full_access and Network::allowed are never
// defaults, and code that grants them names them (grep for "danger_full_access").
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

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

struct Caps {
  std::optional<std::uint64_t> memory_bytes;       // whole tree (cgroup)
  std::optional<std::uint64_t> pids;               // whole tree (cgroup)
  std::optional<std::chrono::milliseconds> cpu_time;  // total CPU of the tree; past it: cpu_limit
  std::optional<double> cpus;                      // a rate: 0.5 = half a CPU (cgroup CFS quota)
  std::optional<std::uint64_t> max_file_size;      // RLIMIT_FSIZE, bytes
  bool any_cgroup() const { return memory_bytes || pids || cpu_time || cpus; }
};

// Bounds for caps: below the minimum nothing useful runs; above the maximum is a typo.
namespace cap_limits {
inline constexpr std::uint64_t kMinMemory = 4ULL << 20;     // 4 MiB
inline constexpr std::uint64_t kMaxMemory = 1ULL << 40;     // 1 TiB
inline constexpr std::uint64_t kMaxPids = 1'000'000;
inline constexpr double kMaxCpus = 1024;
inline constexpr std::chrono::milliseconds kMinCpuTime{10};
inline constexpr std::uint64_t kMaxFileSize = 1ULL << 50;
}  // namespace cap_limits

struct Policy {
  bool sandboxed = true;  // false only for the engine's own unit tests of the bare path
  Mode mode = Mode::workspace_write;
  Network network = Network::denied;
  std::vector<std::string> workspaces;   // absolute; first is the default for file tools
  std::vector<std::string> deny_read;    // masked inside
  std::vector<std::string> protect;      // read-only even inside a writable root
  std::vector<Bind> binds;
  Caps caps;
};

// Checks shapes and bounds (absolute paths, no "..", caps in range, binds ro in read-only
// mode) and canonicalizes paths that must exist (realpath). The message names the option.
Status normalize(Policy& policy);

}  // namespace corral
