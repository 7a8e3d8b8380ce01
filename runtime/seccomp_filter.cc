#include "runtime/seccomp_filter.h"

#include "runtime/fd_passing.h"

#include <fcntl.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <seccomp.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <signal.h>
#include <sys/prctl.h>
#include <linux/netlink.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <string>
#include <utility>

#include "runtime/probe.h"
#include "runtime/unique_fd.h"

namespace corral {

SeccompProgram::SeccompProgram(std::vector<struct sock_filter> filter) : filter_(std::move(filter)) {
  fprog_.len = static_cast<unsigned short>(filter_.size());
  fprog_.filter = filter_.data();
}

SeccompProgram::SeccompProgram(SeccompProgram&& other) noexcept
    : filter_(std::move(other.filter_)), fprog_(std::exchange(other.fprog_, {})) {
  fprog_.filter = filter_.data();
  other.filter_.clear();
}

SeccompProgram& SeccompProgram::operator=(SeccompProgram&& other) noexcept {
  if (this != &other) {
    filter_ = std::move(other.filter_);
    fprog_ = std::exchange(other.fprog_, {});
    fprog_.filter = filter_.data();
    other.filter_.clear();
  }
  return *this;
}

namespace {

struct CtxRelease {
  void operator()(void* ctx) const { seccomp_release(ctx); }
};
using Ctx = std::unique_ptr<void, CtxRelease>;

// Refused outright with EPERM. Names this libseccomp does not know, or that x86_64 lacks
// (vm86, stime, ...), are skipped, so the list can name syscalls of every architecture.
constexpr const char* kDenied[] = {
    // Other processes and the kernel itself.
    "ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd", "process_madvise", "kcmp",
    "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module",
    "create_module", "query_module", "get_kernel_syms", "bpf", "perf_event_open", "userfaultfd",
    "lookup_dcookie", "iopl", "ioperm", "vm86", "vm86old", "uselib", "_sysctl", "nfsservctl",
    "syslog", "vhangup", "fanotify_init",
    // Keyrings are not namespaced.
    "keyctl", "add_key", "request_key",
    // The mount view and namespaces the engine built must stay as built.
    "mount", "umount", "umount2", "pivot_root", "chroot", "move_mount", "open_tree", "fsopen",
    "fsconfig", "fsmount", "fspick", "mount_setattr", "unshare", "setns",
    // Host administration.
    "swapon", "swapoff", "reboot", "acct", "quotactl", "quotactl_fd", "settimeofday", "stime",
    "clock_settime", "clock_adjtime",
    // File handles bypass path-based checks (open_by_handle_at was the "shocker" escape).
    "name_to_handle_at", "open_by_handle_at",
    // io_uring performs opens, connects and sends that seccomp never sees.
    "io_uring_setup", "io_uring_enter", "io_uring_register",
    // A splice or sendfile into a pipe holds that pipe's lock while it reads its source, and a
    // socket source waits as long as its peer likes: a command doing that into its own stdout
    // (or from its stdin) would make the supervisor's next read (or write) of the pipe wait
    // uninterruptibly, freezing its event loop (docs/threat-model.md "The supervisor's own reads
    // and writes").
    // vmsplice pins the caller's pages into a pipe the supervisor reads. Callers fall back to
    // read and write on EPERM (Rust's std, Python's shutil, Go's io.Copy).
    "splice", "vmsplice", "sendfile", "sendfile64",
};

// Every CLONE_NEW* flag clone() accepts (CLONE_NEWTIME shares its bit with the exit signal in
// clone() and is only valid for clone3/unshare, both refused).
constexpr unsigned long kCloneNamespaceFlags[] = {CLONE_NEWNS,   CLONE_NEWCGROUP, CLONE_NEWUTS,
                                                  CLONE_NEWIPC,  CLONE_NEWUSER,   CLONE_NEWPID,
                                                  CLONE_NEWNET};

Status seccomp_error(const char* what, int rc) { return Status::from_errno("seccomp", -rc, what); }

// Adds `action` for `name` with the given comparisons; an unknown or non-native syscall is
// skipped (returns 0).
template <class... Cmp>
int add_rule(void* ctx, uint32_t action, const char* name, Cmp... cmp) {
  int nr = seccomp_syscall_resolve_name(name);
  if (nr == __NR_SCMP_ERROR || nr < 0) return 0;
  return seccomp_rule_add(ctx, action, nr, sizeof...(Cmp), cmp...);
}

}  // namespace

StatusOr<SeccompProgram> build_seccomp_program(const SeccompPolicy& policy) {
  // seccomp_init only adds the native architecture (x86_64 here). A syscall from any other
  // architecture (i386 via int 0x80, and x32: libseccomp rejects syscall numbers with
  // __X32_SYSCALL_BIT on x86_64) hits the bad-arch action, set here to kill the whole
  // process (libseccomp's default kills only the thread). Without this, i386 numbers would
  // bypass every rule.
  Ctx ctx(seccomp_init(SCMP_ACT_ALLOW));
  if (!ctx) return Status::error("seccomp", ENOMEM, "seccomp_init failed");
  void* c = ctx.get();
  int rc = 0;
  if ((rc = seccomp_attr_set(c, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS)) < 0)
    return seccomp_error("bad-arch action", rc);
  // A binary search over syscall numbers instead of a linear chain: fewer instructions run per
  // syscall (libseccomp >= 2.5). Not fatal if refused.
  (void)seccomp_attr_set(c, SCMP_FLTATR_CTL_OPTIMIZE, 2);

  for (const char* name : kDenied) {
    if ((rc = add_rule(c, SCMP_ACT_ERRNO(EPERM), name)) < 0) return seccomp_error(name, rc);
  }
  // clone3 passes its flags in a struct the filter cannot read; ENOSYS makes glibc (>= 2.34)
  // fall back to clone(), whose flags are checked below.
  if ((rc = add_rule(c, SCMP_ACT_ERRNO(ENOSYS), "clone3")) < 0) return seccomp_error("clone3", rc);
  // libseccomp takes one comparison per argument per rule and rules on one syscall are ORed,
  // so "any namespace flag set" is one masked rule per flag.
  for (unsigned long flag : kCloneNamespaceFlags) {
    if ((rc = add_rule(c, SCMP_ACT_ERRNO(EPERM), "clone", SCMP_A0(SCMP_CMP_MASKED_EQ, flag, flag))) < 0)
      return seccomp_error("clone", rc);
  }
  // personality(2): only the query (0xffffffff) is allowed; any change is refused (it could,
  // e.g., turn off ASLR with ADDR_NO_RANDOMIZE). "Neither 0 nor 0xffffffff" would need two
  // comparisons on one argument, which libseccomp 2.5 refuses, so re-setting PER_LINUX is
  // refused too. A value with high bits set is refused (the kernel would truncate it).
  if ((rc = add_rule(c, SCMP_ACT_ERRNO(EPERM), "personality", SCMP_A0(SCMP_CMP_NE, 0xffffffffULL))) < 0)
    return seccomp_error("personality", rc);
  // TIOCSTI/TIOCLINUX push input into a terminal the command shares with its caller. The
  // kernel reads cmd as 32 bits, so only the low 32 bits are compared.
  for (unsigned long cmd : {static_cast<unsigned long>(TIOCSTI), static_cast<unsigned long>(TIOCLINUX)}) {
    if ((rc = add_rule(c, SCMP_ACT_ERRNO(EPERM), "ioctl", SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffULL, cmd))) < 0)
      return seccomp_error("ioctl", rc);
  }
  // No setuid or setgid bit may be created. A root-owned workspace is idmapped so that what
  // the sandbox creates is owned by root on the host: a set-id bit there would be a root
  // program for anyone on the host. Each rule names where the mode is (one masked
  // comparison per rule); openat2 and fchmodat2 carry it where the filter cannot look, so
  // they are refused with ENOSYS (libc falls back to openat / fchmodat).
  struct ModeArg {
    const char* name;
    unsigned arg;
  };
  for (ModeArg m : {ModeArg{"chmod", 1}, ModeArg{"fchmod", 1}, ModeArg{"fchmodat", 2}, ModeArg{"open", 2},
                    ModeArg{"openat", 3}, ModeArg{"creat", 1}, ModeArg{"mkdir", 1}, ModeArg{"mkdirat", 2},
                    ModeArg{"mknod", 1}, ModeArg{"mknodat", 2}}) {
    for (unsigned long bit : {static_cast<unsigned long>(S_ISUID), static_cast<unsigned long>(S_ISGID)}) {
      const scmp_arg_cmp cmp{m.arg, SCMP_CMP_MASKED_EQ, bit, bit};
      if ((rc = add_rule(c, SCMP_ACT_ERRNO(EPERM), m.name, cmp)) < 0) return seccomp_error(m.name, rc);
    }
  }
  if ((rc = add_rule(c, SCMP_ACT_ERRNO(ENOSYS), "openat2")) < 0) return seccomp_error("openat2", rc);
  // fchmodat2 (Linux 6.6) is newer than this libseccomp: by number (x86_64).
  if ((rc = seccomp_rule_add(c, SCMP_ACT_ERRNO(ENOSYS), 452, 0)) < 0) return seccomp_error("fchmodat2", rc);

