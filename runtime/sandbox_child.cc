// The sandbox's init, from clone to the command's exec and then as PID 1 until the command
// ends. Austere on purpose, like child_setup.cc: no allocation, no logging, no exceptions;
// it reads the SandboxPlan the parent prepared and makes syscalls. A failed step writes
// {step, errno} to the error pipe and exits; the parent reads that pipe to EOF.
//
// This runs in a forked copy of the supervisor (clone without CLONE_VM), so it may write its
// own copy of the plan (the bind tree fds).
#include "runtime/sandbox_plan.h"

#include <fcntl.h>
#include <grp.h>
#include <linux/openat2.h>
#include <linux/capability.h>
#include <linux/close_range.h>
#include <linux/securebits.h>
#include <net/if.h>
#include <sched.h>
#include <signal.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/signalfd.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

#include "runtime/connect_broker.h"
#include "runtime/fd_passing.h"
#include "runtime/landlock.h"
#include "runtime/seccomp_filter.h"

#ifndef AT_RECURSIVE
#define AT_RECURSIVE 0x8000  // linux/fcntl.h, 5.12
#endif

namespace corral::sandbox {

const char* step_name(int step) {
  switch (static_cast<Step>(step)) {
    case Step::none: return "none";
    case Step::sync: return "sync";
    case Step::ids: return "ids";
    case Step::hostname: return "hostname";
    case Step::loopback: return "loopback";
    case Step::mount_private: return "mount-private";
    case Step::mount_source: return "mount-source";
    case Step::mount_root_ro: return "mount-root-ro";
    case Step::mount_root: return "mount-root";
    case Step::mount_bind: return "mount-bind";
    case Step::mount_target: return "mount-target";
    case Step::mount_dev: return "mount-dev";
    case Step::mount_proc: return "mount-proc";
    case Step::mount_mask: return "mount-mask";
    case Step::mount_protect: return "mount-protect";
    case Step::rlimits: return "rlimits";
    case Step::fork: return "fork";
    case Step::chdir: return "chdir";
    case Step::no_new_privs: return "no-new-privs";
    case Step::landlock: return "landlock";
    case Step::caps: return "caps";
    case Step::seccomp: return "seccomp";
    case Step::exec: return "exec";
    case Step::broker: return "broker";
    case Step::mount_run: return "mount-run";
    case Step::ready: return "ready";
    case Step::cgroup_ns: return "cgroup-ns";
    case Step::cgroup_join: return "cgroup-join";
    case Step::own_ids: return "own-ids";
    case Step::prepared: return "prepared";
  }
  return child::step_name(static_cast<child::Step>(step));
}

namespace {

// register_command_line(): the supervisor's argv strings, one contiguous area.
char* g_cmdline = nullptr;
std::size_t g_cmdline_len = 0;

void blank_command_line() {
  if (!g_cmdline) return;
  static constexpr char kName[] = "corral-init";
  std::memset(g_cmdline, 0, g_cmdline_len);
  std::memcpy(g_cmdline, kName, sizeof kName <= g_cmdline_len ? sizeof kName - 1 : g_cmdline_len - 1);
}

[[noreturn]] void fail(const SandboxPlan& plan, Step step, int err) {
  child::ChildError e{static_cast<child::Step>(step), err};
  [[maybe_unused]] auto n = ::write(plan.exec.error_fd, &e, sizeof e);
  ::_exit(127);
}

int set_readonly(int dfd, const char* path, unsigned flags, bool readonly) {
  struct mount_attr attr {};
  if (readonly) attr.attr_set = MOUNT_ATTR_RDONLY;
  else attr.attr_clr = MOUNT_ATTR_RDONLY;
  return ::mount_setattr(dfd, path, flags, &attr, sizeof attr);
}

// Writable binds never honour set-id bits or device nodes: whatever the command plants there
// is ordinary inside (seccomp keeps it from creating set-id bits at all).
int set_writable_bind(int tree) {
  struct mount_attr attr {};
  attr.attr_clr = MOUNT_ATTR_RDONLY;
  attr.attr_set = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV;
  return ::mount_setattr(tree, "", AT_EMPTY_PATH | AT_RECURSIVE, &attr, sizeof attr);
}

// Creates a missing mount point: a directory or an empty file. EROFS/ENOENT here means the
// target lies in a read-only part of the view; the caller reports it.
int ensure_target(const char* path, bool is_dir) {
  struct stat st {};
  if (::stat(path, &st) == 0) return 0;
  // Create the missing parents first (a workspace at /tmp/a/b shows inside the scope's temp
  // dir, which lacks a/), on a stack copy of the path.
  char buf[4096];
  const std::size_t len = std::strlen(path);
  if (len >= sizeof buf) {
    errno = ENAMETOOLONG;
    return -1;
  }
  std::memcpy(buf, path, len + 1);
  for (std::size_t i = 1; i < len; ++i) {
    if (buf[i] != '/') continue;
    buf[i] = '\0';
    if (::mkdir(buf, 0755) < 0 && errno != EEXIST) return -1;
    buf[i] = '/';
  }
  if (is_dir) return ::mkdir(path, 0755) == 0 || errno == EEXIST ? 0 : -1;
  int fd = ::open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return -1;
  ::close(fd);
  return 0;
}

// The mount a path lies on (statx's mount id, Linux 5.8+); 0 if it cannot be found.
std::uint64_t mount_id(int dfd, const char* path, int flags) {
  struct statx sx {};
  if (::statx(dfd, path, flags | AT_STATX_DONT_SYNC, STATX_MNT_ID, &sx) < 0 || !(sx.stx_mask & STATX_MNT_ID)) return 0;
  return sx.stx_mnt_id;
}

// Puts a tmpfs layer over the directory `dir` and attaches each of its entries back onto it
// unchanged (each a recursive clone of what was there, its own mounts and access included;
// symlinks copied as symlinks). Nothing is written to the filesystem under `dir`. Returns the
// layer's root (O_PATH-free, close-on-exec), or -1 with errno.
int layer_directory(const char* dir) {
  constexpr int kMaxEntries = 4096;  // each entry is a mount
  int old = ::open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (old < 0) return -1;
  int layer = -1;
  auto fail_with = [&](int err) {
    ::close(old);
    if (layer >= 0) ::close(layer);
    errno = err;
    return -1;
  };
  if (::mount("tmpfs", dir, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=64k") < 0) return fail_with(errno);
  layer = ::open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (layer < 0) return fail_with(errno);
  alignas(8) char buf[4096];
  int entries = 0;
  for (;;) {
    long n = ::syscall(SYS_getdents64, old, buf, sizeof buf);
    if (n < 0) return fail_with(errno);
    if (n == 0) break;
    for (long off = 0; off < n;) {
      // struct linux_dirent64: ino (8), off (8), reclen (2), type (1), name.
      unsigned short reclen;
      std::memcpy(&reclen, buf + off + 16, sizeof reclen);
      const char* name = buf + off + 19;
      off += reclen;
      if (std::strcmp(name, ".") == 0 || std::strcmp(name, "..") == 0) continue;
      if (++entries > kMaxEntries) return fail_with(E2BIG);
      struct stat st {};
      if (::fstatat(old, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
        if (errno == ENOENT) continue;
        return fail_with(errno);
      }
      if (S_ISLNK(st.st_mode)) {
        char target[4096];
        ssize_t k = ::readlinkat(old, name, target, sizeof target - 1);
        if (k < 0) return fail_with(errno);
        target[k] = '\0';
        if (::symlinkat(target, layer, name) < 0) return fail_with(errno);
        continue;
      }
      if (S_ISDIR(st.st_mode)) {
        if (::mkdirat(layer, name, 0755) < 0) return fail_with(errno);
      } else {
        int f = ::openat(layer, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        if (f < 0) return fail_with(errno);
        ::close(f);
      }
      int tree = ::open_tree(old, name, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE | AT_SYMLINK_NOFOLLOW);
      if (tree < 0) return fail_with(errno);
      int rc = ::move_mount(tree, "", layer, name, MOVE_MOUNT_F_EMPTY_PATH);
      int err = errno;
      ::close(tree);
      if (rc < 0) return fail_with(err);
    }
  }
  ::close(old);
  return layer;
}

// Makes the missing mount point of a bind in the sandbox's own view, never on a host
// filesystem (docs/threat-model.md "Binds"). Beneath the scope's temp dir (its own mount at
// /tmp) it is made there, as the scope's own file. Anywhere else, the nearest existing
// ancestor gets a tmpfs layer (layer_directory), the missing directories are made in the
// layer, and the layer is made read-only: only new names directly in that ancestor are lost.
// `own` are the mounts that are the sandbox's own already (the temp dir at /tmp and /var/tmp,
// the empty /run): a mount point beneath them is made there.
int make_mount_point(const char* path, bool is_dir, const std::uint64_t* own, std::size_t own_count) {
  struct stat st {};
  if (::stat(path, &st) == 0) return 0;
  char ancestor[4096];
  const std::size_t len = std::strlen(path);
  if (len >= sizeof ancestor || path[0] != '/') {
    errno = len >= sizeof ancestor ? ENAMETOOLONG : EINVAL;
    return -1;
  }
  std::memcpy(ancestor, path, len + 1);
  for (;;) {
    char* slash = std::strrchr(ancestor, '/');
    if (slash == ancestor) {
      ancestor[1] = '\0';
      break;
    }
    *slash = '\0';
    if (::stat(ancestor, &st) == 0) break;
  }
  if (!S_ISDIR(st.st_mode)) {
    errno = ENOTDIR;
    return -1;
  }
  const std::uint64_t ancestor_mount = own_count ? mount_id(AT_FDCWD, ancestor, 0) : 0;
  for (std::size_t k = 0; k < own_count; ++k)
    if (own[k] != 0 && ancestor_mount == own[k]) return ensure_target(path, is_dir);
  if (std::strcmp(ancestor, "/") == 0) {
    errno = EINVAL;  // the root cannot be layered; the supervisor refuses such targets first
    return -1;
  }
  int layer = layer_directory(ancestor);
  if (layer < 0) return -1;
  int rc = ensure_target(path, is_dir);
  int err = errno;
  if (rc == 0) rc = set_readonly(layer, "", AT_EMPTY_PATH, true);
  else errno = err;
  err = errno;
  ::close(layer);
  errno = err;
  return rc;
}

// tmpfs, mode 000 and read-only: an empty, unreadable directory.
int mask_dir(const char* path) {
  return ::mount("tmpfs", path, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=000,size=4k");
}

// Opens `path` (canonical) without following any link, O_PATH, and checks that it is the object
// the parent resolved; -1 with errno (ESTALE: something else is there now) otherwise.
int open_verified(const char* path, dev_t dev, ino_t ino) {
  struct open_how how {};
  how.flags = O_PATH | O_CLOEXEC;
  how.resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
  long r = ::syscall(SYS_openat2, AT_FDCWD, path, &how, sizeof how);
  if (r < 0) return -1;
  const int fd = static_cast<int>(r);
  struct stat st {};
  if (::fstat(fd, &st) < 0 || st.st_dev != dev || st.st_ino != ino) {
    ::close(fd);
    errno = ESTALE;
    return -1;
  }
  return fd;
}

// An empty mode-000 file on a private tmpfs, as a detached tree to clone over masked files.
int make_empty_file_tree(const SandboxPlan& plan) {
  int fs = ::fsopen("tmpfs", FSOPEN_CLOEXEC);
  if (fs < 0) fail(plan, Step::mount_mask, errno);
  if (::fsconfig(fs, FSCONFIG_SET_STRING, "size", "4k", 0) < 0 || ::fsconfig(fs, FSCONFIG_CMD_CREATE, nullptr, nullptr, 0) < 0)
    fail(plan, Step::mount_mask, errno);
  int mnt = ::fsmount(fs, FSMOUNT_CLOEXEC, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC);
  if (mnt < 0) fail(plan, Step::mount_mask, errno);
  int f = ::openat(mnt, "masked", O_WRONLY | O_CREAT | O_CLOEXEC, 0);
  if (f < 0) fail(plan, Step::mount_mask, errno);
  ::close(f);
  int tree = ::open_tree(mnt, "masked", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
  if (tree < 0) fail(plan, Step::mount_mask, errno);
  ::close(mnt);
  ::close(fs);
  return tree;
}

// An empty, unreadable, read-only directory: a fresh tmpfs (mode 000) as a detached mount.
int make_empty_dir_mount(const SandboxPlan& plan) {
  int fs = ::fsopen("tmpfs", FSOPEN_CLOEXEC);
  if (fs < 0) fail(plan, Step::mount_mask, errno);
  if (::fsconfig(fs, FSCONFIG_SET_STRING, "size", "4k", 0) < 0 || ::fsconfig(fs, FSCONFIG_SET_STRING, "mode", "000", 0) < 0 ||
      ::fsconfig(fs, FSCONFIG_CMD_CREATE, nullptr, nullptr, 0) < 0)
    fail(plan, Step::mount_mask, errno);
  int mnt = ::fsmount(fs, FSMOUNT_CLOEXEC, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC);
  if (mnt < 0) fail(plan, Step::mount_mask, errno);
  ::close(fs);
  return mnt;
}

// Guards and pins (sandbox_plan.h), each on exactly the object the parent resolved: opened
// without following links and compared by (dev, ino), then mounted over through that same
// descriptor. A location the sandbox cannot even look up (EACCES) is out of its reach already.
void apply_guards(const SandboxPlan& plan) {
  int empty_file_tree = -1;
  for (std::size_t i = 0; i < plan.guard_count; ++i) {
    const Guard& g = plan.guards[i];
    const Step step = g.kind == GuardKind::mask ? Step::mount_mask : Step::mount_protect;
    const int fd = open_verified(g.path, g.dev, g.ino);
    if (fd < 0) {
      if (errno == EACCES) continue;
      fail(plan, step, errno);
    }
    struct stat st {};
    if (::fstat(fd, &st) < 0) fail(plan, step, errno);
    int tree;
    if (g.kind != GuardKind::mask) {
      tree = ::open_tree(fd, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE | AT_EMPTY_PATH);
      if (tree < 0) fail(plan, step, errno);
      if (g.kind == GuardKind::protect && set_readonly(tree, "", AT_EMPTY_PATH | AT_RECURSIVE, true) < 0) fail(plan, step, errno);
    } else if (S_ISDIR(st.st_mode)) {
      tree = make_empty_dir_mount(plan);
    } else {
      if (empty_file_tree < 0) empty_file_tree = make_empty_file_tree(plan);
      tree = ::open_tree(empty_file_tree, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH);
      if (tree < 0) fail(plan, step, errno);
      if (set_readonly(tree, "", AT_EMPTY_PATH, true) < 0) fail(plan, step, errno);
    }
    if (::move_mount(tree, "", fd, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0) fail(plan, step, errno);
    ::close(tree);
    ::close(fd);
  }
  if (empty_file_tree >= 0) ::close(empty_file_tree);
}

void bring_loopback_up(const SandboxPlan& plan) {
  int s = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (s < 0) fail(plan, Step::loopback, errno);
  struct ifreq ifr {};
  std::memcpy(ifr.ifr_name, "lo", 3);
  if (::ioctl(s, SIOCGIFFLAGS, &ifr) < 0) fail(plan, Step::loopback, errno);
  ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
  if (::ioctl(s, SIOCSIFFLAGS, &ifr) < 0) fail(plan, Step::loopback, errno);
  ::close(s);
}

// Receives "go" and the parent's detached mounts. EOF: the parent is gone.
void wait_for_parent(SandboxPlan& plan, int* parent_fds, std::size_t& parent_fd_count) {
  char byte = 0;
  const ssize_t n = fd_passing::receive_fds(plan.sync_fd, &byte, parent_fds, kMaxBinds, &parent_fd_count);
  if (n != 1 || byte != 'g') fail(plan, Step::sync, n < 0 ? errno : EPIPE);
}

struct Sources {
  int dev[kMaxDevNodes];
  int shm = -1;
  int run_keep[4];
};

// Phase one, with the supervisor's host uid: make every mount private and open every bind
// source as a detached tree, before anything is mounted over it (a workspace under /tmp must
// not disappear when the temp dir covers /tmp). Our capabilities in the new user namespace
// count only for inodes whose owner is mapped into it, so this reaches what the supervisor's
// uid can reach, and no more.
void open_sources(SandboxPlan& plan, const int* parent_fds, std::size_t parent_fd_count, Sources& src) {
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) < 0) fail(plan, Step::mount_private, errno);
  for (std::size_t i = 0; i < plan.bind_count; ++i) {
    BindMount& b = plan.binds[i];
    if (b.parent_slot >= 0) {
      if (static_cast<std::size_t>(b.parent_slot) >= parent_fd_count) fail(plan, Step::mount_source, EBADF);
      b.tree_fd = parent_fds[b.parent_slot];
      continue;
    }
    if (b.tree_fd >= 0) continue;  // cloned by the parent from its descriptor
    int fd = open_verified(b.source, b.dev, b.ino);
    if (fd < 0) fail(plan, Step::mount_source, errno);
    b.tree_fd = ::open_tree(fd, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE | AT_EMPTY_PATH);
    if (b.tree_fd < 0) fail(plan, Step::mount_source, errno);
    ::close(fd);
  }
  if (plan.full_access) return;
  for (std::size_t i = 0; i < plan.dev_node_count; ++i) {
    src.dev[i] = ::open_tree(AT_FDCWD, plan.dev_nodes[i], OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
    if (src.dev[i] < 0) fail(plan, Step::mount_dev, errno);
  }
  if (plan.dev_shm_source) {
    src.shm = ::open_tree(AT_FDCWD, plan.dev_shm_source, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
    if (src.shm < 0) fail(plan, Step::mount_dev, errno);
  }
  for (std::size_t i = 0; i < plan.run_keep_count; ++i) {
    src.run_keep[i] = ::open_tree(AT_FDCWD, plan.run_keep[i], OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
    if (src.run_keep[i] < 0) fail(plan, Step::mount_run, errno);
  }
}

// With a root tree from the parent (SandboxPlan::root_tree), makes it our root and drops the
// copy of the host's namespace we were born with: attached over /tmp (in our own namespace,
// every mount private by now; no directory is made, since we have no mapped uid yet), then
// pivot_root(".", ".") stacks the old root on the new one, and a lazy unmount takes the old
// one, and everything on it, away.
void enter_root_tree(const SandboxPlan& plan) {
  if (plan.root_tree < 0) return;
  if (::move_mount(plan.root_tree, "", AT_FDCWD, "/tmp", MOVE_MOUNT_F_EMPTY_PATH) < 0 || ::chdir("/tmp") < 0 ||
      ::syscall(SYS_pivot_root, ".", ".") < 0 || ::umount2(".", MNT_DETACH) < 0 || ::chdir("/") < 0)
    fail(plan, Step::mount_root, errno);
  ::close(plan.root_tree);
}

// An empty tmpfs over /run (host sockets and runtime state live there), writable until the
// binds are in place; `keep` are host files shown at their own paths inside it.
void empty_run(const SandboxPlan& plan, const Sources& src) {
  if (::mount("tmpfs", "/run", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=0755,size=64k") < 0)
    fail(plan, Step::mount_run, errno);
  for (std::size_t i = 0; i < plan.run_keep_count; ++i) {
    if (ensure_target(plan.run_keep[i], false) < 0) fail(plan, Step::mount_run, errno);
    if (set_readonly(src.run_keep[i], "", AT_EMPTY_PATH, true) < 0) fail(plan, Step::mount_run, errno);
    if (::move_mount(src.run_keep[i], "", AT_FDCWD, plan.run_keep[i], MOVE_MOUNT_F_EMPTY_PATH) < 0)
      fail(plan, Step::mount_run, errno);
    ::close(src.run_keep[i]);
  }
  if (plan.var_run && ::mount("tmpfs", plan.var_run, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
                              "mode=0755,size=4k") < 0)
    fail(plan, Step::mount_run, errno);
}

// Phase two, as the sandbox's own uid (files created in the new tmpfs mounts need a mapped
// owner): the read-only root, the binds, /dev, /proc, protected paths and masks.
void build_mount_view(SandboxPlan& plan, Sources& src) {
  int* dev_fds = src.dev;
  int shm_fd = src.shm;
  if (!plan.full_access) {
    // The whole host tree, read-only (5.12+). Adding MNT_READONLY is allowed even on mounts
    // whose flags are locked by the user namespace; removing it would not be.
    if (set_readonly(AT_FDCWD, "/", AT_RECURSIVE, true) < 0) fail(plan, Step::mount_root_ro, errno);
    // A prepared sandbox's commands each mount their own /proc over the host's, from user
    // namespaces of their own, where the kernel allows a new proc mount only while one as
    // permissive is there already: the host's stays writable here. No command ever sees it
    // (prepared_command_init mounts over it before the command exists; a failed mount ends it).
    if (plan.prepared && set_readonly(AT_FDCWD, "/proc", 0, false) < 0) fail(plan, Step::mount_proc, errno);
  }
  // The binds come in order: the temp dir at /tmp (and /var/tmp) first, then the workspace
  // roots and --bind.
  std::uint64_t own_mounts[3] = {};
  std::size_t own_count = 0;
  if (plan.empty_run) {
    empty_run(plan, src);
    own_mounts[own_count++] = mount_id(AT_FDCWD, "/run", 0);
  }
  for (std::size_t i = 0; i < plan.bind_count; ++i) {
    BindMount& b = plan.binds[i];
    int rc = b.writable ? set_writable_bind(b.tree_fd) : set_readonly(b.tree_fd, "", AT_EMPTY_PATH | AT_RECURSIVE, true);
    if (rc < 0) fail(plan, Step::mount_bind, errno);
    if (make_mount_point(b.target, b.is_dir, own_mounts, own_count) < 0) fail(plan, Step::mount_target, errno);
    if (::move_mount(b.tree_fd, "", AT_FDCWD, b.target, MOVE_MOUNT_F_EMPTY_PATH) < 0) fail(plan, Step::mount_bind, errno);
    ::close(b.tree_fd);
    if (i <= 1 && (std::strcmp(b.target, "/tmp") == 0 || std::strcmp(b.target, "/var/tmp") == 0) && own_count < 3)
      own_mounts[own_count++] = mount_id(AT_FDCWD, b.target, 0);
  }

  if (!plan.full_access) {
    // A fresh /dev with only the harmless nodes (no mknod inside a user namespace: bind them).
    if (::mount("tmpfs", "/dev", "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=0755,size=64k") < 0) fail(plan, Step::mount_dev, errno);
    for (std::size_t i = 0; i < plan.dev_node_count; ++i) {
      if (ensure_target(plan.dev_nodes[i], false) < 0) fail(plan, Step::mount_dev, errno);
      if (::move_mount(dev_fds[i], "", AT_FDCWD, plan.dev_nodes[i], MOVE_MOUNT_F_EMPTY_PATH) < 0)
        fail(plan, Step::mount_dev, errno);
      ::close(dev_fds[i]);
    }
    if (shm_fd >= 0) {
      if (::mkdir("/dev/shm", 01777) < 0) fail(plan, Step::mount_dev, errno);
      if (set_writable_bind(shm_fd) < 0) fail(plan, Step::mount_dev, errno);
      if (::move_mount(shm_fd, "", AT_FDCWD, "/dev/shm", MOVE_MOUNT_F_EMPTY_PATH) < 0) fail(plan, Step::mount_dev, errno);
      ::close(shm_fd);
    }
    if (::symlink("/proc/self/fd", "/dev/fd") < 0 || ::symlink("/proc/self/fd/0", "/dev/stdin") < 0 ||
        ::symlink("/proc/self/fd/1", "/dev/stdout") < 0 || ::symlink("/proc/self/fd/2", "/dev/stderr") < 0)
      fail(plan, Step::mount_dev, errno);
    if (set_readonly(AT_FDCWD, "/dev", 0, true) < 0) fail(plan, Step::mount_dev, errno);
  }

  if (plan.empty_run && set_readonly(AT_FDCWD, "/run", 0, true) < 0) fail(plan, Step::mount_run, errno);

  // /proc of the command's own PID namespace (we are its PID 1). A prepared sandbox's server
  // has no PID namespace of its own: each command's init mounts its own (mount_own_proc).
  if (!plan.prepared && ::mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) < 0)
    fail(plan, Step::mount_proc, errno);

  apply_guards(plan);

  // Masks last, so that no later bind can uncover them. A path that is not in the view (the
  // socket dir under a /tmp the temp dir replaced), or that the sandbox uid cannot look up,
  // is already out of the command's reach.
  int empty_file_tree = -1;
  for (std::size_t i = 0; i < plan.mask_count; ++i) {
    const Mask& m = plan.masks[i];
    struct stat st {};
    if (::stat(m.path, &st) < 0) {
      if (errno == ENOENT || errno == ENOTDIR || errno == EACCES) continue;
      fail(plan, Step::mount_mask, errno);
    }
    if (S_ISDIR(st.st_mode)) {
      if (mask_dir(m.path) < 0) fail(plan, Step::mount_mask, errno);
      continue;
    }
    // A file: cover it with an empty mode-000 file from a private tmpfs.
    if (empty_file_tree < 0) empty_file_tree = make_empty_file_tree(plan);
    int copy = ::open_tree(empty_file_tree, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH);
    if (copy < 0) fail(plan, Step::mount_mask, errno);
    if (set_readonly(copy, "", AT_EMPTY_PATH, true) < 0) fail(plan, Step::mount_mask, errno);
    if (::move_mount(copy, "", AT_FDCWD, m.path, MOVE_MOUNT_F_EMPTY_PATH) < 0) fail(plan, Step::mount_mask, errno);
    ::close(copy);
  }
  if (empty_file_tree >= 0) ::close(empty_file_tree);
}

void drop_privileges(const SandboxPlan& plan) {
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) fail(plan, Step::no_new_privs, errno);
  if (plan.landlock_fd >= 0) {
    int err = landlock_restrict(plan.landlock_fd);
    if (err) fail(plan, Step::landlock, err);
  }
  // Root inside the user namespace must not get capabilities back at exec: empty bounding
  // set, no ambient set, and the securebits that make uid 0 ordinary, locked.
  for (int cap = 0; cap < 64; ++cap) {
    if (::prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 && errno != EINVAL) fail(plan, Step::caps, errno);
  }
  if (::prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0) fail(plan, Step::caps, errno);
  if (::prctl(PR_SET_SECUREBITS, SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_NO_SETUID_FIXUP |
                                     SECBIT_NO_SETUID_FIXUP_LOCKED | SECBIT_KEEP_CAPS_LOCKED |
                                     SECBIT_NO_CAP_AMBIENT_RAISE | SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED,
              0, 0, 0) < 0)
    fail(plan, Step::caps, errno);
  struct __user_cap_header_struct hdr {_LINUX_CAPABILITY_VERSION_3, 0};
  struct __user_cap_data_struct data[2] {};
  if (::syscall(SYS_capset, &hdr, data) < 0) fail(plan, Step::caps, errno);
  if (plan.seccomp && plan.broker.enabled) {
    int listener = -1;
    int err = install_seccomp_with_listener(plan.seccomp, &listener);
    if (err) fail(plan, Step::seccomp, err);
    // Hand the listener to init, the broker; the command keeps no copy.
    if (int e = fd_passing::send_fds(plan.broker_fd, 'L', &listener, 1)) fail(plan, Step::broker, e);
    ::close(listener);
    ::close(plan.broker_fd);
  } else if (plan.seccomp) {
    int err = install_seccomp(plan.seccomp);
    if (err) fail(plan, Step::seccomp, err);
  }
}

// init's side of the hand-over: the listener, or -1 if the command failed before sending it.
int receive_listener(int sock) {
  char byte = 0;
  int fd = -1;
  std::size_t count = 0;
  if (fd_passing::receive_fds(sock, &byte, &fd, 1, &count) != 1 || count != 1) return -1;
  return fd;
}


[[noreturn]] void run_command(const SandboxPlan& plan) {
  if (::setsid() < 0) fail(plan, Step::fork, errno);
  drop_privileges(plan);
  // With the command's own rights, in its own view: a link there leads only where it could go
  // anyway (docs/threat-model.md "Host paths").
  if (plan.exec.cwd && ::chdir(plan.exec.cwd) < 0) fail(plan, Step::chdir, errno);
  if (plan.release_fd >= 0) {
    // Authorized launch: everything is in place but the exec. Say so, then wait for the
    // parent's one byte; anything else (EOF: denied, timed out, client gone) means never run.
    child::ChildError ready{static_cast<child::Step>(Step::ready), 0};
    if (::write(plan.exec.error_fd, &ready, sizeof ready) != static_cast<ssize_t>(sizeof ready)) ::_exit(126);
    char go = 0;
    ssize_t n;
    do {
      n = ::read(plan.release_fd, &go, 1);
    } while (n < 0 && errno == EINTR);
    if (n != 1 || go != 'g') ::_exit(126);
    ::close(plan.release_fd);
  }
  ::sigprocmask(SIG_SETMASK, &plan.exec.child_sigmask, nullptr);
  int err;
  if (plan.exec_fd >= 0) {
    ::syscall(SYS_execveat, plan.exec_fd, "", plan.exec.argv, plan.exec.envp, AT_EMPTY_PATH);
    err = errno;
  } else {
    err = child::exec_in_child(plan.exec.exec_paths, plan.exec.exec_path_count, plan.exec.argv, plan.exec.envp);
  }
  child::ChildError e{static_cast<child::Step>(Step::exec), err};
  [[maybe_unused]] auto n = ::write(plan.exec.error_fd, &e, sizeof e);
  ::_exit(127);
}

// The command's stack while it borrows init's memory (run_init), and its entry.
alignas(64) char command_stack[256 * 1024];
// run_init: the peak resident size the command inherits from init's memory (see there), and
// how far above it a peak still counts as init's (its own stack and setup after the note).
std::uint64_t g_inherited_rss_kb = 0;
constexpr std::uint64_t kInheritedRssSlackKb = 1024;
int command_main(void* plan) { run_command(*static_cast<SandboxPlan*>(plan)); }

// Closes every fd but the `n` in `keep` (unsorted, -1 entries ignored), without allocating.
void close_all_except(int* keep, std::size_t n) {
  for (std::size_t i = 1; i < n; ++i)  // insertion sort: a handful of entries
    for (std::size_t j = i; j > 0 && keep[j - 1] > keep[j]; --j) {
      int t = keep[j];
      keep[j] = keep[j - 1];
      keep[j - 1] = t;
    }
  unsigned next = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (keep[i] < 0 || static_cast<unsigned>(keep[i]) < next) continue;
    if (static_cast<unsigned>(keep[i]) > next) ::syscall(SYS_close_range, next, static_cast<unsigned>(keep[i]) - 1, 0U);
    next = static_cast<unsigned>(keep[i]) + 1;
  }
  ::syscall(SYS_close_range, next, ~0U, 0U);
}

[[noreturn]] void end_sandbox() {
  ::kill(-1, SIGKILL);  // from PID 1: every process of the namespace but us
  ::_exit(137);         // and PID 1's exit takes whatever is left with it
}

// PID 1: forward what the supervisor sends to everything in the namespace, reap every
// orphan, and when the command ends, end the rest and report. When the supervisor dies
// (EOF on the death pipe), end everything at once: nobody is left to own the sandbox.
[[noreturn]] void supervise(const SandboxPlan& plan, pid_t command, Broker* broker) {
  sigset_t all;
  sigfillset(&all);
  // Signals arrive on a signalfd, so that one poll() also watches the death pipe.
  const int sigfd = ::signalfd(-1, &all, SFD_CLOEXEC);
  if (sigfd < 0) end_sandbox();
  Report report{};
  bool have_status = false;
  for (;;) {
    // The signals, the death pipe and (confining modes) the connect broker, in one poll().
    struct pollfd fds[2 + kBrokerMaxPollFds] = {{sigfd, POLLIN, 0}, {plan.death_fd, POLLIN, 0}};
    std::size_t nfds = 2;
    if (broker) nfds += broker_poll_fds(*broker, fds + 2);
    if (::poll(fds, nfds, -1) < 0) continue;  // EINTR
    if (fds[1].revents) end_sandbox();  // EOF (or an error): the supervisor is gone
    if (broker) broker_on_poll(*broker, fds + 2, nfds - 2);
    if (!(fds[0].revents & POLLIN)) continue;
    struct signalfd_siginfo si {};
    if (::read(sigfd, &si, sizeof si) != static_cast<ssize_t>(sizeof si)) continue;
    const int sig = static_cast<int>(si.ssi_signo);
    if (sig != SIGCHLD) {
      ::kill(-1, sig);  // from PID 1: every process of the namespace but us
      continue;
    }
    for (;;) {
      int status = 0;
      pid_t p = ::waitpid(-1, &status, WNOHANG | __WALL);
      if (p <= 0) {
        if (p < 0 && errno == ECHILD && have_status) {
          struct rusage ru {};
          ::getrusage(RUSAGE_CHILDREN, &ru);
          report.user_cpu_us = static_cast<std::uint64_t>(ru.ru_utime.tv_sec) * 1'000'000 + ru.ru_utime.tv_usec;
          report.sys_cpu_us = static_cast<std::uint64_t>(ru.ru_stime.tv_sec) * 1'000'000 + ru.ru_stime.tv_usec;
          const auto peak = static_cast<std::uint64_t>(ru.ru_maxrss);
          report.max_rss_kb = peak > g_inherited_rss_kb + kInheritedRssSlackKb ? peak : 0;
          [[maybe_unused]] auto n = ::write(plan.report_fd, &report, sizeof report);
          ::_exit(0);
        }
        break;
      }
      if (p == command) {
        have_status = true;
        report.exited = WIFEXITED(status) ? 1 : 0;
        report.code = WIFEXITED(status) ? WEXITSTATUS(status) : 0;
        report.signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
        ::kill(-1, SIGKILL);  // what the command left behind dies with it
      }
    }
  }
}

// Into the groups init joins itself, then a cgroup namespace rooted there.
void join_cgroup(const SandboxPlan& plan) {
  // Into the groups we join ourselves ("0": this thread, the only one); the parent has had us
  // born in the other one, if any (runtime/cgroup.h CgroupJoin).
  for (std::size_t i = 0; i < plan.cgroup_join_count && i < 4; ++i) {
    if (::write(plan.cgroup_join_fds[i], "0", 1) != 1 && !plan.cgroup_join_optional) fail(plan, Step::cgroup_join, errno);
    ::close(plan.cgroup_join_fds[i]);
  }
  // We are in our cgroup (if any): a cgroup namespace rooted here makes
  // /proc/self/cgroup read "/" instead of the supervisor's and the host's cgroup paths.
  if (::unshare(CLONE_NEWCGROUP) < 0) fail(plan, Step::cgroup_ns, errno);
}

// init, from the command's descriptors on: rlimits, the broker, init's own Landlock domain,
// the command's fork, then PID 1 until the command ends.
[[noreturn]] void run_init(SandboxPlan& plan) {
  // Place stdin/stdout/stderr (the same two-phase move as the bare path).
  if (int err = child::place_fds_in_child(plan.exec.fds, plan.exec.fd_count, plan.exec.first_closed_fd))
    fail(plan, Step::fork, err);

  struct rlimit rl {};
  if (plan.limit_core && ::setrlimit(RLIMIT_CORE, &rl) < 0) fail(plan, Step::rlimits, errno);
  if (plan.fsize_limit) {
    rl.rlim_cur = rl.rlim_max = plan.fsize_limit;
    if (::setrlimit(RLIMIT_FSIZE, &rl) < 0) fail(plan, Step::rlimits, errno);
  }
  if (plan.cpu_limit_s) {
    rl.rlim_cur = plan.cpu_limit_s;
    rl.rlim_max = plan.cpu_limit_s + 1;
    if (::setrlimit(RLIMIT_CPU, &rl) < 0) fail(plan, Step::rlimits, errno);
  }
  // Counted for our uid in our own user namespace (Linux 5.14+): this sandbox's processes,
  // init included, whatever else runs as the same host uid.
  if (plan.nproc_limit) {
    rl.rlim_cur = rl.rlim_max = plan.nproc_limit;
    if (::setrlimit(RLIMIT_NPROC, &rl) < 0) fail(plan, Step::rlimits, errno);
  }

  int broker_sock[2] = {-1, -1};
  if (plan.broker.enabled) {
    if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, broker_sock) < 0) fail(plan, Step::broker, errno);
    plan.broker_fd = broker_sock[1];
  }
  // init's own Landlock domain, which the command's nests in: what init connects on the
  // command's behalf (abstract sockets, TCP) is scoped as the command itself would be.
  if (plan.init_landlock_fd >= 0) {
    int err = landlock_restrict(plan.init_landlock_fd);
    if (err) fail(plan, Step::landlock, err);
  }

  // The command borrows our memory while it sets itself up (CLONE_VM | CLONE_VFORK, on a stack
  // of its own): no copy of our address space (and none of its page faults), and we wait until
  // it has exec'd or failed. An authorized launch waits for its grant before exec, which we must
  // not sit out: that one gets a copy, by a raw clone (not glibc's fork(): no atfork handlers,
  // no malloc or stdio locks taken in a copy of a process that may have had other threads, nor
  // ASan's fork interceptor).
  // The command starts on a copy of our memory, and exec records the peak of the memory it
  // left as the command's own (ru_maxrss): a copy of the supervisor's, tens of MB. Noted here,
  // so that a peak no higher is reported as not measured rather than as the command's.
  {
    struct rusage self {};
    if (::getrusage(RUSAGE_SELF, &self) == 0) g_inherited_rss_kb = static_cast<std::uint64_t>(self.ru_maxrss);
  }
  pid_t command;
  if (plan.release_fd < 0) {
    command = ::clone(command_main, command_stack + sizeof command_stack, CLONE_VM | CLONE_VFORK | SIGCHLD, &plan);
  } else {
    command = static_cast<pid_t>(::syscall(SYS_clone, SIGCHLD, nullptr, nullptr, nullptr, 0UL));
    if (command == 0) run_command(plan);
  }
  if (command < 0) fail(plan, Step::fork, errno);

  int listener = -1;
  if (plan.broker.enabled) {
    ::close(broker_sock[1]);
    listener = receive_listener(broker_sock[0]);
  }
  // init keeps nothing but the report pipe, the death pipe and the broker's listener: the
  // command's pipes must reach EOF when its processes are gone, and the error pipe when it
  // has exec'd.
  {
    int keep[3] = {plan.report_fd, plan.death_fd, listener};
    close_all_except(keep, 3);
  }
  Broker broker;
  if (listener >= 0) {
    // The broker needs CAP_SYS_PTRACE over the sandbox's own user namespace (pidfd_getfd and
    // process_vm_readv on a command that made itself non-dumpable), and nothing else: no
    // capability may widen what a connect() on the command's behalf can reach.
    struct __user_cap_header_struct hdr {_LINUX_CAPABILITY_VERSION_3, 0};
    struct __user_cap_data_struct data[2] {};
    data[0].effective = data[0].permitted = 1U << CAP_SYS_PTRACE;
    if (::syscall(SYS_capset, &hdr, data) < 0) {
      // Without a broker the command's connect() calls fail (ENOSYS once the listener is closed).
      ::close(listener);
      listener = -1;
    } else {
      broker_start(broker, &plan.broker, listener);
    }
  }
  supervise(plan, command, listener >= 0 ? &broker : nullptr);
}

// "<n> <n> 1": an id mapped to itself.
std::size_t identity_map(char* buf, std::uint32_t id) {
  char digits[16];
  std::size_t n = 0;
  do {
    digits[n++] = static_cast<char>('0' + id % 10);
    id /= 10;
  } while (id);
  std::size_t len = 0;
  for (int copy = 0; copy < 2; ++copy) {
    for (std::size_t i = n; i > 0; --i) buf[len++] = digits[i - 1];
    buf[len++] = ' ';
  }
  buf[len++] = '1';
  return len;
}

void write_own(const SandboxPlan& plan, const char* path, const char* data, std::size_t len) {
  const int fd = ::open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) fail(plan, Step::own_ids, errno);
  if (::write(fd, data, len) != static_cast<ssize_t>(len)) fail(plan, Step::own_ids, errno);
  ::close(fd);
}

// A command's init in a prepared sandbox: a copy of the server, born (CLONE_PARENT) as the
// supervisor's own child in new user, PID, mount and IPC namespaces. It mounts its own /proc,
// maps its ids to the server's, joins its cgroup, waits for the supervisor's "go", and goes on
// as init does (run_init). docs/design.md "Prepared sandboxes".
[[noreturn]] void prepared_command_init(SandboxPlan& plan) {
  {
    int keep[6 + 4 + 16];
    std::size_t n = 0;
    for (int fd : {plan.sync_fd, plan.report_fd, plan.exec.error_fd, plan.landlock_fd, plan.death_fd, plan.init_landlock_fd})
      keep[n++] = fd;
    for (std::size_t i = 0; i < plan.cgroup_join_count && i < 4; ++i) keep[n++] = plan.cgroup_join_fds[i];
    for (std::size_t i = 0; i < plan.exec.fd_count && i < 16; ++i) keep[n++] = plan.exec.fds[i].source;
    close_all_except(keep, n);  // the server's control socket above all
  }
  // Who we are, for a supervisor that lost the server's reply (PreparedRequest).
  {
    const char hello = 'h';
    if (::send(plan.sync_fd, &hello, 1, MSG_NOSIGNAL) != 1) ::_exit(127);
  }
  if (plan.death_fd >= 0) {
    struct pollfd pfd {plan.death_fd, POLLIN, 0};
    if (::poll(&pfd, 1, 0) > 0) ::_exit(137);
  }
  // Our own /proc first: the view's host /proc is read-only, and our id maps are written
  // through /proc/self, whose files belong to global root while we are not dumpable. Nothing
  // but us runs in our namespaces yet.
  if (::prctl(PR_SET_DUMPABLE, 1, 0, 0, 0) < 0) fail(plan, Step::own_ids, errno);
  if (::mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) < 0) fail(plan, Step::mount_proc, errno);
  char map[48];
  write_own(plan, "/proc/self/setgroups", "deny", 4);
  write_own(plan, "/proc/self/uid_map", map, identity_map(map, plan.inside_uid));
  write_own(plan, "/proc/self/gid_map", map, identity_map(map, plan.inside_gid));
  if (::prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0) fail(plan, Step::own_ids, errno);
  join_cgroup(plan);
  int parent_fds[kMaxBinds];
  std::size_t parent_fd_count = 0;
  wait_for_parent(plan, parent_fds, parent_fd_count);
  for (std::size_t i = 0; i < parent_fd_count; ++i) ::close(parent_fds[i]);
  run_init(plan);
}

// One request: its strings mapped (the mappings go with our copy after the clone), the plan's
// per-command fields set, and the command's init cloned. `pidfd` gets that init's pidfd.
void serve_one(SandboxPlan& plan, const PreparedRequest& req, const int* fds, std::size_t n, PreparedReply& reply,
               int& pidfd) {
  const std::size_t fixed = 4 + req.join_count;
  reply = {req.seq, -1, EINVAL};
  if (req.magic != kPreparedMagic || req.join_count > 4 || req.fd_count > 16 || n != fixed + req.fd_count ||
      req.argc == 0 || req.argc > kPreparedMaxStrings || req.envc > kPreparedMaxStrings ||
      req.pathc > kPreparedMaxStrings || req.blob_size == 0 || req.blob_size > (std::uint64_t{1} << 31))
    return;
  const std::size_t size = static_cast<std::size_t>(req.blob_size);
  void* blob = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fds[0], 0);
  if (blob == MAP_FAILED) {
    reply.err = errno;
    return;
  }
  const std::size_t ptr_bytes = (req.argc + 1 + req.envc + 1 + req.pathc) * sizeof(char*);
  void* ptrs = ::mmap(nullptr, ptr_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (ptrs == MAP_FAILED) {
    reply.err = errno;
    ::munmap(blob, size);
    return;
  }
  char** argv = static_cast<char**>(ptrs);
  char** envp = argv + req.argc + 1;
  const char** paths = const_cast<const char**>(envp + req.envc + 1);
  char* p = static_cast<char*>(blob);
  char* const end = p + size;
  bool ok = true;
  auto next = [&]() -> char* {
    void* nul = ok ? std::memchr(p, 0, static_cast<std::size_t>(end - p)) : nullptr;
    if (!nul) {
      ok = false;
      return nullptr;
    }
    char* s = p;
    p = static_cast<char*>(nul) + 1;
    return s;
  };
  for (std::uint32_t i = 0; i < req.argc; ++i) argv[i] = next();
  argv[req.argc] = nullptr;
  for (std::uint32_t i = 0; i < req.envc; ++i) envp[i] = next();
  envp[req.envc] = nullptr;
  for (std::uint32_t i = 0; i < req.pathc; ++i) paths[i] = next();
  char* cwd = req.has_cwd ? next() : nullptr;
  if (ok) {
    static child::FdMove moves[16];
    for (std::uint32_t i = 0; i < req.fd_count; ++i) moves[i] = {fds[fixed + i], req.fd_targets[i]};
    plan.exec.argv = argv;
    plan.exec.envp = envp;
    plan.exec.exec_paths = paths;
    plan.exec.exec_path_count = req.pathc;
    plan.exec.cwd = cwd;
    plan.exec.fds = moves;
    plan.exec.fd_count = req.fd_count;
    plan.exec.first_closed_fd = req.first_closed_fd;
    sigemptyset(&plan.exec.child_sigmask);
    plan.sync_fd = fds[1];
    plan.exec.error_fd = fds[2];
    plan.report_fd = fds[3];
    for (std::uint32_t i = 0; i < req.join_count; ++i) plan.cgroup_join_fds[i] = fds[4 + i];
    plan.cgroup_join_count = req.join_count;
    plan.cgroup_join_optional = req.join_optional != 0;
    plan.fsize_limit = req.fsize_limit;
    plan.cpu_limit_s = req.cpu_limit_s;
    plan.nproc_limit = req.nproc_limit;
    plan.exec_fd = -1;
    plan.release_fd = -1;
    plan.new_net = false;
    // A raw clone, fork-like, as for the command (see run_init).
    const unsigned long flags =
        CLONE_PARENT | CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_PIDFD;
    const pid_t pid = static_cast<pid_t>(::syscall(SYS_clone, flags, nullptr, &pidfd, nullptr, 0UL));
    if (pid == 0) prepared_command_init(plan);
    if (pid < 0) {
      reply.err = errno;
      pidfd = -1;
    } else {
      reply = {req.seq, pid, 0};
    }
  }
  ::munmap(ptrs, ptr_bytes);
  ::munmap(blob, size);
}

// A prepared sandbox's server, once its view is built: ready (the error pipe's EOF), then one
// command per request until the supervisor closes the control socket or dies.
[[noreturn]] void serve_prepared(SandboxPlan& plan) {
  {
    int keep[4] = {plan.control_fd, plan.death_fd, plan.landlock_fd, plan.init_landlock_fd};
    close_all_except(keep, 4);  // the error pipe among them: EOF, ready
  }
  // Descriptors 0-2 stay taken, so that what a request brings never lands where a command's
  // stdin, stdout and stderr go (its init places those over these).
  for (int fd = 0; fd <= 2; ++fd)
    if (::fcntl(fd, F_GETFD) < 0 && ::open("/dev/null", O_RDWR) != fd) ::_exit(127);
  for (;;) {
    struct pollfd fds[2] = {{plan.control_fd, POLLIN, 0}, {plan.death_fd, POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0) continue;  // EINTR
    if (fds[1].revents) ::_exit(0);        // the supervisor is gone
    if (!fds[0].revents) continue;
    PreparedRequest req {};
    int rfds[kPreparedMaxFds];
    std::size_t n = 0;
    const ssize_t got = fd_passing::receive_message(plan.control_fd, &req, sizeof req, rfds, kPreparedMaxFds, &n);
    if (got == 0 || (got < 0 && errno != EINTR && errno != EAGAIN)) ::_exit(0);  // closed: torn down
    if (got < 0) continue;
    PreparedReply reply {req.seq, -1, EINVAL};
    int pidfd = -1;
    if (got == static_cast<ssize_t>(sizeof req)) serve_one(plan, req, rfds, n, reply, pidfd);
    for (std::size_t i = 0; i < n; ++i) ::close(rfds[i]);
    if (fd_passing::send_message(plan.control_fd, &reply, sizeof reply, &pidfd, pidfd >= 0 ? 1 : 0) != 0) ::_exit(0);
    if (pidfd >= 0) ::close(pidfd);
  }
}

}  // namespace

void register_command_line(int argc, char** argv) {
  if (argc < 1 || !argv || !argv[0]) return;
  // The kernel lays argv out back to back; anything else (a rewritten argv) is left alone.
  char* end = argv[0];
  for (int i = 0; i < argc; ++i) {
    if (!argv[i] || argv[i] != end) return;
    end += std::strlen(argv[i]) + 1;
  }
  g_cmdline = argv[0];
  g_cmdline_len = static_cast<std::size_t>(end - argv[0]);
}

int init_main(void* arg) {
  SandboxPlan& plan = *static_cast<SandboxPlan*>(arg);

  child::reset_signals_in_child();
  sigset_t all;
  sigfillset(&all);
  ::sigprocmask(SIG_SETMASK, &all, nullptr);  // init takes signals from a signalfd only
  // We are a copy of the supervisor, with every fd it had: keep only ours. Above all the write
  // end of the death pipe (which must stay the supervisor's alone), the supervisor's ends of
  // our own pipes (so that its death is an EOF here), and its instance lock.
  {
    // Also the bind trees the parent cloned from its descriptors and the worker program's
    // descriptor (runtime/host_path.h: what was checked is what is used).
    int keep[10 + 4 + 16 + kMaxBinds];
    std::size_t n = 0;
    for (int fd : {plan.sync_fd, plan.report_fd, plan.exec.error_fd, plan.landlock_fd, plan.release_fd, plan.death_fd,
                   plan.init_landlock_fd, plan.exec_fd, plan.control_fd})
      keep[n++] = fd;
    for (std::size_t i = 0; i < plan.cgroup_join_count && i < 4; ++i) keep[n++] = plan.cgroup_join_fds[i];
    for (std::size_t i = 0; i < plan.exec.fd_count && i < 16; ++i) keep[n++] = plan.exec.fds[i].source;
    for (std::size_t i = 0; i < plan.bind_count; ++i)
      if (plan.binds[i].tree_fd >= 0) keep[n++] = plan.binds[i].tree_fd;
    keep[n++] = plan.root_tree;
    close_all_except(keep, n);
  }
  // The supervisor may have died before we closed our copy of its death pipe's write end.
  if (plan.death_fd >= 0) {
    struct pollfd pfd {plan.death_fd, POLLIN, 0};
    if (::poll(&pfd, 1, 0) > 0) ::_exit(137);
  }
  // The marker every supervisor looks for to refuse peers inside any corral sandbox
  // (supervisor/peer.h): PID 1 of its namespace, named corral-init. Keep both.
  ::prctl(PR_SET_NAME, "corral-init", 0, 0, 0);
  blank_command_line();

  int parent_fds[kMaxBinds];
  std::size_t parent_fd_count = 0;
  wait_for_parent(plan, parent_fds, parent_fd_count);
  join_cgroup(plan);
  // init is a copy of the supervisor, memory and environment included: nothing in the sandbox
  // may read it (ptrace is also refused by seccomp, and the command holds no capability).
  // Only after the sync: a non-dumpable process's /proc/PID files belong to root, and a
  // non-root supervisor could no longer write our uid_map, gid_map and setgroups. Until
  // then nothing runs in the sandbox that could look.
  if (::prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0) fail(plan, Step::sync, errno);

  // Raw system calls for the credentials: glibc's wrappers would first try to signal every
  // other thread of the supervisor we were copied from (its setxid protocol), which are not
  // here. We are single-threaded; the kernel's calls change exactly us.
  if (plan.drop_groups && ::syscall(SYS_setgroups, 0, nullptr) < 0) fail(plan, Step::ids, errno);
  if (::sethostname("corral", 6) < 0) fail(plan, Step::hostname, errno);
  if (plan.new_net) bring_loopback_up(plan);
  Sources sources;
  if (plan.new_mount) {
    open_sources(plan, parent_fds, parent_fd_count, sources);
    enter_root_tree(plan);
  }
  if (::syscall(SYS_setresgid, plan.inside_gid, plan.inside_gid, plan.inside_gid) < 0) fail(plan, Step::ids, errno);
  if (::syscall(SYS_setresuid, plan.inside_uid, plan.inside_uid, plan.inside_uid) < 0) fail(plan, Step::ids, errno);
  if (plan.new_mount) build_mount_view(plan, sources);
  if (plan.prepared) serve_prepared(plan);
  run_init(plan);
}

}  // namespace corral::sandbox
