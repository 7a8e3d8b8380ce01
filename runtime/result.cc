#include "runtime/result.h"

#include <cerrno>
#include <csignal>

namespace corral {

const char* status_name(ExitStatus s) {
  switch (s) {
    case ExitStatus::exited: return "exited";
    case ExitStatus::signaled: return "signaled";
    case ExitStatus::timed_out: return "timed_out";
    case ExitStatus::output_limit: return "output_limit";
    case ExitStatus::memory_limit: return "memory_limit";
    case ExitStatus::cpu_limit: return "cpu_limit";
    case ExitStatus::cancelled: return "cancelled";
    case ExitStatus::setup_error: return "setup_error";
  }
  return "unknown";
}

int cli_exit_code(const Result& r) {
  if (r.launched && !*r.launched) return 77;  // not launched (authorization): EX_NOPERM
  switch (r.status) {
    case ExitStatus::exited: return r.exit_code.value_or(125);
    case ExitStatus::timed_out: return 124;
    case ExitStatus::setup_error:
      if (r.setup_step == "exec") {
        if (r.setup_errno == ENOENT || r.setup_errno == ENOTDIR) return 127;
        return 126;
      }
      return 125;
    case ExitStatus::output_limit:
    case ExitStatus::memory_limit:
    case ExitStatus::cpu_limit: return 128 + SIGKILL;
    case ExitStatus::signaled:
    case ExitStatus::cancelled:
      if (r.signal) return 128 + r.signal;
      return r.exit_code.value_or(125);
  }
  return 125;
}

}  // namespace corral
