// ChildPlan: everything the child needs between clone and exec, prepared by the parent.
// The child side (child_setup.cc) runs on a borrowed stack in the parent's address space
// (CLONE_VM|CLONE_VFORK): it must not allocate, log, throw or touch any lock. It reads
// only this plan; on failure it writes a ChildError to plan.error_fd and _exits.
#pragma once

#include <csignal>
#include <cstddef>

namespace corral::child {

// Which step of child setup failed; stable names (step_name) go into results and logs.
enum class Step : int { none = 0, signals, setsid, deathsig, fds, chdir, exec };
const char* step_name(Step step);

struct ChildError {
  Step step;
  int err;  // errno
};

struct FdMove {
  int source;  // fd in the parent
  int target;  // fd number in the child
};

struct ChildPlan {
  // Paths to try with execve, in order (PATH search done as the child sees the filesystem).
  const char* const* exec_paths;
  std::size_t exec_path_count;
  char* const* argv;
  char* const* envp;
  const char* cwd;          // nullptr: stay in the parent's cwd
  const FdMove* fds;
  std::size_t fd_count;
  int first_closed_fd;      // every fd >= this is made close-on-exec
  int error_fd;             // write end of a close-on-exec pipe
  pid_t parent_pid;         // to notice a parent that died before PR_SET_PDEATHSIG
  sigset_t child_sigmask;   // the mask the program starts with (normally empty)
};

// The function clone() runs. Never returns on success (exec); returns nothing useful.
int child_main(void* plan);

// The steps the bare child (child_main) and the sandbox's init and command
// (runtime/sandbox_child.cc) share. Each runs in the child, allocates nothing, and returns 0 or
// an errno for its caller to report under its own step.

// Every handler back to SIG_DFL: handlers belong to the parent's code, and ignored signals
// would survive exec (SIGPIPE!).
void reset_signals_in_child();
// Places `fds` (at most 16) at their targets in two phases, so that a source that equals
// another mapping's target is never clobbered: every source is first lifted to or above
// `first_closed_fd`, then placed. Every fd from `first_closed_fd` up (the lifted copies
// included) becomes close-on-exec.
int place_fds_in_child(const FdMove* fds, std::size_t count, int first_closed_fd);
// execve of each path in turn with execvpe's rules: an EACCES is remembered and the search
// goes on; an error other than the path's absence stops it. Returns only on failure, with the
// errno to report.
int exec_in_child(const char* const* paths, std::size_t count, char* const* argv, char* const* envp);

}  // namespace corral::child
