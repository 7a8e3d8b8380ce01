#include "runtime/process.h"

#include <signal.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <utility>

#ifndef P_PIDFD
#define P_PIDFD 3  // waitid on a pidfd, Linux 5.4
#endif

namespace corral {

Process::Process(Process&& o) noexcept
    : pid_(std::exchange(o.pid_, -1)), pidfd_(std::move(o.pidfd_)),
      reaped_(std::exchange(o.reaped_, false)) {}

Process& Process::operator=(Process&& o) noexcept {
  if (this != &o) {
    if (pid_ > 0 && !reaped_) {
      signal_group(SIGKILL);
      ExitInfo ignored;
      reap(ignored, /*block=*/true);
    }
    pid_ = std::exchange(o.pid_, -1);
    pidfd_ = std::move(o.pidfd_);
    reaped_ = std::exchange(o.reaped_, false);
  }
  return *this;
}

Process::~Process() {
  if (pid_ > 0 && !reaped_) {
    signal_group(SIGKILL);
    ExitInfo ignored;
    reap(ignored, /*block=*/true);
  }
}

void Process::signal_group(int sig) const {
  if (pid_ <= 0 || reaped_) return;
  ::kill(-pid_, sig);
  // The leader itself, in case it left its group (setpgid) before exec'ing.
  ::syscall(SYS_pidfd_send_signal, pidfd_.get(), sig, nullptr, 0);
}

bool Process::reap(ExitInfo& info, bool block) {
  if (reaped_) return true;
  siginfo_t si{};
  struct rusage ru {};
  // glibc's waitid has no rusage argument; the syscall does.
  int flags = WEXITED | (block ? 0 : WNOHANG);
  long rc;
  do {
    rc = ::syscall(SYS_waitid, P_PIDFD, pidfd_.get(), &si, flags, &ru);
  } while (rc < 0 && errno == EINTR);
  if (rc < 0) {
    // ECHILD: someone else reaped it (should not happen); treat as gone.
    reaped_ = true;
    info = ExitInfo{};
    return true;
  }
  if (si.si_pid == 0) return false;  // WNOHANG and still running
  reaped_ = true;
  info.exited = si.si_code == CLD_EXITED;
  info.exit_code = info.exited ? si.si_status : 0;
  info.signal = info.exited ? 0 : si.si_status;
  info.user_cpu_ms = static_cast<std::uint64_t>(ru.ru_utime.tv_sec) * 1000 + ru.ru_utime.tv_usec / 1000;
  info.sys_cpu_ms = static_cast<std::uint64_t>(ru.ru_stime.tv_sec) * 1000 + ru.ru_stime.tv_usec / 1000;
  info.max_rss_kb = static_cast<std::uint64_t>(ru.ru_maxrss);
  return true;
}

}  // namespace corral
