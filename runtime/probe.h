// The host capability report: which protections this engine enforces on this host, each
// with the reason it is or is not available. Sent in the hello reply and by `corral status`.
#pragma once

#include <string>
#include <vector>

#include "runtime/layer.h"
#include "runtime/status.h"

namespace corral {

struct LayerReport {
  Layer layer;
  std::string name;       // layer_name(layer): as status prints it and results list it in `enforced`
  bool available = false;
  std::string reason;     // what was probed, or why it is missing
};
inline LayerReport layer_report(Layer layer, bool available, std::string reason) {
  return {layer, layer_name(layer), available, std::move(reason)};
}

// The report for `layer`, or null if it was never probed.
const LayerReport* find_layer(const std::vector<LayerReport>& reports, Layer layer);

// Fails closed: ok only if every layer in `needed` has a report in `reports` that says it is
// available. A missing report is an error too ("was never probed"), never a pass. The
// message names the layer and the reason.
Status require_layers(const std::vector<LayerReport>& reports, const std::vector<Layer>& needed);

// What a probe child found: step 0 means every check passed; otherwise the step that failed
// (the probe's own numbering) and its errno.
struct ProbeReport {
  int step = 0;
  int err = 0;
};

// Runs `attempt` in a forked child (it must only make syscalls: the parent may have threads)
// and returns its report. A child that dies before reporting gives a Status with its wait
// status; fork and pipe failures too.
StatusOr<ProbeReport> probe_in_child(ProbeReport (*attempt)(const void* arg), const void* arg);

// The guarantees the engine gives every command whatever the host (the isolation layers are
// probed by SandboxHost::create, sandbox.h).
std::vector<LayerReport> probe_host();

}  // namespace corral
