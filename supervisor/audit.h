// The audit log: one line per launch (a command, a worker), on its own spdlog logger that
// always writes at info, whatever `--log-level` says of the ordinary log (docs/design.md
// "Audit log").
#pragma once

#include <string>
#include <string_view>

#include "runtime/status.h"

namespace corral::supervisor {

// Sends audit lines to `path` (created if missing, appended to), or to stderr when empty.
// Called once, before serving; until then audit lines go to stderr.
Status open_audit_log(const std::string& path);

// Writes one audit line and flushes it.
void audit(std::string_view line);

}  // namespace corral::supervisor
