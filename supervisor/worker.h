// Workers: persistent runtimes inside the same isolation as commands, spoken to in frames on
// a dedicated socketpair (docs/design.md "Workers and channels").
//
// Evaluations on one worker are serialized. Each has a size limit and a deadline. A deadline,
// a cancel, the evaluating client's disconnect, a crash or a protocol violation poisons the
// worker: it is killed and marked "state lost", and every later evaluation fails saying so
// until a reset. The interrupted request is never sent again.
//
// The host channel of an evaluation opens at its first HostCall and closes when the
// evaluation ends; a HostReply for a closed channel is refused and never delivered later.
//
// Memory stays bounded whatever the worker does. Frames waiting to be written to the worker
// (evaluations, host replies) have a byte bound (`serve --max-worker-queued`): past it the
// supervisor stops reading the worker, and stops reading the evaluating client's requests
// (the source of host replies), until the worker has taken them. While the evaluating
// client's own queue is over its bound, the worker is not read either. A worker is poisoned
// for a frame that is not allowed at that moment: anything outside an evaluation, a reply or
// host call for another evaluation, a reused call id, or more than kMaxPendingHostCalls host
// calls outstanding (relayed and unanswered, or answered and not yet written to it).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>

#include <asio/awaitable.hpp>
#include <asio/io_context.hpp>
#include <asio/local/stream_protocol.hpp>
#include <asio/steady_timer.hpp>

#include "runtime/execution.h"
#include "supervisor/scope.h"
#include "worker_proto/codec.h"

