// Descriptors passed over a Unix socket (SCM_RIGHTS), with one marker byte per message (the
// parent's "go" with its detached mounts, the command's seccomp listener to init, the
// seccomp-notify probe) or a fixed struct (a prepared sandbox's requests and replies). Header-only and `static`: init and the command use these between
// clone and exec, which is uninstrumented and allocates nothing, so every translation unit
// keeps its own copy (no sanitized copy is ever linked in there).
#pragma once

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstring>

namespace corral::fd_passing {

// The most descriptors one message carries (a bind per mount: sandbox_plan.h kMaxBinds).
inline constexpr std::size_t kMaxFds = 64;

// Sends `len` bytes of `data` as one message with `count` descriptors (none: plain bytes).
// 0, or the errno.
static inline int send_message(int sock, const void* data, std::size_t len, const int* fds, std::size_t count) {
  if (count > kMaxFds) return EINVAL;
  struct iovec iov {const_cast<void*>(data), len};
  alignas(struct cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxFds)] = {};
  struct msghdr msg {};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  if (count > 0) {
    msg.msg_control = control;
    msg.msg_controllen = CMSG_SPACE(sizeof(int) * count);
    struct cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * count);
    std::memcpy(CMSG_DATA(c), fds, sizeof(int) * count);
  }
  ssize_t n;
  do {
    n = ::sendmsg(sock, &msg, MSG_NOSIGNAL);
  } while (n < 0 && errno == EINTR);
  return n == static_cast<ssize_t>(len) ? 0 : n < 0 ? errno : EPIPE;
}

// Sends `byte` with `count` descriptors (none: a plain byte). 0, or the errno.
static inline int send_fds(int sock, char byte, const int* fds, std::size_t count) {
  return send_message(sock, &byte, 1, fds, count);
}

// Receives one message of at most `len` bytes into `data`, up to `max` descriptors
// (close-on-exec) into `fds` (any beyond `max` are closed), their number into `*count`.
// Returns what recvmsg did: the length, 0 at EOF, -1 (errno set).
static inline ssize_t receive_message(int sock, void* data, std::size_t len, int* fds, std::size_t max,
                                      std::size_t* count) {
  *count = 0;
  struct iovec iov {data, len};
  alignas(struct cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxFds)];
  struct msghdr msg {};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  ssize_t n;
  do {
    n = ::recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
  } while (n < 0 && errno == EINTR);
  if (n <= 0) return n;
  for (struct cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    const std::size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    const int* got = reinterpret_cast<const int*>(CMSG_DATA(c));
    for (std::size_t i = 0; i < k; ++i) {
      int fd;
      std::memcpy(&fd, got + i, sizeof fd);
      if (*count < max) fds[(*count)++] = fd;
      else ::close(fd);
    }
  }
  return n;
}

// Receives one message: its byte into `*byte`, up to `max` descriptors (close-on-exec) into
// `fds`, their number into `*count`. Returns what recvmsg did: 1, 0 at EOF, -1 (errno set).
static inline ssize_t receive_fds(int sock, char* byte, int* fds, std::size_t max, std::size_t* count) {
  return receive_message(sock, byte, 1, fds, max, count);
}

}  // namespace corral::fd_passing
