// cgroup v1: one hierarchy per controller (or a joined pair, "cpu,cpuacct"), limits in
// memory.limit_in_bytes and cpu.cfs_*, usage in memory.max_usage_in_bytes, oom_control and
// cpuacct.usage. No cgroup.kill; cgroup.procs lists a group's own processes only.
#include "runtime/cgroup_version.h"

namespace corral::cgroup_detail {
namespace {

class V1 final : public CgroupVersion {
 public:
  const char* name() const override { return "v1"; }

  std::string files_for(Role role) const override {
    switch (role) {
      case Role::memory: return "memory.limit_in_bytes, max_usage_in_bytes, oom_control";
      case Role::pids: return "pids.max";
      case Role::cpu: return "cpu.cfs_quota_us / cpu.cfs_period_us";
      case Role::cpu_accounting: return "cpuacct.usage";
      case Role::kill: return "";
    }
    return "";
  }

  Status set_memory(const std::string& dir, std::uint64_t bytes) const override {
    const std::string value = std::to_string(bytes);
    if (Status s = write_file(dir + "/memory.limit_in_bytes", value); !s.ok()) return s;
    // memsw only exists with swap accounting, and may still refuse (swapaccount=0 on the
    // command line); the memory limit alone is then what holds.
    if (exists(dir + "/memory.memsw.limit_in_bytes")) (void)write_file(dir + "/memory.memsw.limit_in_bytes", value);
    // A group inherits oom_kill_disable from its parent; we want the kernel to kill, not to hang.
    return write_file(dir + "/memory.oom_control", "0");
  }

  Status set_cpus(const std::string& dir, double cpus) const override {
    const std::uint64_t quota_us = cpu_quota_us(cpus);
    if (Status s = write_file(dir + "/cpu.cfs_period_us", std::to_string(kCpuPeriodUs)); !s.ok()) return s;
    return write_file(dir + "/cpu.cfs_quota_us", std::to_string(quota_us));
  }

  void read_memory(const std::string& dir, CgroupUsage& u) const override {
    if (auto text = read_file(dir + "/memory.max_usage_in_bytes")) u.memory_peak_bytes = parse_u64(*text);
    if (auto text = read_file(dir + "/memory.oom_control"))
      u.oom_killed = keyed_value(*text, "oom_kill").value_or(0) > 0;
  }

  std::optional<std::uint64_t> cpu_usage_ns(const std::string& dir) const override {
    auto text = read_file(dir + "/cpuacct.usage");
    return text ? parse_u64(*text) : std::nullopt;
  }

  void read_cpu_split(const std::string&, CgroupUsage&) const override {}  // cpuacct.usage has the total only
  bool accounts_cpu_in_every_group() const override { return false; }

  // v1 lists a group's own processes only, so a tree is read group by group.
  bool tree_empty(const std::string& dir) const override {
    std::map<pid_t, int> pids;
    collect_pids(dir, pids);
    return pids.empty();
  }

  bool has_kill_file() const override { return false; }
  JoinKind join_kind() const override { return JoinKind::self_tasks; }
};

}  // namespace

const CgroupVersion& cgroup_v1() {
  static const V1 v1;
  return v1;
}

}  // namespace corral::cgroup_detail
