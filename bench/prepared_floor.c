// The prepared-sandbox floor (bench_exec's BM_PreparedFloor): the least a sandboxed run of a
// program can cost when everything that can be prepared once already is.
//
// Once, at start: a private temp dir (the command's writable root), then new mount (private
// propagation), network (loopback up) and PID namespaces, plus a user namespace when not root
// (uid and gid mapped to 0); the seccomp filter is compiled (libseccomp) once; a forked init,
// PID 1 of the new PID namespace, then serves requests.
//
// Per request (one byte read from stdin): init forks a child that builds and applies a Landlock
// ruleset (read and execute beneath /, every file right beneath the temp dir, read and write on
// /dev/null; signals and abstract unix sockets scoped to the domain), sets PR_SET_NO_NEW_PRIVS,
// installs the seccomp filter (a deny list in the spirit of runtime/seccomp_filter.cc), and
// execs the program with stdin and stdout on /dev/null and an empty environment. init waits for
// it and writes one answer byte to stdout: 0 when it exited 0, its exit code otherwise, 128+N
// for signal N (capped at 255), 254 when fork failed. A step that fails in the child is named on
// stderr, and the child exits 100+step.
//
// Usage: corral_bench_prepared_floor [PROGRAM]   (default /bin/true)
// Writes 'R' to stdout once ready, or names the failed setup step on stderr and exits 1.
// Exits 0 at end of input (stdin closed), after removing the temp dir.
//
// Kernel facts: Landlock ABI 1 is Linux 5.13, ABI 4 (TCP) 6.7, ABI 5 (ioctl on devices) 6.10,
// ABI 6 (scopes) 6.12; the installed <linux/landlock.h> stops at ABI 2, so the constants are
// defined here from the kernel's include/uapi/linux/landlock.h.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <net/if.h>
#include <sched.h>
#include <seccomp.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

// Landlock syscalls: the same numbers on every architecture.
#define FLOOR_SYS_LANDLOCK_CREATE_RULESET 444
#define FLOOR_SYS_LANDLOCK_ADD_RULE 445
#define FLOOR_SYS_LANDLOCK_RESTRICT_SELF 446
#define FLOOR_LANDLOCK_CREATE_RULESET_VERSION (1U << 0)
#define FLOOR_LANDLOCK_RULE_PATH_BENEATH 1

#define FS_EXECUTE (1ULL << 0)
#define FS_WRITE_FILE (1ULL << 1)
#define FS_READ_FILE (1ULL << 2)
#define FS_READ_DIR (1ULL << 3)
#define FS_ABI1 ((1ULL << 13) - 1)  // EXECUTE .. MAKE_SYM
#define FS_REFER (1ULL << 13)       // ABI 2
#define FS_TRUNCATE (1ULL << 14)    // ABI 3
#define FS_IOCTL_DEV (1ULL << 15)   // ABI 5
#define SCOPE_ABSTRACT_UNIX_SOCKET (1ULL << 0)  // ABI 6
#define SCOPE_SIGNAL (1ULL << 1)                // ABI 6

struct floor_ruleset_attr {
  uint64_t handled_access_fs;
  uint64_t handled_access_net;  // ABI 4
  uint64_t scoped;              // ABI 6
};

struct __attribute__((packed)) floor_path_beneath_attr {
  uint64_t allowed_access;
  int32_t parent_fd;
};

// Refused with EPERM, as corral refuses them (runtime/seccomp_filter.cc has the reasons).
static const char* const kDenied[] = {
    "ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd", "kcmp", "kexec_load",
    "kexec_file_load", "init_module", "finit_module", "delete_module", "bpf", "perf_event_open",
    "userfaultfd", "iopl", "ioperm", "syslog", "keyctl", "add_key", "request_key", "mount",
    "umount2", "pivot_root", "chroot", "move_mount", "open_tree", "fsopen", "fsconfig",
    "fsmount", "fspick", "mount_setattr", "unshare", "setns", "swapon", "swapoff", "reboot",
    "acct", "quotactl", "settimeofday", "clock_settime", "clock_adjtime", "name_to_handle_at",
    "open_by_handle_at", "io_uring_setup", "io_uring_enter", "io_uring_register",
};

// What the serving init holds for every request.
struct prepared {
  const char* program;
  const char* temp_dir;
  int landlock_abi;
  int dev_null;             // O_RDWR, close-on-exec
  struct sock_fprog filter;  // compiled once
};

static void fail_setup(const char* step) {
  dprintf(2, "prepared_floor: %s: %s\n", step, strerror(errno));
  exit(1);
}

static int write_file(const char* path, const char* text) {
  int fd = open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  ssize_t n = write(fd, text, strlen(text));
  int err = errno;
  close(fd);
  errno = err;
  return n == (ssize_t)strlen(text) ? 0 : -1;
}

