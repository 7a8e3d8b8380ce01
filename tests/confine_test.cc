// The two confinement layers the child applies between clone and exec: the seccomp filter
// (runtime/seccomp_filter.h) and the Landlock ruleset (runtime/landlock.h). Each test builds the
// layer here, forks, applies it in the child the way the engine does, makes the attempts there
// and sends back one errno per attempt (0 = the call succeeded) through a pipe.
#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/io_uring.h>
#include <linux/keyctl.h>
#include <linux/perf_event.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <linux/netlink.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <doctest/doctest.h>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "runtime/landlock.h"

#include "tests/test_util.h"
#include "runtime/seccomp_filter.h"

extern char** environ;

namespace {

using corral::LandlockPolicy;
using corral::SeccompPolicy;

// What a forked child reported: its wait status and one int per attempt, in order.
struct Outcome {
  int wstatus = 0;
  std::vector<int> values;
  bool exited_ok() const { return WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0; }
};

class Reporter {
 public:
  explicit Reporter(int fd) : fd_(fd) {}
  void put(int v) const {
    ssize_t n = ::write(fd_, &v, sizeof v);
    (void)n;
  }
  // errno of a syscall-style result (0 when it succeeded).
  void result(long rc) const { put(rc < 0 ? errno : 0); }

 private:
  int fd_;
};

// Runs body(reporter) in a forked child, which then _exits(0); collects what it reported.
template <class Body>
Outcome in_child(Body body) {
  int fds[2];
  REQUIRE(::pipe2(fds, O_CLOEXEC) == 0);
  pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::close(fds[0]);
    body(Reporter(fds[1]));
    ::_exit(0);
  }
  ::close(fds[1]);
  Outcome out;
  int v;
  while (true) {
    ssize_t n = ::read(fds[0], &v, sizeof v);
    if (n < 0 && errno == EINTR) continue;
    if (n != static_cast<ssize_t>(sizeof v)) break;
    out.values.push_back(v);
  }
  ::close(fds[0]);
  while (::waitpid(pid, &out.wstatus, 0) < 0 && errno == EINTR) {
  }
  return out;
}

// A raw clone() that must be refused; if it is not, the new child leaves at once.
long raw_clone(unsigned long flags) {
  long rc = ::syscall(SYS_clone, flags | SIGCHLD, nullptr, nullptr, nullptr, 0);
  if (rc == 0) ::_exit(0);
  if (rc > 0) ::waitpid(static_cast<pid_t>(rc), nullptr, 0);
  return rc;
}

std::vector<std::string> open_fds() {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) out.push_back(e.path().filename());
  std::sort(out.begin(), out.end());
  return out;
}

using corral::test::TempDir;