  // Socket families. The filter allows by default, so the allowlist is written as its
  // complement: every domain but the allowed ones fails. The comparisons are 64-bit: a domain
  // with garbage in the high bits is refused even when the kernel (which reads an int) would
  // see an allowed family, so the rule errs on the side of refusing.
  const auto no_family = SCMP_ACT_ERRNO(EAFNOSUPPORT);
  for (const char* name : {"socket", "socketpair"}) {
    if (policy.deny_network) {
      static_assert(AF_UNIX == 1 && AF_INET == 2 && AF_INET6 == 10 && AF_NETLINK == 16);
      if ((rc = add_rule(c, no_family, name, SCMP_A0(SCMP_CMP_GT, AF_NETLINK))) < 0) return seccomp_error(name, rc);
      for (unsigned long family = 0; family < AF_NETLINK; ++family) {
        if (family == AF_UNIX || family == AF_INET || family == AF_INET6) continue;
        if ((rc = add_rule(c, no_family, name, SCMP_A0(SCMP_CMP_EQ, family))) < 0) return seccomp_error(name, rc);
      }
      // Netlink: routing only (getaddrinfo's AI_ADDRCONFIG and `ip addr` use it); audit,
      // uevents, netfilter and the rest stay closed.
      if ((rc = add_rule(c, no_family, name, SCMP_A0(SCMP_CMP_EQ, AF_NETLINK),
                         SCMP_A2(SCMP_CMP_NE, NETLINK_ROUTE))) < 0)
        return seccomp_error(name, rc);
    } else if (policy.deny_vsock) {
      // Only the low 32 bits, as the kernel reads them: no high-bit garbage slips past.
      if ((rc = add_rule(c, no_family, name, SCMP_A0(SCMP_CMP_MASKED_EQ, 0xffffffffULL, AF_VSOCK))) < 0)
        return seccomp_error(name, rc);
    }
  }

