#include "runtime/layer.h"

namespace corral {

namespace {

struct Entry {
  Layer layer;
  const char* name;
};

// The one name table. Kept in enum order (checked below), so a lookup by layer is an index.
constexpr std::array<Entry, kLayerCount> kNames = {{
    {Layer::process_tree, "process-tree"},
    {Layer::scrubbed_env, "scrubbed-env"},
    {Layer::private_tmp, "private-tmp"},
    {Layer::user_ns, "user-ns"},
    {Layer::mount_ns, "mount-ns"},
    {Layer::pid_ns, "pid-ns"},
    {Layer::ipc_ns, "ipc-ns"},
    {Layer::uts_ns, "uts-ns"},
    {Layer::net_ns, "net-ns"},
    {Layer::cgroup_ns, "cgroup-ns"},
    {Layer::landlock, "landlock"},
    {Layer::seccomp, "seccomp"},
    {Layer::cgroup_memory, "cgroup-memory"},
    {Layer::cgroup_pids, "cgroup-pids"},
    {Layer::cgroup_cpu, "cgroup-cpu"},
    {Layer::cgroup_cpu_time, "cgroup-cpu-time"},
    {Layer::cgroup_kill, "cgroup-kill"},
    {Layer::rlimits, "rlimits"},
    {Layer::caps_dropped, "caps-dropped"},
    {Layer::groups_dropped, "groups-dropped"},
    {Layer::idmapped_mounts, "idmapped-mounts"},
    {Layer::host_ipc, "host-ipc"},
    {Layer::mount_view, "mount-view"},
    {Layer::temp_size, "temp-size"},
}};

constexpr bool in_enum_order() {
  for (std::size_t i = 0; i < kNames.size(); ++i)
    if (static_cast<std::size_t>(kNames[i].layer) != i) return false;
  return true;
}
static_assert(in_enum_order(), "kNames must list every Layer once, in enum order");

}  // namespace

const char* layer_name(Layer layer) {
  const auto i = static_cast<std::size_t>(layer);
  return i < kNames.size() ? kNames[i].name : "unknown-layer";
}

StatusOr<Layer> parse_layer(std::string_view name) {
  for (const auto& e : kNames)
    if (name == e.name) return e.layer;
  return Status::error("layer", EINVAL, "unknown layer '" + std::string(name) + "'");
}

}  // namespace corral