void write_text(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

corral::SeccompProgram build(bool deny_network) {
  SeccompPolicy policy;
  policy.deny_network = deny_network;
  auto program = corral::build_seccomp_program(policy);
  REQUIRE_MESSAGE(program.ok(), (program.ok() ? "" : program.status().message()));
  return std::move(program).value();
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// seccomp

TEST_CASE("seccomp: the filter compiles to one BPF program and leaks no fd") {
  auto before = open_fds();
  auto program = build(true);
  CHECK(open_fds() == before);
  REQUIRE(program.prog() != nullptr);
  CHECK(program.instructions() > 0);
  CHECK(program.instructions() <= 4096);
  CHECK(program.prog()->len == program.instructions());
  MESSAGE("seccomp filter: " << program.instructions() << " BPF instructions (deny_network), "
                             << build(false).instructions() << " without");
  // Moving keeps prog() pointing at the live buffer.
  const auto* filter = program.prog()->filter;
  corral::SeccompProgram moved(std::move(program));
  CHECK(moved.prog()->filter == filter);
  CHECK(program.prog() == nullptr);  // NOLINT: inspecting the moved-from state on purpose
  CHECK(corral::install_seccomp(nullptr) == EINVAL);
}

TEST_CASE("seccomp: dangerous syscalls fail with EPERM, clone3 with ENOSYS, the rest works") {
  auto program = build(true);
  const struct sock_fprog* prog = program.prog();
  Outcome out = in_child([prog](const Reporter& r) {
    r.put(corral::install_seccomp(prog));
    r.result(::ptrace(PTRACE_TRACEME, 0, nullptr, nullptr));
    r.result(::unshare(CLONE_NEWUSER));
    r.result(::unshare(CLONE_NEWNS));
    // Targets that do not exist: were the filter broken, nothing would change on the host.
    r.result(::mount("none", "/nonexistent-corral-mnt", "tmpfs", 0, nullptr));
    r.result(::umount2("/nonexistent-corral-mnt", 0));
    r.result(::chroot("/"));
    r.result(::setns(0, 0));
    r.result(raw_clone(CLONE_NEWNS));
    r.result(raw_clone(CLONE_NEWUSER));
    r.result(raw_clone(CLONE_NEWNET | CLONE_NEWPID));
    r.result(::syscall(SYS_bpf, 0 /* BPF_MAP_CREATE */, nullptr, 0));
    struct io_uring_params params {};
    r.result(::syscall(SYS_io_uring_setup, 4, &params));
    r.result(::syscall(SYS_keyctl, KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING, 0));
    struct perf_event_attr pe {};
    pe.size = sizeof pe;
    r.result(::syscall(SYS_perf_event_open, &pe, 0, -1, -1, 0));
    r.result(::syscall(SYS_process_vm_readv, ::getppid(), nullptr, 0, nullptr, 0, 0));
    r.result(::syscall(SYS_userfaultfd, 0));
    r.result(::syscall(SYS_init_module, nullptr, 0, ""));
    // fd -1: unfiltered, these are EBADF.
    r.result(::syscall(SYS_splice, -1, nullptr, -1, nullptr, 1, 0));
    r.result(::syscall(SYS_vmsplice, -1, nullptr, 0, 0));
    r.result(::syscall(SYS_sendfile, -1, -1, nullptr, 1));
    r.result(::personality(ADDR_NO_RANDOMIZE));
    char c = 'x';
    // fd -1: were the filter broken, this would be EBADF and inject nothing.
    r.result(::ioctl(-1, TIOCSTI, &c));
    // The kernel reads the ioctl cmd as 32 bits: high garbage must not slip past the filter.
    r.result(::syscall(SYS_ioctl, -1, (1UL << 32) | TIOCSTI, &c));
    // clone3 must look absent, so libc falls back to clone().
    struct clone3_args {
      std::uint64_t flags, pidfd, child_tid, parent_tid, exit_signal, stack, stack_size, tls;
    } args{};
    args.exit_signal = SIGCHLD;
    long rc = ::syscall(SYS_clone3, &args, sizeof args);
    if (rc == 0) ::_exit(0);
    r.result(rc);

    // Still allowed.
    r.result(::personality(0xffffffff));
    int u = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    r.result(u);
    int pair[2];
    r.result(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair));
    pid_t pid = ::fork();
    if (pid == 0) ::_exit(7);
    int ws = 0;
    ::waitpid(pid, &ws, 0);
    r.put(pid > 0 && WIFEXITED(ws) ? WEXITSTATUS(ws) : -1);
    int ran = 0;
    std::thread([&ran] { ran = 1; }).join();  // pthread_create: clone3, then clone
    r.put(ran);
    pid_t sp = 0;
    char* argv[] = {const_cast<char*>("/bin/true"), nullptr};
    int err = ::posix_spawn(&sp, "/bin/true", nullptr, nullptr, argv, environ);
    ws = -1;
    if (err == 0) ::waitpid(sp, &ws, 0);
    r.put(err != 0 ? err : ws);
  });
  REQUIRE(out.exited_ok());
  const std::vector<int> expected = {
      0,       // install
      EPERM,   // ptrace(PTRACE_TRACEME)
      EPERM,   // unshare(CLONE_NEWUSER)
      EPERM,   // unshare(CLONE_NEWNS)
      EPERM,   // mount
      EPERM,   // umount2
      EPERM,   // chroot
      EPERM,   // setns
      EPERM,   // clone(CLONE_NEWNS)
      EPERM,   // clone(CLONE_NEWUSER)
      EPERM,   // clone(CLONE_NEWNET|CLONE_NEWPID)
      EPERM,   // bpf
      EPERM,   // io_uring_setup
      EPERM,   // keyctl
      EPERM,   // perf_event_open
      EPERM,   // process_vm_readv
      EPERM,   // userfaultfd
      EPERM,   // init_module
      EPERM,   // splice
      EPERM,   // vmsplice
      EPERM,   // sendfile
      EPERM,   // personality(ADDR_NO_RANDOMIZE)
      EPERM,   // ioctl(TIOCSTI)
      EPERM,   // ioctl(TIOCSTI | 1 << 32)
      ENOSYS,  // clone3
      0,       // personality query
      0,       // socket(AF_UNIX)
      0,       // socketpair(AF_UNIX)
      7,       // fork() child's exit status
      1,       // std::thread ran
      0,       // posix_spawn /bin/true: wait status 0
  };
  CHECK(out.values == expected);
}

TEST_CASE("seccomp: socket families are an allowlist with network denied; AF_VSOCK only in full access") {
  // The attempts, made in a child under `prog` (none: the host's own answers).
  auto attempts = [](const struct sock_fprog* prog) {
    Outcome out = in_child([prog](const Reporter& r) {
      r.put(prog ? corral::install_seccomp(prog) : 0);
      r.result(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
      r.result(::socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0));
      r.result(::socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE));
      r.result(::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0));
      int pair[2];
      long rc = ::socketpair(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0, pair);
      r.put(rc < 0 ? errno : 0);
      r.result(::socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_KOBJECT_UEVENT));
      r.result(::socket(AF_PACKET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
      r.result(::socket(AF_VSOCK, SOCK_STREAM | SOCK_CLOEXEC, 0));
      // High garbage in the domain register: the kernel reads an int (AF_UNIX, AF_VSOCK).
      r.result(::syscall(SYS_socket, (1UL << 32) | AF_UNIX, SOCK_STREAM, 0));
      r.result(::syscall(SYS_socket, (1UL << 32) | AF_VSOCK, SOCK_STREAM, 0));
      r.result(::socket(AF_BLUETOOTH, SOCK_STREAM | SOCK_CLOEXEC, 0));
      r.result(::ptrace(PTRACE_TRACEME, 0, nullptr, nullptr));
    });
    REQUIRE(out.exited_ok());
    return out.values;
  };
  const std::vector<int> host = attempts(nullptr);
  REQUIRE(host.size() == 13);
  const int no = EAFNOSUPPORT;
  const int socketpair_inet = EOPNOTSUPP;  // the kernel's own answer, with or without a filter
  struct Case {
    corral::SeccompPolicy policy;
    std::vector<int> expected;
  };
  const std::vector<Case> cases = {
      // Network denied: IP and routing netlink work (the namespace is the barrier); nothing else.
      {{true, true}, {0, 0, 0, 0, 0, socketpair_inet, no, no, no, no, no, no, EPERM}},
      // Network allowed in a confining mode: the host's answers, but never AF_VSOCK.
      {{false, true}, {0, 0, 0, 0, 0, socketpair_inet, host[6], host[7], no, host[9], no, host[11], EPERM}},
      // danger-full-access with network allowed: the host's answers.
      {{false, false}, {0, 0, 0, 0, 0, socketpair_inet, host[6], host[7], host[8], host[9], host[10], host[11], EPERM}},
  };
  for (const auto& c : cases) {
    CAPTURE(c.policy.deny_network);
    CAPTURE(c.policy.deny_vsock);
    auto program = corral::build_seccomp_program(c.policy);
    REQUIRE(program.ok());
    CHECK(attempts(program->prog()) == c.expected);
  }
}

