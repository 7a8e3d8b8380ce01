// Cgroups for the process engine: whole-tree memory, pids and CPU limits, whole-tree kill and
// usage figures for one command, on cgroup v2, v1, or v1 with a controller-less v2 mount that
// still offers cgroup.kill (the hybrid layout of this project's CI machine).
//
// A CgroupManager is created once by the supervisor. It finds which hierarchies the host offers
// and where the supervisor itself sits in each (/proc/self/cgroup), creates one parent group
// "corral-<pid>" beneath the supervisor's own group in every usable hierarchy (never at the root
// of a hierarchy the supervisor is not in), and probes each capability by trying it. A Cgroup
// is the group of one command: "<parent>/<name>" in every hierarchy that command needs.
//
// What differs between v1 and v2 (file names, formats, joining) sits behind one interface,
// runtime/cgroup_version.h, with one implementation each (cgroup_v1.cc, cgroup_v2.cc).
//
// Everything here is a short read or write of a cgroup file, but Cgroup::kill() and the
// destructors wait (at most ~1 s each): the supervisor runs them on its teardown pool, never on
// its event loop. Not thread-safe: one thread at a time drives a manager or a group.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "runtime/status.h"
#include "runtime/unique_fd.h"

namespace corral {

// Limits for a whole command tree. Unset means no limit of that kind (and no hierarchy is
// required for it).
struct CgroupLimits {
  std::optional<std::uint64_t> memory_bytes;  // whole tree, bytes; at least 1 MiB; no swap
  std::optional<std::uint64_t> pids;          // whole tree, processes and threads; 1..4194304
  std::optional<double> cpus;                 // a rate: 0.5 = half a CPU (CFS quota per 100 ms
                                              // period); 0.01..1024
};

// What the kernel counted for a group; a figure the host cannot give is unset.
struct CgroupUsage {
  std::optional<std::uint64_t> memory_peak_bytes;  // v1 memory.max_usage_in_bytes, v2 memory.peak
                                                   // (kernel >= 5.19)
  bool oom_killed = false;  // v1 memory.oom_control oom_kill (kernel >= 4.13), v2 memory.events
                            // oom_kill > 0: the kernel killed a process for this group's limit
  std::optional<std::uint64_t> cpu_usage_ns;  // v1 cpuacct.usage, v2 cpu.stat usage_usec * 1000
  std::optional<std::uint64_t> cpu_user_ns;   // v2 cpu.stat user_usec * 1000 (the split, where known)
  std::optional<std::uint64_t> cpu_system_ns;  // v2 cpu.stat system_usec * 1000
};

// What this host offers, found by trying (create a probe group, write a limit, remove it),
// each with the reason it is or is not available.
struct CgroupCapabilities {
  bool memory = false, pids = false, cpu = false, cpu_accounting = false, kill = false;
  std::string version;  // "v2", "v1", "v1+v2-kill" (v1 controllers, kill through v2), "none"
  std::string memory_reason, pids_reason, cpu_reason, cpu_accounting_reason, kill_reason;
};

class Cgroup;
namespace cgroup_detail {
struct Hierarchy;
class CgroupVersion;  // v1 or v2 (runtime/cgroup_version.h)
// One directory of a group: where it is, how /proc/<pid>/cgroup names it, what it is used for.
struct GroupDir {
  std::string path;         // the group's directory
  std::string cgroup_path;  // the same group as /proc/<pid>/cgroup names it
  int hierarchy_id = 0;     // first field of /proc/<pid>/cgroup; 0 for v2
  const CgroupVersion* version = nullptr;
  bool memory = false, cpu_accounting = false, kill = false;  // what usage()/kill() use here
};
}  // namespace cgroup_detail

// How a new process enters a group, whatever the versions of its hierarchies
// (runtime/cgroup_version.h JoinKind): `self` are the `tasks` files it writes "0" to itself
// (v1; runtime/sandbox_plan.h SandboxPlan::cgroup_join_fds), `clone_into` the directory it is
// born in (v2, clone3's CLONE_INTO_CGROUP; invalid if the group has none). Either kind spares
// the kernel's global threadgroup lock that moving another process takes (an RCU grace
// period, 5-15 ms on this project's CI machine). The opener's credentials are what the kernel
// checks, so the process that joins may be unprivileged.
struct CgroupJoin {
  std::vector<UniqueFd> self;
  UniqueFd clone_into;
};

class CgroupManager {
 public:
  // Detects the layout under `sysfs_root` (the cgroup mount point, or the tmpfs holding one
  // mount per v1 hierarchy plus "unified") and `self_cgroup_file` (the supervisor's own
  // membership, /proc/self/cgroup format); tests pass a fake tree. Creates "corral-<pid>"
  // beneath the supervisor's group in every usable hierarchy. On pure v2, enabling controllers
  // for children may require moving the supervisor into a leaf "corral-<pid>-self" of its own
  // group (v2 forbids processes in a group that delegates controllers); the destructor moves it
  // back. Never fails: whatever is missing is reported, with the reason, in capabilities().
  // One live manager per process per tree: a second would take the first's groups for the
  // leftovers of an earlier process with the same pid, and kill them.
  // `before_mkdir`, if given, is called with each directory's path right before it is made
  // (the supervisor's crash-cleanup record: a supervisor killed at any point leaves nothing
  // that its record does not list).
  static std::unique_ptr<CgroupManager> create(std::string sysfs_root = "/sys/fs/cgroup",
                                               std::string self_cgroup_file = "/proc/self/cgroup",
                                               std::function<void(const std::string&)> before_mkdir = {});
  // Kills whatever is left in the parent groups (Cgroups should be destroyed first) and removes
  // them. Failures are ignored: a group the kernel will not remove stays behind.
  ~CgroupManager();
  CgroupManager(const CgroupManager&) = delete;
  CgroupManager& operator=(const CgroupManager&) = delete;

