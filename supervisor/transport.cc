#include "supervisor/transport.h"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>

#include <asio/experimental/as_tuple.hpp>
#include <asio/post.hpp>
#include <asio/use_awaitable.hpp>
#include <asio/write.hpp>

#include "supervisor/frame_reader.h"

namespace corral::supervisor {

namespace {

constexpr auto use_tuple = asio::experimental::as_tuple(asio::use_awaitable);
// The writer hands the kernel up to this much per write: fewer syscalls under streaming.
constexpr std::size_t kWriteBatchBytes = 256 * 1024;
// Frames read while requests are paused, held in order (bytes: the queue bound).
constexpr std::size_t kMaxHeldFrames = 256;
// How often a reader that holds all it may checks whether the client is gone.
constexpr std::chrono::milliseconds kHangupPoll{200};

// The client shut its end (it closed or died), whatever it left unread in our socket: a
// reader that stopped reading would not see the EOF behind the frames.
bool peer_gone(int fd) {
  struct pollfd p {fd, POLLRDHUP, 0};
  return ::poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR));
}

}  // namespace

Transport::Transport(asio::io_context& io, asio::local::stream_protocol::socket socket, Owner& owner, Limits limits)
    : socket_(std::move(socket)), owner_(owner), limits_(limits), writer_wake_(io), reader_wake_(io), linger_(io) {
  writer_wake_.expires_at(std::chrono::steady_clock::time_point::max());
}

asio::awaitable<void> Transport::reader() {
  std::vector<std::uint8_t> payload;
  while (!closed_ && !flush_then_close_) {
    // Frames read while requests were paused go first, in order, once they may.
    drain_held();
    // Paused: requests wait, but the socket is still read, within bounds, so that a Cancel and
    // the client's going away are seen meanwhile. The bounds: the held frames (bytes, counted
    // before a frame is read, from its header; and a count), and the replies queued (frames
    // read while paused may answer at once: an unknown Cancel, a malformed frame). Past them,
    // only the client's going away is watched for.
    if (reading_paused()) {
      bool room = held_.size() < kMaxHeldFrames && queued_bytes_ <= limits_.max_queued &&
                  queue_.size() < kMaxHeldFrames;
      if (room) {
        co_await socket_.async_wait(asio::socket_base::wait_read, use_tuple);
        if (closed_ || flush_then_close_) break;
        if (!reading_paused()) continue;
        std::uint8_t header[proto::kHeaderBytes];
        const ssize_t n = ::recv(socket_.native_handle(), header, sizeof header, MSG_PEEK | MSG_DONTWAIT);
        if (n == static_cast<ssize_t>(sizeof header)) {
          const std::uint64_t length = proto::read_length(header);
          room = length <= limits_.max_frame ? held_bytes_ + length <= limits_.max_queued : true;  // too big: refused below
        } else if (n > 0) {
          room = false;  // a header still arriving: its length decides, so wait for it
        }
      }
      if (!room) {
        reader_wake_.expires_after(kHangupPoll);
        co_await reader_wake_.async_wait(use_tuple);
        if (!closed_ && !flush_then_close_ && reading_paused() && peer_gone(socket_.native_handle())) break;
        continue;
      }
    }
    const FrameRead in = co_await read_frame(socket_, limits_.max_frame, payload);
    if (in.end == FrameRead::End::closed) {
      if (in.unread) drop_unconfirmed();
      break;
    }
    unconfirmed_.clear();  // the client is still there and talking: what it was sent reached it
    if (in.end == FrameRead::End::oversized) {
      // The stream cannot be resynchronised without reading the payload: refuse and close.
      close_after(proto::make_error(0, proto::ErrorCode::frame_too_large,
                                    "frame of " + std::to_string(in.length) + " bytes is over the " +
                                        std::to_string(limits_.max_frame) + "-byte limit; closing the connection"));
      break;
    }
    if (in.end == FrameRead::End::malformed) {
      queue(proto::make_error(0, in.error.code, in.error.message));
      continue;
    }
    if (held_.empty() && !reading_paused()) {
      owner_.on_frame(*in.msg, payload);
      continue;
    }
    const std::uint64_t id = in.msg->request_id();
    if (in.msg->body_type() == proto::Body::Cancel) {
      // One for a request still held: it never starts. (Only a frame that starts a request:
      // an Authorization or a HostReply held for a running one carries its id too.)
      auto it = std::find_if(held_.begin(), held_.end(), [id](const Held& h) { return h.starts && h.request_id == id; });
      if (it != held_.end()) {
        held_bytes_ -= it->payload.size();
        held_.erase(it);
        queue(proto::make_error(id, proto::ErrorCode::cancelled, "cancelled before it started"));
      } else {
        owner_.on_frame(*in.msg, payload);  // one for a request that runs
      }
      continue;
    }
    held_bytes_ += payload.size();
    const proto::Body type = in.msg->body_type();
    const bool starts = type != proto::Body::Authorization && type != proto::Body::HostReply;
    held_.push_back({std::move(payload), id, starts});
    payload = {};
  }
}

