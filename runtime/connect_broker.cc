// The broker's code in the sandbox's init (see connect_broker.h). Austere like
// sandbox_child.cc: syscalls on fixed buffers only.
#include "runtime/connect_broker.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/netlink.h>
#include <linux/openat2.h>
#include <linux/rtnetlink.h>
#include <linux/seccomp.h>
#include <linux/sock_diag.h>
#include <linux/unix_diag.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace corral::sandbox {

namespace {

constexpr long kSysPidfdOpen = 434;   // Linux 5.3
constexpr long kSysPidfdGetfd = 438;  // Linux 5.6
constexpr unsigned kPidfdThread = O_EXCL;  // PIDFD_THREAD, Linux 6.9: a pidfd for a thread id

// The kernel refuses a socket address longer than sockaddr_storage (move_addr_to_kernel).
constexpr std::size_t kMaxAddr = sizeof(struct sockaddr_storage);

// Fixed buffers (init is a private copy of the supervisor's memory; nothing here is shared).
alignas(8) char g_diag[32 * 1024];
alignas(8) char g_dents[8 * 1024];
alignas(8) char g_fd_dents[8 * 1024];

// "prefix" + decimal n + "suffix" into out (size >= 64).
void format_path(char* out, const char* prefix, long n, const char* suffix) {
  std::size_t at = 0;
  for (const char* p = prefix; *p; ++p) out[at++] = *p;
  char digits[24];
  std::size_t k = 0;
  unsigned long v = n < 0 ? 0 : static_cast<unsigned long>(n);
  do {
    digits[k++] = static_cast<char>('0' + v % 10);
    v /= 10;
  } while (v);
  while (k) out[at++] = digits[--k];
  for (const char* p = suffix; *p; ++p) out[at++] = *p;
  out[at] = '\0';
}

bool notification_valid(int listener, std::uint64_t id) {
  __u64 v = id;
  return ::ioctl(listener, SECCOMP_IOCTL_NOTIF_ID_VALID, &v) == 0;
}

void answer(int listener, std::uint64_t id, int err) {
  struct seccomp_notif_resp resp {};
  resp.id = id;
  resp.val = 0;
  resp.error = err ? -err : 0;
  // ENOENT: the caller is gone or was interrupted by a signal; nothing to answer.
  [[maybe_unused]] int rc = ::ioctl(listener, SECCOMP_IOCTL_NOTIF_SEND, &resp);
}

// The sockfs inode of the socket bound to (dev, ino) and listening, in our network namespace;
// 0 if none (or the query failed: refusing is the safe side).
std::uint64_t listener_in_netns(std::uint64_t dev, std::uint64_t ino) {
  int s = ::socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
  if (s < 0) return 0;
  struct {
    struct nlmsghdr nlh;
    struct unix_diag_req req;
  } q {};
  q.nlh.nlmsg_len = sizeof q;
  q.nlh.nlmsg_type = SOCK_DIAG_BY_FAMILY;
  q.nlh.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
  q.req.sdiag_family = AF_UNIX;
  q.req.udiag_states = 1U << 10;  // TCP_LISTEN: only a listener accepts a connect()
  q.req.udiag_show = UDIAG_SHOW_VFS;
  struct sockaddr_nl kernel {};
  kernel.nl_family = AF_NETLINK;
  if (::sendto(s, &q, sizeof q, 0, reinterpret_cast<struct sockaddr*>(&kernel), sizeof kernel) != sizeof q) {
    ::close(s);
    return 0;
  }
  std::uint64_t found = 0;
  for (bool done = false; !done;) {
    ssize_t n;
    do {
      n = ::recv(s, g_diag, sizeof g_diag, 0);
    } while (n < 0 && errno == EINTR);
    if (n <= 0) break;
    for (auto* h = reinterpret_cast<struct nlmsghdr*>(g_diag); NLMSG_OK(h, static_cast<unsigned>(n));
         h = NLMSG_NEXT(h, n)) {
      if (h->nlmsg_type == NLMSG_DONE || h->nlmsg_type == NLMSG_ERROR) {
        done = true;
        break;
      }
      if (h->nlmsg_type != SOCK_DIAG_BY_FAMILY || h->nlmsg_len < NLMSG_LENGTH(sizeof(struct unix_diag_msg))) continue;
      auto* m = static_cast<struct unix_diag_msg*>(NLMSG_DATA(h));
      int attr_len = static_cast<int>(h->nlmsg_len - NLMSG_LENGTH(sizeof *m));
      for (auto* a = reinterpret_cast<struct rtattr*>(m + 1); RTA_OK(a, attr_len); a = RTA_NEXT(a, attr_len)) {
        if (a->rta_type != UNIX_DIAG_VFS || RTA_PAYLOAD(a) < sizeof(struct unix_diag_vfs)) continue;
        struct unix_diag_vfs vfs;
        std::memcpy(&vfs, RTA_DATA(a), sizeof vfs);
        if (vfs.udiag_vfs_ino == ino && vfs.udiag_vfs_dev == dev) found = m->udiag_ino;
      }
    }
  }
  ::close(s);
  return found;
}

bool is_number(const char* s) {
  if (!*s) return false;
  for (; *s; ++s)
    if (*s < '0' || *s > '9') return false;
  return true;
}

// Calls `fn` with the name of each numeric entry of directory `dir` (pids in /proc, fds in
// /proc/PID/fd), read with getdents64 into `buf`; stops at the first call that returns true,
// and returns whether one did.
template <std::size_t N, class Fn>
bool any_numeric_entry(int dir, char (&buf)[N], Fn&& fn) {
  for (;;) {
    long n = ::syscall(SYS_getdents64, dir, buf, N);
    if (n <= 0) return false;
    for (long off = 0; off < n;) {
      auto* d = reinterpret_cast<struct dirent64*>(buf + off);
      off += d->d_reclen;
      if (is_number(d->d_name) && fn(d->d_name)) return true;
    }
  }
}

// Whether a process of our PID namespace (our /proc) holds socket `sock_ino` open.
bool held_in_sandbox(std::uint64_t sock_ino) {
  char want[64];
  format_path(want, "socket:[", static_cast<long>(sock_ino), "]");
  const std::size_t want_len = std::strlen(want);
  int proc = ::open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (proc < 0) return false;
  const bool held = any_numeric_entry(proc, g_dents, [&](const char* pid) {
    char fd_dir[64];
    const std::size_t name_len = std::strlen(pid);
    if (name_len > 40) return false;
    std::memcpy(fd_dir, pid, name_len);
    std::memcpy(fd_dir + name_len, "/fd", 4);
    int fds = ::openat(proc, fd_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fds < 0) return false;
    const bool found = any_numeric_entry(fds, g_fd_dents, [&](const char* fd) {
      char target[64];
      ssize_t len = ::readlinkat(fds, fd, target, sizeof target);
      return len == static_cast<ssize_t>(want_len) && std::memcmp(target, want, want_len) == 0;
    });
    ::close(fds);
    return found;
  });
  ::close(proc);
  return held;
}

bool allowed_socket(const BrokerPlan& plan, const struct stat& st) {
  for (std::size_t i = 0; i < plan.allowed_count; ++i)
    if (plan.allowed[i].dev == st.st_dev && plan.allowed[i].ino == st.st_ino) return true;
  // unix_diag reports the superblock's s_dev as the kernel keeps it (MKDEV: major << 20 |
  // minor), not stat's encoding.
  const std::uint64_t kdev = (static_cast<std::uint64_t>(major(st.st_dev)) << 20) | minor(st.st_dev);
  const std::uint64_t sock = listener_in_netns(kdev, st.st_ino);
  if (sock == 0) return false;
  return plan.scope_by_netns || held_in_sandbox(sock);
}

void add_pending(Broker& b, int fd, std::uint64_t id) {
  for (auto& p : b.pending) {
    if (p.fd < 0) {
      p.fd = fd;
      p.id = id;
      return;
    }
  }
  // More blocking connects in flight than we track: the caller gets EAGAIN, as a full
  // listen queue would give it (the connect itself goes on in the background).
  ::close(fd);
  answer(b.listener, id, EAGAIN);
}

// connect(sock, addr) on the caller's behalf, without blocking init: a blocking socket is made
// non-blocking for the call (its file description is the caller's), and an EINPROGRESS is
// answered later. Takes ownership of `sock`.
void connect_for(Broker& b, std::uint64_t id, int sock, const struct sockaddr* addr, socklen_t len) {
  const int flags = ::fcntl(sock, F_GETFL);
  const bool blocking = flags >= 0 && !(flags & O_NONBLOCK);
  if (blocking) ::fcntl(sock, F_SETFL, flags | O_NONBLOCK);
  int rc = ::connect(sock, addr, len);
  const int err = rc == 0 ? 0 : errno;
  if (blocking) ::fcntl(sock, F_SETFL, flags);
  if (err == EINPROGRESS && blocking) {
    add_pending(b, sock, id);
    return;
  }
  ::close(sock);
  answer(b.listener, id, err);
}

// One connect(fd, addr, len) from the command.
void handle(Broker& b, const struct seccomp_notif& req) {
  const std::uint64_t id = req.id;
  if (req.data.nr != __NR_connect) return answer(b.listener, id, ENOSYS);
  const int fd = static_cast<int>(req.data.args[0]);
  const std::uint64_t user_addr = req.data.args[1];
  const int addr_len = static_cast<int>(req.data.args[2]);
  if (addr_len < 0 || static_cast<std::size_t>(addr_len) > kMaxAddr) return answer(b.listener, id, EINVAL);

  // One copy of the address: everything below uses it, never the caller's memory again.
  alignas(struct sockaddr_un) char addr[kMaxAddr + 1] = {};
  if (addr_len > 0) {
    struct iovec local {addr, static_cast<std::size_t>(addr_len)};
    struct iovec remote {reinterpret_cast<void*>(user_addr), static_cast<std::size_t>(addr_len)};
    if (::process_vm_readv(static_cast<pid_t>(req.pid), &local, 1, &remote, 1, 0) != addr_len) {
      if (notification_valid(b.listener, id)) answer(b.listener, id, EFAULT);
      return;
    }
  }
  int pidfd = static_cast<int>(::syscall(kSysPidfdOpen, static_cast<pid_t>(req.pid), kPidfdThread));
  if (pidfd < 0) return;  // the caller is gone
  const bool is_path = addr_len > static_cast<int>(offsetof(struct sockaddr_un, sun_path)) &&
                       reinterpret_cast<struct sockaddr*>(addr)->sa_family == AF_UNIX &&
                       addr[offsetof(struct sockaddr_un, sun_path)] != '\0';
  int cwd = -1;
  if (is_path && addr[offsetof(struct sockaddr_un, sun_path)] != '/') {
    char path[64];
    format_path(path, "/proc/", static_cast<long>(req.pid), "/cwd");
    cwd = ::open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
  }
  const int sock = static_cast<int>(::syscall(kSysPidfdGetfd, pidfd, fd, 0));
  const int getfd_errno = errno;
  ::close(pidfd);
  // Still pending: the pid we read from, opened and took the socket from is the caller's.
  if (!notification_valid(b.listener, id)) {
    if (sock >= 0) ::close(sock);
    if (cwd >= 0) ::close(cwd);
    return;
  }
  if (sock < 0) {
    if (cwd >= 0) ::close(cwd);
    return answer(b.listener, id, getfd_errno == EBADF ? EBADF : getfd_errno);
  }
  int domain = 0;
  socklen_t dlen = sizeof domain;
  if (::getsockopt(sock, SOL_SOCKET, SO_DOMAIN, &domain, &dlen) < 0) {
    const int err = errno;
    ::close(sock);
    if (cwd >= 0) ::close(cwd);
    return answer(b.listener, id, err);
  }
  if (domain != AF_UNIX || !is_path) {
    if (cwd >= 0) ::close(cwd);
    return connect_for(b, id, sock, reinterpret_cast<struct sockaddr*>(addr), static_cast<socklen_t>(addr_len));
  }

  // A pathname: the string ends at the first NUL within the address (the kernel's rule).
  char* path = addr + offsetof(struct sockaddr_un, sun_path);
  addr[addr_len] = '\0';
  if (path[0] != '/' && cwd < 0) {
    ::close(sock);
    return answer(b.listener, id, ENOENT);
  }
  struct open_how how {};
  how.flags = O_PATH | O_CLOEXEC;
  how.resolve = RESOLVE_NO_MAGICLINKS;
  int target = static_cast<int>(::syscall(SYS_openat2, path[0] == '/' ? AT_FDCWD : cwd, path, &how, sizeof how));
  const int open_errno = errno;
  if (cwd >= 0) ::close(cwd);
  if (target < 0) {
    ::close(sock);
    return answer(b.listener, id, open_errno);
  }
  struct stat st {};
  int err = 0;
  if (::fstat(target, &st) < 0) err = errno;
  else if (!S_ISSOCK(st.st_mode)) err = ECONNREFUSED;  // what connect() says for a non-socket
  else if (!allowed_socket(*b.plan, st)) err = EACCES;
  if (err) {
    ::close(target);
    ::close(sock);
    return answer(b.listener, id, err);
  }
  struct sockaddr_un via {};
  via.sun_family = AF_UNIX;
  format_path(via.sun_path, "/proc/self/fd/", target, "");
  connect_for(b, id, sock, reinterpret_cast<struct sockaddr*>(&via), sizeof via);
  ::close(target);
}

void on_listener_ready(Broker& b) {
  struct seccomp_notif req;
  std::memset(&req, 0, sizeof req);  // the kernel insists
  if (::ioctl(b.listener, SECCOMP_IOCTL_NOTIF_RECV, &req) < 0) return;  // ENOENT: the caller left
  handle(b, req);
}

void on_pending_ready(Broker& b, Broker::Pending& p) {
  int err = 0;
  socklen_t len = sizeof err;
  if (::getsockopt(p.fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0) err = errno;
  ::close(p.fd);
  p.fd = -1;
  answer(b.listener, p.id, err);
}

}  // namespace

void broker_start(Broker& b, const BrokerPlan* plan, int listener) {
  b.plan = plan;
  b.listener = listener;
  for (auto& p : b.pending) p.fd = -1;
}

std::size_t broker_poll_fds(const Broker& b, struct pollfd* out) {
  std::size_t n = 0;
  // A closed listener stays in the list as -1 (poll ignores it), so the order is fixed.
  out[n++] = {b.listener, POLLIN, 0};
  for (const auto& p : b.pending) out[n++] = {p.fd, POLLOUT, 0};
  return n;
}

void broker_on_poll(Broker& b, const struct pollfd* fds, std::size_t n) {
  if (n == 0) return;
  if (b.listener >= 0 && fds[0].fd == b.listener && fds[0].revents) {
    if (fds[0].revents & POLLIN) {
      on_listener_ready(b);
    } else if (fds[0].revents & (POLLHUP | POLLERR | POLLNVAL)) {
      ::close(b.listener);  // no task uses the filter any more
      b.listener = -1;
    }
  }
  for (std::size_t k = 1; k < n && k - 1 < Broker::kMaxPending; ++k) {
    Broker::Pending& p = b.pending[k - 1];
    // The slot may have been reused by on_listener_ready above: only the fd polled counts.
    if (fds[k].revents && p.fd >= 0 && p.fd == fds[k].fd) on_pending_ready(b, p);
  }
}

}  // namespace corral::sandbox
