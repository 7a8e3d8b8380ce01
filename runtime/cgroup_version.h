// What differs between cgroup v1 and cgroup v2, behind one interface: the files and formats of
// limits and usage, how a group's tree is known to be empty, whether a group can be killed at
// once, and how a new process joins. One implementation each, cgroup_v1.cc and cgroup_v2.cc.
// cgroup.cc (CgroupManager, Cgroup) holds a version per hierarchy and never asks which one it
// is; only the detection of the host's layout (which mounts exist) is per version.
// Private to runtime/: include runtime/cgroup.h elsewhere.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "runtime/cgroup.h"
#include "runtime/status.h"

namespace corral::cgroup_detail {

// How a new process enters a group of one hierarchy (runtime/sandbox_plan.h).
enum class JoinKind {
  // v1: the process writes "0" to the group's `tasks` file itself. Moving oneself spares the
  // kernel's global threadgroup lock that moving another takes (an RCU grace period, 5-15 ms).
  self_tasks,
  // v2: born in the group (clone3 CLONE_INTO_CGROUP, Linux 5.7), which takes no lock either;
  // moved by the parent after the clone where clone3 is refused.
  at_clone,
};

// The roles a hierarchy can play for a group (CgroupManager::probe picks one per role).
enum class Role { memory, pids, cpu, cpu_accounting, kill };

class CgroupVersion {
 public:
  virtual ~CgroupVersion() = default;
  virtual const char* name() const = 0;  // "v1", "v2"
  // The files a role uses, for `corral status` ("memory.max, memory.peak, ..."); empty for a
  // role this version cannot play.
  virtual std::string files_for(Role role) const = 0;

  // Limits, written into a group's directory.
  virtual Status set_memory(const std::string& dir, std::uint64_t bytes) const = 0;
  virtual Status set_cpus(const std::string& dir, double cpus) const = 0;

  // Usage, read from a group's directory; what the version cannot give stays unset.
  virtual void read_memory(const std::string& dir, CgroupUsage& usage) const = 0;  // peak, OOM kills
  virtual std::optional<std::uint64_t> cpu_usage_ns(const std::string& dir) const = 0;
  virtual void read_cpu_split(const std::string& dir, CgroupUsage& usage) const = 0;  // user/system
  // Whether every group counts CPU time, with no controller of its own (v2's cpu.stat).
  virtual bool accounts_cpu_in_every_group() const = 0;

  // Whether no process is left in `dir` or beneath it (zombies do not count).
  virtual bool tree_empty(const std::string& dir) const = 0;
  // Whether the version has cgroup.kill (probed before use: kernel >= 5.14).
  virtual bool has_kill_file() const = 0;

  virtual JoinKind join_kind() const = 0;
};

const CgroupVersion& cgroup_v1();
const CgroupVersion& cgroup_v2();

// The CFS period both versions write, and the quota in it for a rate of `cpus` CPUs.
inline constexpr std::uint64_t kCpuPeriodUs = 100'000;
std::uint64_t cpu_quota_us(double cpus);

// The cgroup file helpers both versions use (cgroup.cc).
std::optional<std::string> read_file(const std::string& path);
// O_CREAT|O_TRUNC as in a shell's `echo v > file` (harmless on cgroupfs, which cannot create a
// file; lets the unit tests use a plain tree). One value per write(2).
Status write_file(const std::string& path, const std::string& value);
bool exists(const std::string& path);
std::optional<std::uint64_t> parse_u64(std::string_view s);
// The value of `key` in a flat-keyed cgroup file ("key value" per line).
std::optional<std::uint64_t> keyed_value(std::string_view text, std::string_view key);
// The pids listed in `dir`'s cgroup.procs and in its subgroups' (up to 16 levels down).
void collect_pids(const std::string& dir, std::map<pid_t, int>& out, int depth = 0);

}  // namespace corral::cgroup_detail
