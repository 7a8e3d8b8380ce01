#include "supervisor/frame_reader.h"

#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <array>
#include <asio/experimental/as_tuple.hpp>
#include <asio/read.hpp>
#include <asio/use_awaitable.hpp>

namespace corral::supervisor {

namespace {
constexpr auto use_tuple = asio::experimental::as_tuple(asio::use_awaitable);
// A buffer grown by one large frame is not kept for a connection's life.
constexpr std::size_t kKeptReadBuffer = 1 << 20;
// A frame's payload is read in steps from this size up (see read_frame).
constexpr std::size_t kFirstReadStep = 64 << 10;

// asio::async_read's contract (all of `buffer`, or an error), by recvmsg: descriptors that
// come with the bytes are kept in `fds` (kMaxFrameFds at most; the kernel closes any that do
// not fit the control buffer, and this closes any beyond the limit).
asio::awaitable<std::error_code> read_with_fds(asio::local::stream_protocol::socket& socket, asio::mutable_buffer buffer,
                                               std::vector<UniqueFd>& fds) {
  auto* data = static_cast<std::uint8_t*>(buffer.data());
  std::size_t done = 0;
  while (done < buffer.size()) {
    alignas(struct cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxFrameFds)];
    struct iovec iov {data + done, buffer.size() - done};
    struct msghdr msg {};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    const ssize_t n = ::recvmsg(socket.native_handle(), &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      auto [ec] = co_await socket.async_wait(asio::socket_base::wait_read, use_tuple);
      if (ec) co_return ec;
      continue;
    }
    if (n < 0) co_return std::error_code(errno, asio::error::get_system_category());
    for (struct cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
      if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
      const std::size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      for (std::size_t i = 0; i < k; ++i) {
        int fd;
        std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
        UniqueFd owned(fd);
        if (fds.size() < kMaxFrameFds) fds.push_back(std::move(owned));
      }
    }
    if (n == 0) co_return asio::error::eof;
    done += static_cast<std::size_t>(n);
  }
  co_return std::error_code();
}

}  // namespace

asio::awaitable<FrameRead> read_frame(asio::local::stream_protocol::socket& socket, std::uint32_t max_frame,
                                      std::vector<std::uint8_t>& payload, std::vector<UniqueFd>* fds) {
  FrameRead out;
  auto read = [&socket, fds](asio::mutable_buffer buffer) -> asio::awaitable<std::error_code> {
    if (fds) co_return co_await read_with_fds(socket, buffer, *fds);
    auto [ec, n] = co_await asio::async_read(socket, buffer, use_tuple);
    co_return ec;
  };
  // A read that failed ends the stream; ECONNRESET says the peer left with our frames unread.
  auto ended = [&out](const std::error_code& ec) {
    out.unread = ec == asio::error::connection_reset;
    return out;
  };
  if (payload.capacity() > kKeptReadBuffer) payload = {};
  std::array<std::uint8_t, proto::kHeaderBytes> header;
  if (auto ec = co_await read(asio::buffer(header))) co_return ended(ec);
  out.length = proto::read_length(header.data());
  if (out.length > max_frame) {
    out.end = FrameRead::End::oversized;
    co_return out;
  }
  // The buffer grows with what arrives, at most doubling what came so far: a header alone
  // (4 bytes claiming 16 MiB) commits nothing, and a peer holds at most about twice what it sent.
  payload.clear();
  std::size_t got = 0;
  while (got < out.length) {
    const std::size_t step = std::min<std::size_t>(out.length - got, std::max(kFirstReadStep, got));
    payload.resize(got + step);
    if (auto ec = co_await read(asio::buffer(payload.data() + got, step))) co_return ended(ec);
    got += step;
  }
  out.msg = proto::verify_payload(payload, max_frame, out.error);
  out.end = out.msg ? FrameRead::End::frame : FrameRead::End::malformed;
  co_return out;
}

}  // namespace corral::supervisor
