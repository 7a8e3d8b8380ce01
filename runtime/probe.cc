#include "runtime/probe.h"

namespace corral {

// Only what the engine actually applies to every command is reported available; isolation
// layers it does not apply yet say so instead of claiming what the kernel could do.
std::vector<LayerReport> probe_host() {
  std::vector<LayerReport> layers;
  layers.push_back({"process-group", true,
                    "each command leads its own session and process group; stop and terminate "
                    "signal the whole group"});
  layers.push_back({"scrubbed-env", true, "the command sees only the request's environment plus PATH, HOME, TMPDIR"});
  layers.push_back({"private-tmp", true, "each connection's scope gets its own 0700 temp dir, removed when it closes"});
  for (const char* name : {"user-ns", "mount-ns", "pid-ns", "ipc-ns", "uts-ns", "net-ns", "landlock",
                           "seccomp", "cgroup", "rlimits"})
    layers.push_back({name, false, "not applied by this version of the engine"});
  return layers;
}

}  // namespace corral