TEST_CASE("seccomp: the filter is inherited across exec") {
  auto program = build(true);
  const struct sock_fprog* prog = program.prog();
  if (::access("/usr/bin/unshare", X_OK) != 0) {
    MESSAGE("skipped: /usr/bin/unshare is not installed");
    return;
  }
  Outcome out = in_child([prog](const Reporter& r) {
    r.put(corral::install_seccomp(prog));
    int devnull = ::open("/dev/null", O_WRONLY);
    ::dup2(devnull, 2);
    char* argv[] = {const_cast<char*>("unshare"), const_cast<char*>("--user"), const_cast<char*>("/bin/true"),
                    nullptr};
    ::execv("/usr/bin/unshare", argv);
    r.put(-1);
  });
  REQUIRE(out.values == std::vector<int>{0});
  CHECK(WIFEXITED(out.wstatus));
  CHECK(WEXITSTATUS(out.wstatus) != 0);  // unshare(1) reports the EPERM and fails
}

#if defined(__x86_64__)
TEST_CASE("seccomp: syscalls of other architectures (i386, x32) kill the caller with SIGSYS") {
  auto program = build(true);
  const struct sock_fprog* prog = program.prog();
  Outcome i386 = in_child([prog](const Reporter& r) {
    r.put(corral::install_seccomp(prog));
    long ret = 20;  // getpid on i386
    asm volatile("int $0x80" : "+a"(ret) : : "memory");
    r.put(999);  // not reached
  });
  CHECK(i386.values == std::vector<int>{0});
  CHECK(WIFSIGNALED(i386.wstatus));
  CHECK(WTERMSIG(i386.wstatus) == SIGSYS);

  Outcome x32 = in_child([prog](const Reporter& r) {
    r.put(corral::install_seccomp(prog));
    ::syscall(0x40000000L | SYS_getpid);
    r.put(999);  // not reached
  });
  CHECK(x32.values == std::vector<int>{0});
  CHECK(WIFSIGNALED(x32.wstatus));
  CHECK(WTERMSIG(x32.wstatus) == SIGSYS);
}
#endif