asio::awaitable<void> Transport::writer() {
  std::vector<proto::Frame> batch;
  std::vector<std::function<void()>> dropped;  // for the batch's frames, if the write fails
  std::vector<asio::const_buffer> buffers;
  while (!closed_) {
    if (queue_.empty()) {
      if (flush_then_close_) break;
      co_await writer_wake_.async_wait(use_tuple);
      continue;
    }
    batch.clear();
    dropped.clear();
    buffers.clear();
    std::size_t bytes = 0;
    while (!queue_.empty() && (batch.empty() || bytes + queue_.front().frame.size() <= kWriteBatchBytes)) {
      bytes += queue_.front().frame.size();
      batch.push_back(std::move(queue_.front().frame));
      if (queue_.front().on_dropped) dropped.push_back(std::move(queue_.front().on_dropped));
      queue_.pop_front();
      buffers.emplace_back(asio::buffer(batch.back()));
    }
    auto [ec, n] = co_await asio::async_write(socket_, buffers, use_tuple);
    if (ec && !peer_unread_) {
      // A reader paused by back-pressure never saw the client go: the socket's pending error
      // says whether it left our earlier frames unread (ECONNRESET) or read them all (EPIPE).
      int err = 0;
      socklen_t len = sizeof err;
      if (::getsockopt(socket_.native_handle(), SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err == ECONNRESET)
        drop_unconfirmed();
    }
    if (ec || peer_unread_) {
      for (auto& f : dropped) f();  // never reached the client
    } else {
      for (auto& f : dropped) unconfirmed_.push_back(std::move(f));
    }
    if (closed_) break;
    queued_bytes_ -= bytes;
    update_pressure();
    room_made();
    if (!congested()) owner_.on_drained();
    if (ec) break;
  }
}

void Transport::drain_held() {
  while (!held_.empty() && !closed_ && !flush_then_close_ && !reading_paused()) {
    Held h = std::move(held_.front());
    held_.pop_front();
    held_bytes_ -= h.payload.size();
    owner_.on_frame(*proto::GetMessage(h.payload.data()), h.payload);
  }
}

void Transport::room_made() {
  if (reading_paused()) return;
  reader_wake_.cancel();
  // The reader may be in a read that waits for the client: held frames need not wait for it.
  // Posted, not run here: this runs inside a frame's own handling, which must finish first.
  if (held_.empty() || drain_posted_) return;
  drain_posted_ = true;
  asio::post(socket_.get_executor(), [this, alive = std::weak_ptr<char>(alive_)] {
    if (alive.expired()) return;
    drain_posted_ = false;
    drain_held();
  });
}

void Transport::drop_unconfirmed() {
  peer_unread_ = true;
  auto dropped = std::move(unconfirmed_);
  unconfirmed_.clear();
  for (auto& f : dropped) f();
}

void Transport::queue(proto::Frame frame, std::function<void()> on_dropped) {
  if (closed_) {
    if (on_dropped) on_dropped();
    return;
  }
  queued_bytes_ += frame.size();
  queue_.push_back({std::move(frame), std::move(on_dropped)});
  writer_wake_.cancel();
  update_pressure();
}

void Transport::close_after(proto::Frame last) {
  if (closed_ || flush_then_close_) return;
  queue(std::move(last));
  flush_then_close_ = true;
  reader_wake_.cancel();
  writer_wake_.cancel();
  // The reader may be blocked in a read: ending the read side ends it.
  std::error_code ignored;
  socket_.shutdown(asio::socket_base::shutdown_receive, ignored);
  linger_.expires_after(limits_.linger);
  linger_.async_wait([this, alive = std::weak_ptr<char>(alive_)](std::error_code ec) {
    if (!ec && !alive.expired()) close();
  });
}

void Transport::close() {
  if (closed_) return;
  closed_ = true;
  reader_wake_.cancel();
  writer_wake_.cancel();
  linger_.cancel();
  std::error_code ignored;
  socket_.shutdown(asio::socket_base::shutdown_both, ignored);
  socket_.close(ignored);
  auto dropped = std::move(queue_);
  queue_.clear();
  queued_bytes_ = 0;
  for (auto& p : dropped)
    if (p.on_dropped) p.on_dropped();
}

void Transport::reserve(std::uint64_t id, std::uint64_t bytes) {
  bytes = std::min<std::uint64_t>(bytes, limits_.max_queued);
  reserved_[id] += bytes;
  reserved_bytes_ += bytes;
}

void Transport::release(std::uint64_t id) {
  auto it = reserved_.find(id);
  if (it == reserved_.end()) return;
  reserved_bytes_ -= it->second;
  reserved_.erase(it);
  room_made();
}

void Transport::unhold(std::uint64_t bytes) {
  reserved_bytes_ -= bytes;
  room_made();
}

bool Transport::reading_paused() const {
  if (closed_) return false;
  if (queued_bytes_ + reserved_bytes_ > limits_.max_queued) return true;
  return owner_.holds_reading();
}

void Transport::update_pressure() {
  if (!over_ && queued_bytes_ > limits_.max_queued) {
    over_ = true;
    owner_.on_pressure(true);
  } else if (over_ && queued_bytes_ <= limits_.max_queued / 2) {
    over_ = false;
    owner_.on_pressure(false);
  }
}

}  // namespace corral::supervisor
