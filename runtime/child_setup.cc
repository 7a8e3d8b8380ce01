// The code between clone and exec. Austere on purpose: no allocation, no logging, no
// exceptions, no libc function that may take a lock. Runs with CLONE_VM on the parent's
// memory while the parent is suspended (CLONE_VFORK), so it writes nothing but its own
// stack and the error pipe.
#include "runtime/child_setup.h"

#include <fcntl.h>
#include <linux/close_range.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

namespace corral::child {

const char* step_name(Step step) {
  switch (step) {
    case Step::none: return "none";
    case Step::signals: return "signals";
    case Step::setsid: return "setsid";
    case Step::deathsig: return "deathsig";
    case Step::fds: return "fds";
    case Step::chdir: return "chdir";
    case Step::exec: return "exec";
  }
  return "unknown";
}

namespace {

[[noreturn]] void fail(const ChildPlan& plan, Step step, int err) {
  ChildError e{step, err};
  // A short write to a pipe of this size is atomic; nothing useful to do if it fails.
  [[maybe_unused]] auto n = ::write(plan.error_fd, &e, sizeof e);
  ::_exit(127);
}

}  // namespace

void reset_signals_in_child() {
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; ++sig) {
    if (sig == SIGKILL || sig == SIGSTOP) continue;
    ::sigaction(sig, &dfl, nullptr);  // EINVAL for the reserved RT signals: harmless
  }
}

int place_fds_in_child(const FdMove* fds, std::size_t count, int first_closed_fd) {
  int lifted[16];
  if (count > 16) return EMFILE;
  for (std::size_t i = 0; i < count; ++i) {
    lifted[i] = ::fcntl(fds[i].source, F_DUPFD_CLOEXEC, first_closed_fd);
    if (lifted[i] < 0) return errno;
  }
  for (std::size_t i = 0; i < count; ++i)
    if (::dup2(lifted[i], fds[i].target) < 0) return errno;
  // Everything else, the lifted copies and the error pipe included, closes at exec (5.11+).
  if (::syscall(SYS_close_range, first_closed_fd, ~0U, CLOSE_RANGE_CLOEXEC) < 0) return errno;
  return 0;
}

int exec_in_child(const char* const* paths, std::size_t count, char* const* argv, char* const* envp) {
  int err = ENOENT;
  bool saw_eacces = false;
  for (std::size_t i = 0; i < count; ++i) {
    ::execve(paths[i], argv, envp);
    err = errno;
    if (err == EACCES) {
      saw_eacces = true;
      continue;
    }
    if (err == ENOENT || err == ENOTDIR || err == ESTALE || err == ENODEV || err == ETIMEDOUT) continue;
    break;
  }
  if ((err == ENOENT || err == ENOTDIR) && saw_eacces) err = EACCES;
  return err;
}

int child_main(void* arg) {
  const ChildPlan& plan = *static_cast<const ChildPlan*>(arg);

  reset_signals_in_child();

  // Own session and process group: the engine signals the whole group.
  if (::setsid() < 0) fail(plan, Step::setsid, errno);
  if (::prctl(PR_SET_PDEATHSIG, SIGKILL) < 0) fail(plan, Step::deathsig, errno);
  if (::getppid() != plan.parent_pid) fail(plan, Step::deathsig, ESRCH);

  if (int err = place_fds_in_child(plan.fds, plan.fd_count, plan.first_closed_fd)) fail(plan, Step::fds, err);

  if (plan.cwd != nullptr && ::chdir(plan.cwd) < 0) fail(plan, Step::chdir, errno);

  ::sigprocmask(SIG_SETMASK, &plan.child_sigmask, nullptr);

  fail(plan, Step::exec, exec_in_child(plan.exec_paths, plan.exec_path_count, plan.argv, plan.envp));
}

}  // namespace corral::child