namespace corral::supervisor {

inline constexpr std::size_t kMaxWorkerRequest = 1 << 20;       // bytes (docs/protocol.md "Limits")
inline constexpr std::size_t kWorkerLogBytes = 256 << 10;       // the latest logs kept
inline constexpr std::chrono::milliseconds kDefaultEvalTimeout{120'000};
inline constexpr std::chrono::milliseconds kDefaultIdleTimeout{600'000};
inline constexpr std::size_t kMaxWorkersPerScope = 16;
// A worker that is still running this long after its launch counts as started; one that
// exits sooner failed to start. Long enough for a runtime that dies of a bad argument or a
// failed import (python3 -I takes ~30 ms to get there), short enough for a start to feel
// immediate.
inline constexpr std::chrono::milliseconds kWorkerStartSettle{300};
// Host calls one evaluation may have outstanding; one more poisons the worker.
inline constexpr std::size_t kMaxPendingHostCalls = 64;

// One evaluation as the worker sees its client.
struct EvalRequest {
  std::uint64_t request_id = 0;               // the client's id
  std::string data;
  std::chrono::milliseconds timeout = kDefaultEvalTimeout;
  bool serve_host_calls = false;
  const void* client = nullptr;               // identity of the connection
  std::function<void(proto::Frame)> send;     // queues a frame to that client
  // True while that client's queue is over its bound: the worker is not read meanwhile.
  std::function<bool()> client_congested;
  // Lets that client's requests be read again (the worker's inbound queue has drained).
  std::function<void()> wake_client;
};

class Worker : public std::enable_shared_from_this<Worker> {
 public:
  enum class State { idle, busy, state_lost, stopped };

  // `spec` is the template every (re)start launches; `on_stopped` runs once when it stops for good.
  // `max_frame` bounds each frame from the worker; `max_queued` the bytes waiting to be
  // written to it.
  Worker(asio::io_context& io, std::string name, std::shared_ptr<Scope> scope, uid_t owner, ExecSpec spec,
         std::chrono::milliseconds idle_timeout, std::uint32_t max_frame, std::uint64_t max_queued,
         std::function<void()> on_stopped);
  ~Worker();

  // Launches the worker. With `on_ready`, that is called once: ok if the worker is still
  // running kWorkerStartSettle after the launch, else the failure, naming the exit status and
  // quoting the end of its log. A worker that exits before it is ready is a start failure.
  Status start(std::function<void(Status)> on_ready = nullptr);
  void evaluate(EvalRequest req, bool reset);
  // A client's HostReply for its evaluation `request_id`; false if no such channel is open.
  bool host_reply(const void* client, std::uint64_t request_id, std::uint64_t call_id, std::string data,
                  std::string error);
  // A client cancelled `request_id`, or went away (request_id 0: all of its evaluations).
  // Returns true if that evaluation was on this worker.
  bool cancel(const void* client, std::uint64_t request_id);
  void client_gone(const void* client);
  // `client`'s queue drained: if the worker was waiting for it, read the worker again.
  void client_drained(const void* client);
  // False while frames waiting for the worker are over its bound: its evaluating client's
  // requests (host replies among them) are not read meanwhile.
  bool accepts_host_replies() const { return out_bytes_ <= max_queued_; }
  void stop(bool force);

  const std::string& name() const { return name_; }
  const std::shared_ptr<Scope>& scope() const { return scope_; }
  uid_t owner() const { return owner_; }
  State state() const { return state_; }
  const char* state_name() const;
  std::uint64_t evaluations() const { return evaluations_; }
  const std::vector<std::string>& argv() const { return spec_.argv; }
  pid_t pid() const { return exec_.pid(); }
  const std::string& logs() const { return logs_; }

 private:
  struct Current {
    EvalRequest req;
    std::uint64_t number = 0;
    std::set<std::uint64_t> pending_calls;
    std::uint32_t host_calls = 0;
  };
  // One process's end of the channel, with what its reader and writer wait on. They hold it
  // by shared_ptr and the worker only weakly: a restart opens a new Channel, so they never use
  // a freed socket or the next process's, and they end when they find `generation` is no
  // longer the worker's (kill_process() closes the old socket to wake them).
  struct Channel {
    Channel(asio::io_context& io, std::uint64_t gen) : socket(io), read_wake(io), generation(gen) {}
    asio::local::stream_protocol::socket socket;
    asio::steady_timer read_wake;  // cancelled when the worker may be read again
    bool writing = false;
    const std::uint64_t generation;
  };
  static asio::awaitable<void> read_frames(std::weak_ptr<Worker> weak, std::shared_ptr<Channel> channel);
  bool may_read() const;
  void wake_reader();
  void send_to_worker(proto::Frame frame, bool host_reply = false);
  void write_next();
  void next();
  void finish(std::string reply);
  void poison(proto::ErrorCode code, const std::string& reason);
  void fail_queue(proto::ErrorCode code, const std::string& message);
  void on_frame(const proto::Message& msg);
  void arm_idle();
  void append_log(std::string_view data);
  void kill_process();

  asio::io_context& io_;
  std::string name_;
  std::shared_ptr<Scope> scope_;
  uid_t owner_;
  ExecSpec spec_;
  std::chrono::milliseconds idle_timeout_;
  std::uint32_t max_frame_;
  std::uint64_t max_queued_;
  std::function<void()> on_stopped_;
  std::uint64_t scope_hook_ = 0;

  Execution exec_;
  std::shared_ptr<Channel> channel_;  // the current process's; null before the first start
  struct Outgoing {
    proto::Frame frame;
    bool host_reply = false;
  };
  std::deque<Outgoing> out_;
  std::uint64_t out_bytes_ = 0;  // in out_ and being written
  std::size_t unwritten_replies_ = 0;  // host replies in out_ or being written, counted as outstanding calls
  asio::steady_timer ready_timer_;
  std::function<void(Status)> on_ready_;  // a start waiting to be reported
  std::uint64_t generation_ = 0;  // bumps on every (re)start and poisoning; stale callbacks check it

  State state_ = State::idle;
  std::string lost_reason_;
  std::optional<Current> current_;
  std::deque<EvalRequest> queue_;
  std::uint64_t next_number_ = 1;
  std::uint64_t evaluations_ = 0;
  asio::steady_timer deadline_;
  asio::steady_timer idle_;
  std::string logs_;
};

}  // namespace corral::supervisor