// libseccomp 2.5.4 has no seccomp_export_bpf_mem: export into a memfd and read it back.
static struct sock_fprog compile_filter(void) {
  scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
  if (!ctx) fail_setup("seccomp_init");
  if (seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS) < 0) fail_setup("seccomp bad-arch action");
  (void)seccomp_attr_set(ctx, SCMP_FLTATR_CTL_OPTIMIZE, 2);
  for (size_t i = 0; i < sizeof kDenied / sizeof kDenied[0]; ++i) {
    int nr = seccomp_syscall_resolve_name(kDenied[i]);
    if (nr == __NR_SCMP_ERROR) continue;
    if (seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), nr, 0) < 0) fail_setup(kDenied[i]);
  }
  // clone3 hides its flags from the filter: ENOSYS sends libc back to clone(), whose namespace
  // flags are refused one masked rule each.
  if (seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0) < 0) fail_setup("clone3 rule");
  const unsigned long ns_flags[] = {CLONE_NEWNS,   CLONE_NEWCGROUP, CLONE_NEWUTS, CLONE_NEWIPC,
                                    CLONE_NEWUSER, CLONE_NEWPID,    CLONE_NEWNET};
  for (size_t i = 0; i < sizeof ns_flags / sizeof ns_flags[0]; ++i) {
    if (seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(clone), 1,
                         SCMP_A0(SCMP_CMP_MASKED_EQ, ns_flags[i], ns_flags[i])) < 0)
      fail_setup("clone rule");
  }
  // Sockets: unix, inet, inet6 and netlink only (as corral with network denied).
  for (int family = 0; family <= AF_NETLINK; ++family) {
    if (family == AF_UNIX || family == AF_INET || family == AF_INET6 || family == AF_NETLINK) continue;
    if (seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EAFNOSUPPORT), SCMP_SYS(socket), 1,
                         SCMP_A0(SCMP_CMP_EQ, (scmp_datum_t)family)) < 0)
      fail_setup("socket rule");
  }
  if (seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EAFNOSUPPORT), SCMP_SYS(socket), 1, SCMP_A0(SCMP_CMP_GT, AF_NETLINK)) < 0)
    fail_setup("socket rule");

  int mem = memfd_create("floor-seccomp", MFD_CLOEXEC);
  if (mem < 0) fail_setup("memfd_create");
  int rc = seccomp_export_bpf(ctx, mem);
  if (rc < 0) {
    errno = -rc;
    fail_setup("seccomp_export_bpf");
  }
  seccomp_release(ctx);
  struct stat st;
  if (fstat(mem, &st) != 0) fail_setup("fstat seccomp memfd");
  size_t bytes = (size_t)st.st_size;
  if (bytes == 0 || bytes % sizeof(struct sock_filter) != 0) {
    errno = EINVAL;
    fail_setup("exported seccomp filter size");
  }
  struct sock_filter* insns = malloc(bytes);
  if (!insns) fail_setup("malloc");
  if (pread(mem, insns, bytes, 0) != (ssize_t)bytes) fail_setup("read back seccomp filter");
  close(mem);
  struct sock_fprog prog = {(unsigned short)(bytes / sizeof(struct sock_filter)), insns};
  return prog;
}

static void loopback_up(void) {
  int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (s < 0) fail_setup("socket for lo");
  struct ifreq ifr;
  memset(&ifr, 0, sizeof ifr);
  strcpy(ifr.ifr_name, "lo");
  if (ioctl(s, SIOCGIFFLAGS, &ifr) < 0) fail_setup("SIOCGIFFLAGS lo");
  ifr.ifr_flags |= IFF_UP;
  if (ioctl(s, SIOCSIFFLAGS, &ifr) < 0) fail_setup("SIOCSIFFLAGS lo");
  close(s);
}

// The child's side of one request: from fork to exec. Only syscalls and dprintf.
enum child_step { kRuleset = 1, kRuleRoot, kRuleTemp, kRuleDevNull, kStdio, kNoNewPrivs, kRestrict, kSeccomp, kExec };

static void child_fail(enum child_step step) {
  static const char* const names[] = {"", "landlock create ruleset", "landlock rule /", "landlock rule temp dir",
                                      "landlock rule /dev/null", "stdio", "no_new_privs", "landlock restrict",
                                      "seccomp", "exec"};
  dprintf(2, "prepared_floor child: %s: %s\n", names[step], strerror(errno));
  _exit(100 + step);
}

static int add_rule(int ruleset, const char* path, uint64_t rights, uint64_t handled) {
  int fd = open(path, O_PATH | O_CLOEXEC);
  if (fd < 0) return -1;
  struct stat st;
  if (fstat(fd, &st) != 0) {
    int err = errno;
    close(fd);
    errno = err;
    return -1;
  }
  if (!S_ISDIR(st.st_mode)) rights &= FS_EXECUTE | FS_WRITE_FILE | FS_READ_FILE | FS_TRUNCATE | FS_IOCTL_DEV;
  struct floor_path_beneath_attr attr = {rights & handled, fd};
  long rc = syscall(FLOOR_SYS_LANDLOCK_ADD_RULE, ruleset, FLOOR_LANDLOCK_RULE_PATH_BENEATH, &attr, 0);
  int err = errno;
  close(fd);
  errno = err;
  return rc == 0 ? 0 : -1;
}

