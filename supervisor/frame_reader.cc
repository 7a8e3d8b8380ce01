#include "supervisor/frame_reader.h"

#include <algorithm>
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
}  // namespace

asio::awaitable<FrameRead> read_frame(asio::local::stream_protocol::socket& socket, std::uint32_t max_frame,
                                      std::vector<std::uint8_t>& payload) {
  FrameRead out;
  // A read that failed ends the stream; ECONNRESET says the peer left with our frames unread.
  auto ended = [&out](const std::error_code& ec) {
    out.unread = ec == asio::error::connection_reset;
    return out;
  };
  if (payload.capacity() > kKeptReadBuffer) payload = {};
  std::array<std::uint8_t, proto::kHeaderBytes> header;
  auto [ec, n] = co_await asio::async_read(socket, asio::buffer(header), use_tuple);
  if (ec) co_return ended(ec);
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
    auto [ec2, n2] = co_await asio::async_read(socket, asio::buffer(payload.data() + got, step), use_tuple);
    if (ec2) co_return ended(ec2);
    got += n2;
  }
  out.msg = proto::verify_payload(payload, max_frame, out.error);
  out.end = out.msg ? FrameRead::End::frame : FrameRead::End::malformed;
  co_return out;
}

}  // namespace corral::supervisor
