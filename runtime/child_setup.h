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

}  // namespace corral::child
