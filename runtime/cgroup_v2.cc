// cgroup v2: one unified hierarchy, limits in memory.max and cpu.max, usage in memory.peak,
// memory.events and cpu.stat (which every group has), cgroup.events "populated" for a whole
// tree in one read, and cgroup.kill.
#include "runtime/cgroup_version.h"

namespace corral::cgroup_detail {
namespace {

class V2 final : public CgroupVersion {
 public:
  const char* name() const override { return "v2"; }

  std::string files_for(Role role) const override {
    switch (role) {
      case Role::memory: return "memory.max, memory.peak, memory.events";
      case Role::pids: return "pids.max";
      case Role::cpu: return "cpu.max";
      case Role::cpu_accounting: return "cpu.stat usage_usec";
      case Role::kill: return "cgroup.kill (kernel >= 5.14)";
    }
    return "";
  }

  Status set_memory(const std::string& dir, std::uint64_t bytes) const override {
    if (Status s = write_file(dir + "/memory.max", std::to_string(bytes)); !s.ok()) return s;
    if (exists(dir + "/memory.swap.max")) return write_file(dir + "/memory.swap.max", "0");
    return {};
  }

  Status set_cpus(const std::string& dir, double cpus) const override {
    const std::uint64_t quota_us = cpu_quota_us(cpus);
    return write_file(dir + "/cpu.max", std::to_string(quota_us) + " " + std::to_string(kCpuPeriodUs));
  }

  void read_memory(const std::string& dir, CgroupUsage& u) const override {
    if (auto text = read_file(dir + "/memory.peak")) u.memory_peak_bytes = parse_u64(*text);  // kernel >= 5.19
    if (auto text = read_file(dir + "/memory.events"))
      u.oom_killed = keyed_value(*text, "oom_kill").value_or(0) > 0;
  }

  std::optional<std::uint64_t> cpu_usage_ns(const std::string& dir) const override {
    auto text = read_file(dir + "/cpu.stat");
    if (!text) return std::nullopt;
    auto us = keyed_value(*text, "usage_usec");
    if (!us) return std::nullopt;
    return *us * 1000;
  }

  void read_cpu_split(const std::string& dir, CgroupUsage& u) const override {
    if (auto text = read_file(dir + "/cpu.stat")) {
      if (auto us = keyed_value(*text, "user_usec")) u.cpu_user_ns = *us * 1000;
      if (auto us = keyed_value(*text, "system_usec")) u.cpu_system_ns = *us * 1000;
    }
  }
  bool accounts_cpu_in_every_group() const override { return true; }

  // "populated" covers descendants and ignores zombies, in one read; a tree without the file
  // (a test's plain directories) is walked as v1's is.
  bool tree_empty(const std::string& dir) const override {
    if (auto events = read_file(dir + "/cgroup.events"))
      if (auto populated = keyed_value(*events, "populated")) return *populated == 0;
    std::map<pid_t, int> pids;
    collect_pids(dir, pids);
    return pids.empty();
  }

  bool has_kill_file() const override { return true; }
  JoinKind join_kind() const override { return JoinKind::at_clone; }
};

}  // namespace

const CgroupVersion& cgroup_v2() {
  static const V2 v2;
  return v2;
}

}  // namespace corral::cgroup_detail
