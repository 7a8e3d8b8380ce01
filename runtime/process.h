// Process: the handle of one spawned child (a process-group leader) and its pidfd.
// Dropping a Process that has not been reaped SIGKILLs its whole process group and reaps
// it, so a handle never leaves a process (or a zombie) behind.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>

#include "runtime/status.h"
#include "runtime/unique_fd.h"

namespace corral {

// How a reaped child ended, with the kernel's resource usage for it and its reaped children.
struct ExitInfo {
  bool exited = false;   // true: exit_code is valid; false: killed by `signal`
  int exit_code = 0;
  int signal = 0;
  std::uint64_t user_cpu_ms = 0;
  std::uint64_t sys_cpu_ms = 0;
  std::uint64_t max_rss_kb = 0;  // largest single process, as getrusage reports it
};

class Process {
 public:
  Process() = default;
  Process(pid_t pid, UniqueFd pidfd) : pid_(pid), pidfd_(std::move(pidfd)) {}
  Process(Process&& o) noexcept;
  Process& operator=(Process&& o) noexcept;
  ~Process();

  pid_t pid() const { return pid_; }
  int pidfd() const { return pidfd_.get(); }  // readable once the child has exited
  bool reaped() const { return reaped_; }

  // Sends `sig` to the child's process group. Safe until reap(): an unreaped child (even a
  // zombie) keeps its pid, and so the group id, from being reused. No-op once reaped.
  void signal_group(int sig) const;
  // Reaps the child if it has exited (WNOHANG unless `block`). Returns false if still running.
  bool reap(ExitInfo& info, bool block = false);
  // Once reaped, the pidfd has nothing left to say; closes it (the pid stays for pid()).
  void close_pidfd() {
    if (reaped_) pidfd_.reset();
  }

 private:
  pid_t pid_ = -1;
  UniqueFd pidfd_;
  bool reaped_ = false;
};

}  // namespace corral
