// Result: what happened to one command, as a value. Final status values and their
// meaning are docs/design.md's "Results and exit codes"; the first status decided wins (a
// command killed for its output cap stays output_limit even though it died of SIGKILL).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "runtime/policy.h"

namespace corral {

enum class ExitStatus {
  exited,        // ran to completion; exit_code set
  signaled,      // killed by a signal nobody in corral sent; signal set
  timed_out,     // foreground deadline passed; stopped (SIGTERM, grace, SIGKILL)
  output_limit,  // stdout+stderr exceeded the cap; SIGKILLed; output_truncated set
  memory_limit,  // the memory cap's OOM killer ended it
  cpu_limit,     // the CPU-time cap ended it
  cancelled,     // a client asked to stop or terminate it, or went away
  setup_error,   // never ran: setup_step/setup_errno say why
};

const char* status_name(ExitStatus s);

enum class StreamId { out = 0, err = 1 };

struct Result {
  ExitStatus status = ExitStatus::setup_error;
  std::optional<int> exit_code;  // only when the command exited by itself
  int signal = 0;                // the signal that ended the command, 0 if none
  bool timed_out = false;
  bool output_truncated = false;
  std::string out, err;          // kept output (only when the spec retains output)
  std::uint64_t out_bytes = 0, err_bytes = 0;  // kept byte counts per stream
  std::uint64_t wall_ms = 0;
  std::uint64_t user_cpu_ms = 0;
  std::uint64_t sys_cpu_ms = 0;
  std::uint64_t max_rss_kb = 0;
  std::optional<std::uint64_t> memory_peak_kb;  // whole tree, where a cgroup measured it
  std::vector<std::string> enforced;            // isolation layers applied
  std::string temp_dir;
  std::string setup_step;  // setup_error: the step that failed ("chdir", "exec", ...)
  int setup_errno = 0;
  std::string message;     // human-readable detail for setup_error and limits
  std::optional<bool> launched;  // authorized launches only: did the command run at all
  std::optional<Policy> policy;  // the effective policy it ran under (sandboxed commands)
};

// `corral exec`'s exit status for a result (docs/design.md "Results and exit codes"): the command's own code; 124 timeout;
// 125 corral failed; 126 not executable; 127 not found; 128+N killed by signal N; 77 not
// launched (authorization denied, timed out or abandoned).
int cli_exit_code(const Result& r);

}  // namespace corral
