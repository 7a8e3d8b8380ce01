// Connection: one client of the supervisor. A reader coroutine verifies and dispatches
// frames; a writer coroutine drains a queue of reply frames; both own the socket. The
// connection's implicit scope owns everything it started: when the client goes away every
// command is terminated, reaped, and the scope's temp dir removed.
//
// Back-pressure: output chunks are queued for the client; past `max_queued` bytes every
// command of this connection stops being read (its pipe fills, the command blocks) until
// the queue drains to half. The client's own requests stop being read while the queued
// bytes plus the replies already promised (each admitted request reserves its largest
// reply, at most `max_queued`) are over `max_queued`, and while a worker this client
// evaluates on cannot take more of its host replies. A client that has not said hello
// within the hello deadline is disconnected.
#pragma once

#include <sys/types.h>

#include <asio/io_context.hpp>
#include <asio/local/stream_protocol.hpp>
#include <asio/steady_timer.hpp>
#include <asio/awaitable.hpp>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>

#include "runtime/execution.h"
#include "supervisor/context.h"
#include "supervisor/peer.h"
#include "supervisor/scope.h"
#include "worker_proto/codec.h"
#include "worker_proto/messages.h"

namespace corral::supervisor {

class Worker;

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(asio::io_context& io, asio::local::stream_protocol::socket socket, Peer peer, Context& ctx);
  ~Connection();

  void start();
  // Terminates every command and closes the socket. Idempotent.
  void close();

  // True while this client's outgoing queue is over --max-queued: whatever feeds it (a
  // worker relaying host calls) should stop until wake_feeders() calls it back.
  bool congested() const { return closed_ || queued_bytes_ > ctx_.options.max_queued; }
  // Called by a worker whose inbound queue drained: this client's requests may be read again.
  void wake_reader() { reader_wake_.cancel(); }

 private:
  asio::awaitable<void> reader();
  asio::awaitable<void> writer();
  // `payload` is the frame `msg` was verified in (a request served off the loop keeps a copy).
  void dispatch(const proto::Message& msg, const std::vector<std::uint8_t>& payload);
  void on_hello(const proto::Message& msg);
  void on_exec(const proto::Message& msg);
  void on_cancel(const proto::Message& msg);
  void on_status(const proto::Message& msg);
  void on_file(const proto::Message& msg, const std::vector<std::uint8_t>& payload);
  // Runs the next waiting file request on the blocking pool, if none of ours is running.
  void next_file_job();
  void on_scope_create(const proto::Message& msg);
  void on_scope_close(const proto::Message& msg);
  void on_scope_list(const proto::Message& msg);
  void on_poll(const proto::Message& msg);
  void on_background_stop(const proto::Message& msg);
  void on_authorization(const proto::Message& msg);
  void on_worker_start(const proto::Message& msg);
  void on_worker_eval(const proto::Message& msg);
  void on_host_reply(const proto::Message& msg);
  void on_worker_stop(const proto::Message& msg);
  void on_worker_list(const proto::Message& msg);
  void on_worker_logs(const proto::Message& msg);
  // The worker a request names (its scope: named, else the peer uid's default); sends the
  // Error and returns null if there is none this peer may use.
  std::shared_ptr<Worker> find_worker(std::uint64_t id, const flatbuffers::String* scope, const flatbuffers::String* name);
  void on_exec_done(std::uint64_t id, const ExecSpec& spec, Result result);
  // The audit line of one launch. Static: a background command's line is written after its
  // connection may be long gone.
  static void log_launch(const Peer& peer, std::uint64_t id, const ExecSpec& spec, const Result& result);
  void release_slot();
  // Queues a frame for the client. `on_dropped` runs if the connection closes before the
  // frame was handed to the kernel (a background start whose id never left).
  void queue(proto::Frame frame, std::function<void()> on_dropped = {});
  // The scope a request names (empty: `fallback`), if this peer may act on it; else sends the
  // Error for `id` and returns null.
  // The engine's spec for `req` in `scope` (defaults, limits, the host's layers, the temp
  // dir), or nullopt after sending the Error for `id`.
  std::optional<ExecSpec> prepare_spec(std::uint64_t id, const proto::ExecRequest& req, Scope& scope, const char* cgroup_prefix);
  std::shared_ptr<Scope> scope_for(std::uint64_t id, const flatbuffers::String* name, const std::shared_ptr<Scope>& fallback);
  void send_error(std::uint64_t id, proto::ErrorCode code, std::string_view message);
  // Queues `last`, reads nothing more, and closes once it is written (or after the hello
  // timeout, for a client that does not read).
  void close_after(proto::Frame last);
  void update_backpressure();
  // The replies promised to admitted requests: reserved when admitted, released when the
  // reply is queued (it then counts as queued).
  void reserve(std::uint64_t id, std::uint64_t bytes);
  void release(std::uint64_t id);
  // True while the reader must not take another request (see the header comment).
  bool reading_paused() const;
  std::vector<proto::LayerInfo> layer_infos() const;

  asio::io_context& io_;
  asio::local::stream_protocol::socket socket_;
  Peer peer_;
  Context& ctx_;
  std::shared_ptr<Scope> scope_;                  // the implicit scope
  std::vector<std::weak_ptr<Scope>> owned_scopes_;  // named, not detached: closed with us
  asio::steady_timer writer_wake_;
  asio::steady_timer reader_wake_;    // cancelled when reading may resume
  asio::steady_timer hello_deadline_;
  std::map<std::uint64_t, std::uint64_t> reserved_;  // by request id: bytes promised
  std::uint64_t reserved_bytes_ = 0;
  struct Pending {
    proto::Frame frame;
    std::function<void()> on_dropped;
  };
  std::deque<Pending> queue_;
  std::uint64_t queued_bytes_ = 0;
  std::map<std::uint64_t, Execution> running_;
  // File requests, served one at a time per connection (in the order they came, so that a
  // write and a later read of the same file keep their order) on the blocking pool. Each holds
  // its request and its reply's room reserved against --max-queued until its reply is queued.
  struct FileJob {
    std::uint64_t id;
    std::vector<std::uint8_t> payload;  // the request frame
    std::uint64_t reserved;             // bytes held in reserved_bytes_
    std::function<proto::Frame(const proto::Message&)> serve;
  };
  std::deque<FileJob> file_jobs_;
  bool file_job_running_ = false;
  std::map<std::uint64_t, std::weak_ptr<Worker>> evals_;  // evaluations in flight, by request id
  // Authorized launches waiting for this client's answer: their deadline timers.
  std::map<std::uint64_t, std::unique_ptr<asio::steady_timer>> authorizations_;
  bool counted_ = true;  // holds a slot of --max-connections and of its uid's quota
  bool hello_done_ = false;
  bool closed_ = false;
  bool flush_then_close_ = false;  // a fatal error frame is queued; close once it is written
  bool paused_ = false;
};

}  // namespace corral::supervisor
