// Transport: one client's socket, the coroutine that reads its frames, the one that writes
// its replies, and the bounded queue between them (docs/design.md "Back-pressure"). It knows
// frames, not requests: a verified frame goes to its Owner, which also says when reading must
// wait for something besides the queue.
//
// The bound: replies are queued without limit from the supervisor's side, but past
// `max_queued` bytes the Owner is told to stop feeding (its commands' pipes then fill), until
// the queue drains to half. The client's requests stop being read while the queued bytes plus
// the bytes promised to requests already admitted (reserve(), each at most `max_queued`) are
// over `max_queued`; frames that arrive meanwhile are still read and held, up to a bound, so
// that a Cancel is acted on and a client that goes away is seen (then everything it started
// ends with it), and past the bound the socket is checked for the client's going away.
//
// Lifetime: the Owner holds the Transport and keeps itself alive while reader() and writer()
// run (their completion handlers hold it); nothing here outlives the Owner.
#pragma once

#include <asio/awaitable.hpp>
#include <asio/io_context.hpp>
#include <asio/local/stream_protocol.hpp>
#include <asio/steady_timer.hpp>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <vector>

#include "worker_proto/codec.h"
#include "worker_proto/messages.h"

namespace corral::supervisor {

class Transport {
 public:
  struct Owner {
    virtual ~Owner() = default;
    // A verified frame; `payload` holds the bytes `msg` points into.
    virtual void on_frame(const proto::Message& msg, const std::vector<std::uint8_t>& payload) = 0;
    // True while requests must not be read for a reason of the Owner's own.
    virtual bool holds_reading() const = 0;
    // The queue went over its bound (true) or drained to half of it (false).
    virtual void on_pressure(bool over) = 0;
    // A write completed and the queue is within its bound: whoever waits for room may go on.
    virtual void on_drained() = 0;
  };

  struct Limits {
    std::uint32_t max_frame;
    std::uint64_t max_queued;
    std::chrono::milliseconds linger;  // how long a closing client gets to read its last frame
  };

  Transport(asio::io_context& io, asio::local::stream_protocol::socket socket, Owner& owner, Limits limits);

  // Until the peer closes, a read fails, or a fatal frame is queued (close_after).
  asio::awaitable<void> reader();
  // Until close(), a write fails, or the last frame after close_after() is written.
  asio::awaitable<void> writer();

  // Queues a frame. `on_dropped` runs if the frame may never have reached the client: the
  // transport closed before it was handed to the kernel, or the client closed its end with
  // data of ours unread (this frame or a later one) and had sent no frame since this one was
  // written (a background start whose id never arrived). docs/protocol.md states the rule.
  void queue(proto::Frame frame, std::function<void()> on_dropped = {});
  // Queues `last`, reads nothing more, and closes once it is written (or after the linger, for
  // a client that does not read).
  void close_after(proto::Frame last);
  // Shuts the socket and drops what is queued. Idempotent.
  void close();

  // Room promised to a request's reply, from its admission until its reply is queued (it then
  // counts as queued). At most max_queued per request.
  void reserve(std::uint64_t id, std::uint64_t bytes);
  void release(std::uint64_t id);
  // The same, by amount, for a holder that keeps its own count (a queued file request: ids may
  // repeat there, and one release must not free another's room).
  void hold(std::uint64_t bytes) { reserved_bytes_ += bytes; }
  void unhold(std::uint64_t bytes);

  bool closed() const { return closed_; }
  bool closing() const { return flush_then_close_; }
  // Over max_queued: whatever feeds the queue should wait for on_drained().
  bool congested() const { return closed_ || queued_bytes_ > limits_.max_queued; }
  bool reading_paused() const;
  // Reading may resume (the Owner's own reason went away).
  void wake_reader() { room_made(); }

 private:
  void update_pressure();
  // Hands held frames to the Owner, in order, while requests may be read.
  void drain_held();
  // Reading may have become allowed: wakes the reader, and drains held frames (posted).
  void room_made();
  // The client left with frames of ours unread: what was written since it last sent a frame
  // never reached it (unconfirmed_), nor will anything written from now on.
  void drop_unconfirmed();

  asio::local::stream_protocol::socket socket_;
  Owner& owner_;
  const Limits limits_;
  asio::steady_timer writer_wake_;
  asio::steady_timer reader_wake_;
  asio::steady_timer linger_;
  struct Pending {
    proto::Frame frame;
    std::function<void()> on_dropped;
  };
  std::deque<Pending> queue_;
  // Frames read while requests were paused (reading_paused()), dispatched in order once they
  // may be; a Cancel is acted on at once (a held request it names is dropped, answered
  // "cancelled"). Bounded by max_queued bytes and a count; past them nothing more is read.
  struct Held {
    std::vector<std::uint8_t> payload;
    std::uint64_t request_id;
    bool starts;  // starts a request (not an answer for a running one: Authorization, HostReply)
  };
  std::deque<Held> held_;
  std::uint64_t held_bytes_ = 0;
  bool drain_posted_ = false;
  // on_dropped of frames written since the client last sent a frame: run if it then closes
  // with data of ours unread (peer_unread_), forgotten when it sends again.
  std::vector<std::function<void()>> unconfirmed_;
  bool peer_unread_ = false;
  std::uint64_t queued_bytes_ = 0;
  std::map<std::uint64_t, std::uint64_t> reserved_;  // by request id
  std::uint64_t reserved_bytes_ = 0;
  bool closed_ = false;
  bool flush_then_close_ = false;
  bool over_ = false;  // on_pressure(true) was said last
  // Held weakly by the linger timer's handler: a timer that already expired is not stopped by
  // cancel(), and its handler may run after this transport is gone.
  std::shared_ptr<char> alive_ = std::make_shared<char>();
};

}  // namespace corral::supervisor