  if (policy.broker_connect) {
    if ((rc = add_rule(c, SCMP_ACT_NOTIFY, "connect")) < 0) return seccomp_error("connect", rc);
    // The kernel reads domain and type as ints: compare the low 32 bits of the domain, and the
    // type's SOCK_TYPE_MASK bits (the rest are SOCK_NONBLOCK/SOCK_CLOEXEC).
    for (const char* name : {"socket", "socketpair"}) {
      for (unsigned long type : {static_cast<unsigned long>(SOCK_DGRAM), static_cast<unsigned long>(SOCK_RAW)}) {
        if ((rc = add_rule(c, SCMP_ACT_ERRNO(EAFNOSUPPORT), name, SCMP_A0(SCMP_CMP_MASKED_EQ, 0xffffffffULL, AF_UNIX),
                           SCMP_A1(SCMP_CMP_MASKED_EQ, 0xfULL, type))) < 0)
          return seccomp_error(name, rc);
      }
    }
  }

  // libseccomp 2.5.4 has no seccomp_export_bpf_mem: export into a memfd and read it back.
  UniqueFd mem(::memfd_create("corral-seccomp", MFD_CLOEXEC));
  if (!mem) return Status::from_errno("seccomp", errno, "memfd_create");
  if ((rc = seccomp_export_bpf(c, mem.get())) < 0) return seccomp_error("export", rc);
  struct stat st {};
  if (::fstat(mem.get(), &st) != 0) return Status::from_errno("seccomp", errno, "fstat");
  const auto bytes = static_cast<std::size_t>(st.st_size);
  if (bytes == 0 || bytes % sizeof(struct sock_filter) != 0 ||
      bytes / sizeof(struct sock_filter) > BPF_MAXINSNS)
    return Status::error("seccomp", EINVAL, "exported filter has " + std::to_string(bytes) + " bytes");
  std::vector<struct sock_filter> filter(bytes / sizeof(struct sock_filter));
  std::size_t done = 0;
  auto* out = reinterpret_cast<char*>(filter.data());
  while (done < bytes) {
    ssize_t n = ::pread(mem.get(), out + done, bytes - done, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Status::from_errno("seccomp", n < 0 ? errno : EIO, "read back");
    done += static_cast<std::size_t>(n);
  }
  return SeccompProgram(std::move(filter));
}

int install_seccomp(const struct sock_fprog* prog) noexcept {
  if (prog == nullptr || prog->len == 0) return EINVAL;
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return errno;
  if (::syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, prog) != 0) return errno;
  return 0;
}

int install_seccomp_with_listener(const struct sock_fprog* prog, int* listener) noexcept {
  if (prog == nullptr || prog->len == 0 || listener == nullptr) return EINVAL;
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return errno;
  long fd = ::syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER, prog);
  if (fd < 0) return errno;
  *listener = static_cast<int>(fd);
  return 0;
}