TEST_CASE("seccomp: the host probe passes") {
  corral::Status s = corral::probe_seccomp();
  CHECK_MESSAGE(s.ok(), s.message());
}

// ---------------------------------------------------------------------------------------------
// Landlock

namespace {

// Prints why and returns false when the host has no Landlock, or not the ABI a test needs.
bool landlock_at_least(int needed, const char* what) {
  int abi = corral::landlock_abi();
  if (abi >= needed) return true;
  MESSAGE("skipped: " << what << " needs Landlock ABI >= " << needed << ", this kernel offers "
                      << (abi == 0 ? std::string("none (not built in or not enabled at boot)")
                                   : "ABI " + std::to_string(abi)));
  return false;
}

// Sets no_new_privs and restricts the child; reports the restrict result.
void restrict_child(const Reporter& r, int ruleset) {
  ::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
  r.put(corral::landlock_restrict(ruleset));
}

corral::UniqueFd ruleset_for(const LandlockPolicy& policy) {
  auto fd = corral::build_landlock_ruleset(policy);
  REQUIRE_MESSAGE(fd.ok(), (fd.ok() ? "" : fd.status().message()));
  return std::move(fd).value();
}

int errno_of_open(const std::string& path, int flags) {
  int fd = ::open(path.c_str(), flags | O_CLOEXEC, 0644);
  if (fd < 0) return errno;
  ::close(fd);
  return 0;
}

}  // namespace

TEST_CASE("landlock: ABI version") {
  int abi = corral::landlock_abi();
  MESSAGE("Landlock ABI seen: " << abi);
  CHECK(abi >= 0);
}