static void run_child(const struct prepared* p) {
  const int abi = p->landlock_abi;
  uint64_t handled = FS_ABI1;
  if (abi >= 2) handled |= FS_REFER;
  if (abi >= 3) handled |= FS_TRUNCATE;
  if (abi >= 5) handled |= FS_IOCTL_DEV;
  struct floor_ruleset_attr attr = {handled, 0, 0};
  if (abi >= 6) attr.scoped = SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL;
  // TCP is not handled: the network namespace is the barrier (as in corral).
  size_t size = abi >= 6 ? sizeof attr : offsetof(struct floor_ruleset_attr, handled_access_net);
  int ruleset = (int)syscall(FLOOR_SYS_LANDLOCK_CREATE_RULESET, &attr, size, 0);  // close-on-exec
  if (ruleset < 0) child_fail(kRuleset);
  if (add_rule(ruleset, "/", FS_EXECUTE | FS_READ_FILE | FS_READ_DIR, handled) < 0) child_fail(kRuleRoot);
  if (add_rule(ruleset, p->temp_dir, handled, handled) < 0) child_fail(kRuleTemp);
  if (add_rule(ruleset, "/dev/null", FS_READ_FILE | FS_WRITE_FILE | FS_TRUNCATE | FS_IOCTL_DEV, handled) < 0)
    child_fail(kRuleDevNull);
  if (dup2(p->dev_null, 0) < 0 || dup2(p->dev_null, 1) < 0) child_fail(kStdio);
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) child_fail(kNoNewPrivs);
  if (syscall(FLOOR_SYS_LANDLOCK_RESTRICT_SELF, ruleset, 0) != 0) child_fail(kRestrict);
  if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &p->filter) != 0) child_fail(kSeccomp);
  char* const argv[] = {(char*)p->program, NULL};
  char* const envp[] = {NULL};
  execve(p->program, argv, envp);
  child_fail(kExec);
}

// PID 1 of the new PID namespace: one child per request byte, one answer byte per child.
static int serve(const struct prepared* p) {
  const unsigned char ready = 'R';
  if (write(1, &ready, 1) != 1) fail_setup("write ready");
  for (;;) {
    unsigned char request;
    ssize_t n = read(0, &request, 1);
    if (n == 0) return 0;
    if (n < 0) {
      if (errno == EINTR) continue;
      fail_setup("read request");
    }
    unsigned char answer = 254;
    pid_t pid = fork();
    if (pid == 0) run_child(p);
    if (pid > 0) {
      int status = 0;
      while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
      if (WIFEXITED(status)) answer = (unsigned char)WEXITSTATUS(status);
      else if (WIFSIGNALED(status)) answer = (unsigned char)(WTERMSIG(status) < 127 ? 128 + WTERMSIG(status) : 255);
    }
    if (write(1, &answer, 1) != 1) return 1;
  }
}

int main(int argc, char** argv) {
  struct prepared p;
  p.program = argc > 1 ? argv[1] : "/bin/true";
  long abi = syscall(FLOOR_SYS_LANDLOCK_CREATE_RULESET, NULL, 0, FLOOR_LANDLOCK_CREATE_RULESET_VERSION);
  if (abi < 1) fail_setup("landlock (ABI version query)");
  p.landlock_abi = (int)abi;
  p.filter = compile_filter();

  char temp_dir[] = "/tmp/corral-floor-XXXXXX";
  if (!mkdtemp(temp_dir)) fail_setup("mkdtemp");
  p.temp_dir = temp_dir;

  const uid_t uid = geteuid();
  const gid_t gid = getegid();
  int flags = CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWPID;
  if (uid != 0) flags |= CLONE_NEWUSER;
  if (unshare(flags) != 0) {
    int err = errno;
    rmdir(temp_dir);
    errno = err;
    fail_setup("unshare");
  }
  if (uid != 0) {
    char map[64];
    if (write_file("/proc/self/setgroups", "deny") != 0) fail_setup("setgroups deny");
    snprintf(map, sizeof map, "0 %u 1", (unsigned)uid);
    if (write_file("/proc/self/uid_map", map) != 0) fail_setup("uid_map");
    snprintf(map, sizeof map, "0 %u 1", (unsigned)gid);
    if (write_file("/proc/self/gid_map", map) != 0) fail_setup("gid_map");
  }
  if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0) fail_setup("mount / private");
  loopback_up();
  p.dev_null = open("/dev/null", O_RDWR | O_CLOEXEC);
  if (p.dev_null < 0) fail_setup("open /dev/null");

  pid_t init = fork();
  if (init < 0) fail_setup("fork init");
  if (init == 0) _exit(serve(&p));
  // Only init talks to the client: its end of file is init's.
  close(0);
  close(1);
  int status = 0;
  while (waitpid(init, &status, 0) < 0 && errno == EINTR) {
  }
  rmdir(temp_dir);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}