Status probe_seccomp() {
  auto program = build_seccomp_program(SeccompPolicy{});
  if (!program.ok()) return program.status();
  const struct sock_fprog* prog = program->prog();

  // The child only makes syscalls (safe after fork in a multithreaded parent).
  auto report = probe_in_child(
      [](const void* arg) -> ProbeReport {
        if (int err = install_seccomp(static_cast<const struct sock_fprog*>(arg)); err != 0) return {1, err};
        if (::unshare(0) == 0 || errno != EPERM) return {2, errno};
        if (int s = ::socket(AF_PACKET, SOCK_DGRAM | SOCK_CLOEXEC, 0); s >= 0 || errno != EAFNOSUPPORT)
          return {3, s >= 0 ? 0 : errno};
        int s = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (s < 0) return {4, errno};
        ::close(s);
        return {0, 0};
      },
      prog);
  if (!report.ok()) return report.status();
  const ProbeReport r = *report;
  switch (r.step) {
    case 0: return Status();
    case 1: return Status::from_errno("install", r.err, "seccomp filter");
    case 2: return Status::error("verify", r.err, "unshare(0) was not refused with EPERM under the filter");
    case 3: return Status::error("verify", r.err, "socket(AF_PACKET) was not refused with EAFNOSUPPORT under the filter");
    default: return Status::from_errno("verify", r.err, "socket(AF_INET) under the filter");
  }
}

}  // namespace corral

namespace corral {

Status probe_seccomp_notify() {
  SeccompPolicy policy;
  policy.broker_connect = true;
  auto program = build_seccomp_program(policy);
  if (!program.ok()) return program.status();
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) return Status::from_errno("socketpair", errno);
  UniqueFd parent_end(sv[0]), child_end(sv[1]);
  struct Args {
    const struct sock_fprog* prog;
    int sock, parent_sock;
    pid_t parent;
  } args{program->prog(), child_end.get(), parent_end.get(), ::getpid()};
  // The child installs the filter, hands the listener over, and connects: the parent answers
  // that connect with ENOTCONN, which the child must see. Only syscalls in the child.
  pid_t pid = ::fork();
  if (pid < 0) return Status::from_errno("fork", errno);
  if (pid == 0) {
    // Not our parent's end: if the parent dies before it takes the listener, the listener in
    // flight must go with the last reference to that end, or our connect below would wait on
    // it forever (holding every descriptor the supervisor had). And die with the parent.
    ::close(args.parent_sock);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != args.parent) ::_exit(5);  // it died before the prctl
    int listener = -1;
    if (install_seccomp_with_listener(args.prog, &listener) != 0) ::_exit(1);
    if (fd_passing::send_fds(args.sock, 'L', &listener, 1) != 0) ::_exit(2);
    ::close(listener);
    int s = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un a {};
    a.sun_family = AF_UNIX;
    if (::connect(s, reinterpret_cast<struct sockaddr*>(&a), sizeof(sa_family_t) + 2) == 0) ::_exit(3);
    ::_exit(errno == ENOTCONN ? 0 : 4);
  }
  child_end.reset();
  auto reap = [&]() -> int {
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : 100;
  };
  char byte = 0;
  int fd = -1;
  std::size_t count = 0;
  if (fd_passing::receive_fds(parent_end.get(), &byte, &fd, 1, &count) != 1 || count != 1) {
    int code = reap();
    return Status::error("install", code == 1 ? EBUSY : EIO,
                         code == 1 ? "seccomp(SECCOMP_FILTER_FLAG_NEW_LISTENER) refused (a listener above us?)"
                                   : "the probe child did not hand over its listener");
  }
  UniqueFd listener(fd);
  struct seccomp_notif req {};
  int rc;
  do {
    rc = ::ioctl(listener.get(), SECCOMP_IOCTL_NOTIF_RECV, &req);
  } while (rc < 0 && errno == EINTR);
  if (rc < 0) {
    int err = errno;
    reap();
    return Status::from_errno("receive", err, "SECCOMP_IOCTL_NOTIF_RECV");
  }
  struct seccomp_notif_resp resp {};
  resp.id = req.id;
  resp.error = -ENOTCONN;
  if (::ioctl(listener.get(), SECCOMP_IOCTL_NOTIF_SEND, &resp) < 0) {
    int err = errno;
    reap();
    return Status::from_errno("answer", err, "SECCOMP_IOCTL_NOTIF_SEND");
  }
  int code = reap();
  if (code != 0) return Status::error("verify", EIO, "the answered connect() did not fail with ENOTCONN (" + std::to_string(code) + ")");
  return {};
}

}  // namespace corral
