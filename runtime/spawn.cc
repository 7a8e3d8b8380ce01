#include "runtime/spawn.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>

#include "runtime/unique_fd.h"

namespace corral {
namespace {

constexpr std::size_t kChildStackBytes = 64 * 1024;
constexpr const char* kDefaultPath = "/usr/local/bin:/usr/bin:/bin";

// A stack for the child; mapped per spawn (a few µs) so concurrent spawns never share one.
class ChildStack {
 public:
  ChildStack() {
    void* p = ::mmap(nullptr, kChildStackBytes, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
    base_ = p == MAP_FAILED ? nullptr : static_cast<char*>(p);
  }
  ~ChildStack() {
    if (base_) ::munmap(base_, kChildStackBytes);
  }
  ChildStack(const ChildStack&) = delete;
  ChildStack& operator=(const ChildStack&) = delete;
  bool ok() const { return base_ != nullptr; }
  void* top() const { return base_ + kChildStackBytes; }

 private:
  char* base_ = nullptr;
};

std::vector<char*> c_strings(const std::vector<std::string>& v) {
  std::vector<char*> out;
  out.reserve(v.size() + 1);
  for (const auto& s : v) out.push_back(const_cast<char*>(s.c_str()));
  out.push_back(nullptr);
  return out;
}

}  // namespace

std::vector<std::string> exec_candidates(const std::string& program,
                                         const std::vector<std::string>& env) {
  if (program.find('/') != std::string::npos) return {program};
  std::string path = kDefaultPath;
  for (const auto& kv : env)
    if (kv.rfind("PATH=", 0) == 0) path = kv.substr(5);
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= path.size()) {
    std::size_t end = path.find(':', start);
    if (end == std::string::npos) end = path.size();
    // POSIX: an empty PATH entry is the cwd.
    std::string_view dir = end > start ? std::string_view(path).substr(start, end - start) : ".";
    std::string candidate;
    candidate.reserve(dir.size() + 1 + program.size());
    candidate.append(dir).append(1, '/').append(program);
    out.push_back(std::move(candidate));
    start = end + 1;
  }
  return out;
}

StatusOr<Process> spawn(const SpawnSpec& spec) {
  if (spec.argv.empty() || spec.argv[0].empty()) return Status::invalid("empty argv");
  if (spec.fds.size() > 16) return Status::invalid("more than 16 fds for the child");

  // Everything the child reads is built here, before clone.
  std::vector<std::string> candidates = exec_candidates(spec.argv[0], spec.env);
  std::vector<const char*> exec_paths;
  for (const auto& c : candidates) exec_paths.push_back(c.c_str());
  std::vector<char*> argv = c_strings(spec.argv);
  std::vector<char*> envp = c_strings(spec.env);

  int pipefd[2];
  if (::pipe2(pipefd, O_CLOEXEC) < 0) return Status::from_errno("pipe", errno);
  UniqueFd err_read(pipefd[0]), err_write(pipefd[1]);

  ChildStack stack;
  if (!stack.ok()) return Status::from_errno("mmap", errno, "child stack");

  int max_target = 2;
  for (const auto& m : spec.fds) max_target = std::max(max_target, m.target);

  child::ChildPlan plan{};
  plan.exec_paths = exec_paths.data();
  plan.exec_path_count = exec_paths.size();
  plan.argv = argv.data();
  plan.envp = envp.data();
  plan.cwd = spec.cwd.empty() ? nullptr : spec.cwd.c_str();
  plan.fds = spec.fds.data();
  plan.fd_count = spec.fds.size();
  plan.first_closed_fd = max_target + 1;
  plan.error_fd = err_write.get();
  plan.parent_pid = ::getpid();
  sigemptyset(&plan.child_sigmask);

  // With CLONE_VM a signal handler running in the child would run on the parent's memory:
  // block everything until the child has reset its dispositions (as glibc's posix_spawn).
  sigset_t all, old;
  sigfillset(&all);
  ::pthread_sigmask(SIG_SETMASK, &all, &old);
  int pidfd = -1;
  pid_t pid = ::clone(child::child_main, stack.top(),
                      CLONE_VM | CLONE_VFORK | CLONE_PIDFD | SIGCHLD, &plan, &pidfd);
  int clone_errno = errno;
  ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
  if (pid < 0) return Status::from_errno("clone", clone_errno);

  Process process(pid, UniqueFd(pidfd));
  err_write.reset();
  // CLONE_VFORK: the child has exec'd or exited by now; EOF means exec happened.
  child::ChildError report{};
  ssize_t n;
  do {
    n = ::read(err_read.get(), &report, sizeof report);
  } while (n < 0 && errno == EINTR);
  if (n == static_cast<ssize_t>(sizeof report)) {
    ExitInfo ignored;
    process.reap(ignored, /*block=*/true);
    std::string detail;
    if (report.step == child::Step::exec) detail = "'" + spec.argv[0] + "'";
    if (report.step == child::Step::chdir) detail = "'" + spec.cwd + "'";
    return Status::from_errno(child::step_name(report.step), report.err, detail);
  }
  return process;
}

}  // namespace corral
