// spawn(): start a program as a new session and process group without copying the caller's
// address space (clone with CLONE_VM|CLONE_VFORK, like posix_spawn) and without letting
// anything leak into it: only the fds named in the spec, only the spec's environment,
// default signal dispositions, an empty signal mask, SIGKILL when the parent dies.
#pragma once

#include <string>
#include <vector>

#include "runtime/child_setup.h"
#include "runtime/process.h"
#include "runtime/status.h"

namespace corral {

struct SpawnSpec {
  std::vector<std::string> argv;   // argv[0] without '/' is searched in the env's PATH
  std::vector<std::string> env;    // "NAME=value", exactly what the program sees
  std::string cwd;                 // empty: inherit the caller's
  std::vector<child::FdMove> fds;  // e.g. {stdin_read, 0}, {out_write, 1}, {err_write, 2}
  int exec_fd = -1;                // sandboxed launches: execveat this file (borrowed), not argv[0]
};

// Starts the program. On success the program has exec'd (CLONE_VFORK returns after exec).
// On failure before exec the child is reaped and the Status names the step ("chdir",
// "exec", ...) with its errno; the caller owns nothing. Thread-safe.
StatusOr<Process> spawn(const SpawnSpec& spec);

// The PATH value spawn() searches for argv[0]: the spec env's PATH, or the engine default.
std::vector<std::string> exec_candidates(const std::string& program, const std::vector<std::string>& env);

}  // namespace corral