TEST_CASE("landlock: writes only beneath write roots, reads beneath read roots") {
  if (!landlock_at_least(1, "the filesystem rules")) return;
  TempDir base;
  const std::string in = base.path() + "/in", out = base.path() + "/out";
  std::filesystem::create_directories(in + "/sub");
  std::filesystem::create_directories(out);
  write_text(in + "/a.txt", "a");
  write_text(in + "/b.txt", "b");
  write_text(out + "/existing.txt", "outside");

  LandlockPolicy policy;
  policy.read_roots = {"/"};
  policy.write_roots = {in, base.path() + "/does-not-exist"};  // missing paths are skipped
  policy.write_files = {"/dev/null"};
  auto before = open_fds();
  corral::UniqueFd ruleset = ruleset_for(policy);
  auto after = open_fds();
  CHECK(after.size() == before.size() + 1);  // only the ruleset fd
  CHECK((::fcntl(ruleset.get(), F_GETFD) & FD_CLOEXEC) != 0);
  const int abi = corral::landlock_abi();

  Outcome res = in_child([&](const Reporter& r) {
    restrict_child(r, ruleset.get());
    // Inside the write root: create, write, rename and link within it, remove.
    int fd = ::open((in + "/new.txt").c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
    r.result(fd);
    r.result(fd < 0 ? -1 : ::write(fd, "x", 1));
    r.result(::rename((in + "/a.txt").c_str(), (in + "/sub/a.txt").c_str()));
    r.result(::link((in + "/b.txt").c_str(), (in + "/sub/b-link.txt").c_str()));
    r.result(::mkdir((in + "/d").c_str(), 0755));
    r.result(::unlink((in + "/b.txt").c_str()));
    // Outside it, under the read root only.
    r.put(errno_of_open(out + "/new.txt", O_CREAT | O_WRONLY));
    r.put(errno_of_open(out + "/existing.txt", O_WRONLY));
    r.result(::truncate((out + "/existing.txt").c_str(), 0));
    r.result(::mkdir((out + "/d").c_str(), 0755));
    r.result(::unlink((out + "/existing.txt").c_str()));
    r.result(::symlink("/etc", (out + "/sym").c_str()));
    r.result(::rename((in + "/sub/a.txt").c_str(), (out + "/a.txt").c_str()));
    r.result(::link((in + "/sub/b-link.txt").c_str(), (out + "/b.txt").c_str()));
    // Reading beneath "/" works.
    char buf[16] = {};
    int rfd = ::open((out + "/existing.txt").c_str(), O_RDONLY | O_CLOEXEC);
    r.put(rfd < 0 ? errno : (::read(rfd, buf, sizeof buf) == 7 && std::memcmp(buf, "outside", 7) == 0 ? 0 : -1));
    DIR* dir = ::opendir("/");
    r.put(dir == nullptr ? errno : 0);
    r.put(errno_of_open("/proc/self/status", O_RDONLY));
    // The single writable file; another device under "/" stays read-only.
    r.put(errno_of_open("/dev/null", O_WRONLY));
    r.put(errno_of_open("/dev/zero", O_WRONLY));
  });
  REQUIRE(res.exited_ok());
  // Before ABI 2, rename/link into another directory is always refused (EXDEV).
  const int refer_within = abi >= 2 ? 0 : EXDEV;
  const std::vector<int> expected = {
      0,             // restrict
      0,             // create in/new.txt
      0,             // write
      refer_within,  // rename within the write root
      refer_within,  // link within the write root
      0,             // mkdir in/d
      0,             // unlink in/b.txt
      EACCES,        // create out/new.txt
      EACCES,        // open out/existing.txt for writing
      EACCES,        // truncate out/existing.txt
      EACCES,        // mkdir out/d
      EACCES,        // unlink out/existing.txt
      EACCES,        // symlink in out/
      EACCES,        // rename in/ -> out/
      EACCES,        // link in/ -> out/
      0,             // read out/existing.txt
      0,             // opendir /
      0,             // read /proc/self/status
      0,             // /dev/null for writing
      EACCES,        // /dev/zero for writing
  };
  CHECK(res.values == expected);
  CHECK(std::filesystem::exists(in + "/new.txt"));
  CHECK_FALSE(std::filesystem::exists(out + "/new.txt"));
  CHECK_FALSE(std::filesystem::exists(out + "/a.txt"));
  CHECK(std::filesystem::exists(out + "/existing.txt"));
}

TEST_CASE("landlock: with deny_tcp, TCP connect and bind are refused with EACCES") {
  if (!landlock_at_least(4, "TCP rules")) return;
  int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(listener >= 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  REQUIRE(::listen(listener, 8) == 0);
  socklen_t len = sizeof addr;
  REQUIRE(::getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len) == 0);
  MESSAGE("listener on 127.0.0.1:" << ntohs(addr.sin_port));

  for (bool deny : {true, false}) {
    CAPTURE(deny);
    LandlockPolicy policy;
    policy.read_roots = {"/"};
    policy.deny_tcp = deny;
    corral::UniqueFd ruleset = ruleset_for(policy);
    Outcome res = in_child([&](const Reporter& r) {
      restrict_child(r, ruleset.get());
      int s = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      r.result(::connect(s, reinterpret_cast<const sockaddr*>(&addr), sizeof addr));
      int b = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      sockaddr_in any{};
      any.sin_family = AF_INET;
      any.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      r.result(::bind(b, reinterpret_cast<const sockaddr*>(&any), sizeof any));
      // UDP is not Landlock's business.
      int u = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
      r.result(::bind(u, reinterpret_cast<const sockaddr*>(&any), sizeof any));
    });
    REQUIRE(res.exited_ok());
    if (deny)
      CHECK(res.values == std::vector<int>{0, EACCES, EACCES, 0});
    else
      CHECK(res.values == std::vector<int>{0, 0, 0, 0});
  }
  ::close(listener);
}

TEST_CASE("landlock: scopes stop signals and abstract unix connects leaving the sandbox") {
  if (!landlock_at_least(6, "scopes")) return;
  const pid_t test_pid = ::getpid();
  int listener = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(listener >= 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  const std::string name = "corral-confine-test-" + std::to_string(test_pid);
  std::memcpy(addr.sun_path + 1, name.data(), name.size());  // abstract: leading NUL
  const auto addr_len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
  REQUIRE(::bind(listener, reinterpret_cast<sockaddr*>(&addr), addr_len) == 0);
  REQUIRE(::listen(listener, 8) == 0);

  for (bool scoped : {true, false}) {
    CAPTURE(scoped);
    LandlockPolicy policy;
    policy.read_roots = {"/"};
    policy.scope_signals = scoped;
    policy.scope_abstract_unix = scoped;
    corral::UniqueFd ruleset = ruleset_for(policy);
    Outcome res = in_child([&](const Reporter& r) {
      restrict_child(r, ruleset.get());
      r.result(::kill(test_pid, 0));
      int s = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
      r.result(::connect(s, reinterpret_cast<const sockaddr*>(&addr), addr_len));
      // Inside the sandbox: signalling itself still works.
      r.result(::kill(::getpid(), 0));
    });
    REQUIRE(res.exited_ok());
    if (scoped)
      CHECK(res.values == std::vector<int>{0, EPERM, EPERM, 0});
    else
      CHECK(res.values == std::vector<int>{0, 0, 0, 0});
  }
  ::close(listener);
}

TEST_CASE("landlock: restrict needs no_new_privs or CAP_SYS_ADMIN, and a ruleset fd") {
  if (!landlock_at_least(1, "restrict")) return;
  LandlockPolicy policy;
  policy.read_roots = {"/"};
  corral::UniqueFd ruleset = ruleset_for(policy);
  const int rfd = ruleset.get();
  Outcome res = in_child([rfd](const Reporter& r) {
    r.put(corral::landlock_restrict(-1));
    int devnull = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    r.put(corral::landlock_restrict(devnull));
    // Drop every capability (this suite may run as root) and leave no_new_privs unset.
    __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
    __user_cap_data_struct data[2] = {};
    r.result(::syscall(SYS_capset, &header, data));
    r.put(corral::landlock_restrict(rfd));
    r.result(::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0));
    r.put(corral::landlock_restrict(rfd));
  });
  REQUIRE(res.exited_ok());
  CHECK(res.values == std::vector<int>{EBADF, EBADFD, 0, EPERM, 0, 0});
}

TEST_CASE("landlock: the host probe passes") {
  if (!landlock_at_least(1, "the probe")) return;
  corral::Status s = corral::probe_landlock();
  CHECK_MESSAGE(s.ok(), s.message());
}