  const CgroupCapabilities& capabilities() const { return caps_; }
  // The directories this manager created ("corral-<pid>" in each usable hierarchy, and the
  // leaf it may have moved the supervisor into), for the supervisor's crash-cleanup record.
  std::vector<std::string> created_dirs() const;

  // Creates "<parent>/<name>" in every hierarchy needed for `limits`, plus the kill-capable one,
  // plus the ones giving CPU accounting and the memory peak where available, and writes the
  // limits. `name` is one path component ([A-Za-z0-9._-], not "." or "..", at most 200 bytes,
  // not starting with "corral-"), unique among this manager's live groups.
  // Fails with Status::invalid for a bad name or an absurd limit; with step "cgroup" naming the
  // missing controller and why if a requested limit cannot be enforced here, or if the host has
  // no usable hierarchy at all; with the errno of the mkdir or write that failed otherwise.
  // On failure nothing is left behind (groups already created are removed).
  // The caller owns the Cgroup; destroy it before the manager.
  // `extras` false: only the hierarchies the limits need (and memory's, for the peak), not the
  // kill and CPU-accounting ones; for a group that only bounds memory by default, where the
  // command's PID namespace already ends its whole tree.
  StatusOr<std::unique_ptr<Cgroup>> create_group(const std::string& name, const CgroupLimits& limits,
                                                 bool extras = true);
  // Whether create_group(…, limits, extras) would make a directory that a process joins at
  // birth (CgroupJoin::clone_into: cgroup v2).
  bool born_into(const CgroupLimits& limits, bool extras) const;

 private:
  CgroupManager() = default;
  void detect(const std::string& sysfs_root, const std::string& self_cgroup_file);
  std::function<void(const std::string&)> before_mkdir_;
  void probe();
  // The hierarchies create_group() uses for `limits` (by index in hierarchies_).
  std::set<int> hierarchies_for(const CgroupLimits& limits, bool extras) const;

  CgroupCapabilities caps_;
  std::vector<std::unique_ptr<cgroup_detail::Hierarchy>> hierarchies_;
  // Index in hierarchies_ of the one providing each capability; -1 if none.
  int memory_ = -1, pids_ = -1, cpu_ = -1, cpu_accounting_ = -1, kill_ = -1;
};

// The group of one command, present in one or more hierarchies.
class Cgroup {
 public:
  // kill() if anything is left, then removes the directory in every hierarchy. A directory the
  // kernel will not remove (a process that would not die within ~1 s) is left, silently.
  ~Cgroup();
  Cgroup(const Cgroup&) = delete;
  Cgroup& operator=(const Cgroup&) = delete;

  // Moves `pid` (the whole process) into this group in every hierarchy: call it before the
  // child execs, since its descendants inherit the group only from then on. Fails with the
  // errno of the first cgroup.procs write that failed (ESRCH: no such process); the process
  // may then be in some hierarchies of this group and not others.
  Status add(pid_t pid);
  // What a new process needs to join this group without the global lock (CgroupJoin).
  StatusOr<CgroupJoin> open_join() const;
  // add(), for the directories a process is born in (CgroupJoin::clone_into): after a clone
  // that could not be born there (a kernel or a seccomp profile without clone3).
  Status add_after_clone(pid_t pid);
  // Reads what the kernel counted; figures this host cannot give are unset. Never fails.
  CgroupUsage usage() const;
  // Kills every process in the group: v2 cgroup.kill where available (kernel >= 5.14), else
  // SIGKILL to every pid listed in cgroup.procs, round after round, until none is left. Waits at
  // most ~1 s for the group to empty. Returns true if the group is empty afterwards.
  bool kill();
  // True if `pid` is in this group in every hierarchy it has.
  bool holds(pid_t pid) const;
  // True if kill() has cgroup.kill (layer cgroup-kill) rather than a walk of cgroup.procs.
  bool kills_at_once() const;
  // True if no process is left (every cgroup.procs empty or gone). Zombies do not count.
  bool empty() const;
  // The group's directories, one per hierarchy, for diagnostics and tests.
  std::vector<std::string> paths() const;

 private:
  friend class CgroupManager;
  explicit Cgroup(std::vector<cgroup_detail::GroupDir> dirs) : dirs_(std::move(dirs)) {}

  std::vector<cgroup_detail::GroupDir> dirs_;
};

}  // namespace corral
