// The host capability report: which protections this engine enforces on this host, each
// with the reason it is or is not available. Sent in the hello reply and by `corral status`.
#pragma once

#include <string>
#include <vector>

namespace corral {

struct LayerReport {
  std::string name;       // stable name, as results list it in `enforced`
  bool available = false;
  std::string reason;     // what was probed, or why it is missing
};

// The guarantees the engine gives every command whatever the host (the isolation layers are
// probed by SandboxHost::create, sandbox.h).
std::vector<LayerReport> probe_host();

}  // namespace corral
