#include "runtime/probe.h"

namespace corral {

// The engine's own guarantees; the isolation layers are probed by SandboxHost (sandbox.h).
std::vector<LayerReport> probe_host() {
  return {
      {"process-tree", true,
       "each command runs under its own init in a PID namespace (or its own process group); stop, "
       "terminate and exit end the whole tree"},
      {"scrubbed-env", true, "the command sees only the request's environment plus PATH, HOME, TMPDIR"},
      {"private-tmp", true, "each scope gets its own 0700 temp dir, seen as /tmp inside, removed when it closes"},
  };
}

}  // namespace corral
