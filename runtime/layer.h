// The protections corral reports and enforces, by name. A layer is an enum, never a string:
// the one name table below is what `corral status`, hello replies and result records print,
// and a name that is not in it is an error (docs/design.md "Isolation layers": fail closed).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "runtime/status.h"

namespace corral {

enum class Layer : std::uint8_t {
  // The engine's own guarantees (every host).
  process_tree,
  scrubbed_env,
  private_tmp,
  // Probed by SandboxHost::create (runtime/sandbox.h).
  user_ns,
  mount_ns,
  pid_ns,
  ipc_ns,
  uts_ns,
  net_ns,
  cgroup_ns,
  landlock,
  seccomp,
  cgroup_memory,
  cgroup_pids,
  cgroup_cpu,
  cgroup_cpu_time,
  cgroup_kill,
  rlimits,
  caps_dropped,
  groups_dropped,
  idmapped_mounts,
  host_ipc,
  mount_view,
  temp_size,
};
inline constexpr std::size_t kLayerCount = static_cast<std::size_t>(Layer::temp_size) + 1;

// "user-ns", "cgroup-cpu-time", ... as printed everywhere.
const char* layer_name(Layer layer);
// The layer a printed name stands for; an unknown name fails (step "layer", EINVAL) naming it.
StatusOr<Layer> parse_layer(std::string_view name);

}  // namespace corral
