#include "supervisor/worker.h"

#include <sys/socket.h>
#include <spdlog/spdlog.h>

#include <array>
#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/experimental/as_tuple.hpp>
#include <asio/read.hpp>
#include <asio/use_awaitable.hpp>
#include <asio/write.hpp>

#include "runtime/unique_fd.h"
#include "supervisor/frame_reader.h"
#include "supervisor/peer.h"
#include "worker_proto/messages.h"

namespace corral::supervisor {

using proto::ErrorCode;
constexpr auto use_tuple = asio::experimental::as_tuple(asio::use_awaitable);

namespace {

std::string_view bytes_of(const flatbuffers::Vector<std::uint8_t>* v) {
  return v ? std::string_view(reinterpret_cast<const char*>(v->data()), v->size()) : std::string_view();
}

}  // namespace

Worker::Worker(asio::io_context& io, std::string name, std::shared_ptr<Scope> scope, uid_t owner, ExecSpec spec,
               std::chrono::milliseconds idle_timeout, std::uint32_t max_frame, std::uint64_t max_queued,
               std::function<void()> on_stopped)
    : io_(io), name_(std::move(name)), scope_(std::move(scope)), owner_(owner), spec_(std::move(spec)),
      idle_timeout_(idle_timeout), max_frame_(max_frame), max_queued_(max_queued), on_stopped_(std::move(on_stopped)),
      ready_timer_(io), deadline_(io), idle_(io) {}

Worker::~Worker() { kill_process(); }

const char* Worker::state_name() const {
  switch (state_) {
    case State::idle: return "idle";
    case State::busy: return "busy";
    case State::state_lost: return "state_lost";
    case State::stopped: return "stopped";
  }
  return "?";
}

Status Worker::start(std::function<void(Status)> on_ready) {
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) return Status::from_errno("socketpair", errno);
  UniqueFd mine(sv[0]);
  refuse_descriptors(mine.get());  // the worker sends frames, never descriptors (supervisor/peer.h)
  ExecSpec spec = spec_;
  spec.extra_fd = sv[1];  // the execution owns it now, and closes it once the worker is spawned
  spec.env.emplace_back("CORRAL_WORKER_FD", "3");
  spec.timeout = std::chrono::milliseconds(0);
  spec.unlimited_output = true;
  spec.retain_output = false;
  const std::uint64_t gen = ++generation_;
  std::weak_ptr<Worker> weak = weak_from_this();
  auto sink = [weak](StreamId, std::string_view data) {
    if (auto w = weak.lock()) w->append_log(data);
  };
  auto done = [weak, gen](Result r) {
    auto w = weak.lock();
    if (!w) return;
    if (w->state_ == State::stopped) {
      // Stopped: the worker leaves the registry once its process is gone (after the grace
      // period of a graceful stop), not before: dropping the handle earlier would SIGKILL it.
      if (w->on_stopped_) {
        auto f = std::move(w->on_stopped_);
        w->on_stopped_ = nullptr;
        f();
      }
      return;
    }
    if (gen != w->generation_ || w->state_ == State::state_lost) return;
    std::string how = r.status == ExitStatus::setup_error ? "could not start: " + r.message
                      : r.exit_code                         ? "exited with status " + std::to_string(*r.exit_code)
                                                            : "was killed by signal " + std::to_string(r.signal);
    if (w->on_ready_) {
      // Gone before it was ready: the start failed. Its log is complete by now.
      auto report = std::move(w->on_ready_);
      w->on_ready_ = nullptr;
      w->ready_timer_.cancel();
      constexpr std::size_t kTail = 2048;
      const std::string& logs = w->logs_;
      std::string tail = logs.size() > kTail ? "..." + logs.substr(logs.size() - kTail) : logs;
      while (!tail.empty() && tail.back() == '\n') tail.pop_back();
      report(Status::error("start", ECHILD,
                           "worker " + w->name_ + " " + how + " before it was ready" +
                               (tail.empty() ? std::string("; its log is empty") : "; its log ends with:\n" + tail)));
      return;
    }
    w->poison(ErrorCode::state_lost, "the worker " + how);
  };
  exec_ = Execution::start(io_, std::move(spec), sink, done);
  channel_ = std::make_shared<Channel>(io_, gen);
  channel_->socket.assign(asio::local::stream_protocol(), mine.release());
  out_.clear();
  out_bytes_ = 0;
  unwritten_replies_ = 0;
  state_ = State::idle;
  lost_reason_.clear();
  if (!scope_hook_) {
    scope_hook_ = scope_->attach([weak] {
      if (auto w = weak.lock()) w->stop(/*force=*/true);
    });
  }
  asio::co_spawn(io_, read_frames(weak, channel_), asio::detached);
  // The idle time of a new worker counts from when it is reported started.
  if (!on_ready) arm_idle();
  if (on_ready) {
    on_ready_ = std::move(on_ready);
    ready_timer_.expires_after(kWorkerStartSettle);
    ready_timer_.async_wait([weak, gen](std::error_code ec) {
      auto w = weak.lock();
      if (ec || !w || gen != w->generation_ || !w->on_ready_) return;
      auto report = std::move(w->on_ready_);
      w->on_ready_ = nullptr;
      if (!w->current_ && w->queue_.empty()) w->arm_idle();
      report(Status());
    });
  }
  return {};
}

void Worker::kill_process() {
  exec_.terminate();
  if (channel_) {
    channel_->read_wake.cancel();  // its reader, if waiting for room, wakes to find it is stale
    std::error_code ignored;
    channel_->socket.close(ignored);
  }
}

void Worker::wake_reader() {
  if (channel_) channel_->read_wake.cancel();
}

// The reader holds the worker only between awaits: a worker dropped meanwhile is destroyed
// (closing the channel), and its reader ends when it wakes.
asio::awaitable<void> Worker::read_frames(std::weak_ptr<Worker> weak, std::shared_ptr<Channel> channel) {
  auto owner = [&]() -> std::shared_ptr<Worker> {
    auto w = weak.lock();
    return w && w->generation_ == channel->generation ? w : nullptr;
  };
  std::uint32_t max_frame = 0;
  if (auto w = owner()) max_frame = w->max_frame_;
  else co_return;
  std::vector<std::uint8_t> payload;
  for (;;) {
    // Back-pressure: nothing more is read while what the worker's frames would feed is full.
    for (;;) {
      if (auto w = owner(); !w) co_return;
      else if (w->may_read()) break;
      channel->read_wake.expires_at(std::chrono::steady_clock::time_point::max());
      co_await channel->read_wake.async_wait(use_tuple);
    }
    // Its channel, held here: a reset meanwhile closes it, and the read ends.
    const FrameRead in = co_await read_frame(channel->socket, max_frame, payload);
    if (in.end == FrameRead::End::closed) break;
    auto w = owner();
    if (!w) co_return;
    if (in.end == FrameRead::End::oversized) {
      w->poison(ErrorCode::state_lost, "protocol violation: the worker sent a frame of " + std::to_string(in.length) + " bytes");
      co_return;
    }
    if (in.end == FrameRead::End::malformed) {
      w->poison(ErrorCode::state_lost, "protocol violation: " + in.error.message);
      co_return;
    }
    w->on_frame(*in.msg);
  }
  // EOF: the worker closed its channel or died; its exit is reported by the engine.
  if (auto w = owner(); w && w->state_ != State::stopped && w->state_ != State::state_lost && w->current_)
    w->poison(ErrorCode::state_lost, "the worker closed its channel mid-evaluation");
}

bool Worker::may_read() const {
  if (out_bytes_ > max_queued_) return false;
  return !(current_ && current_->req.client_congested && current_->req.client_congested());
}

void Worker::client_drained(const void* client) {
  if (current_ && current_->req.client == client && may_read()) wake_reader();
}

void Worker::on_frame(const proto::Message& msg) {
  const std::uint64_t number = current_ ? current_->number : 0;
  if (msg.request_id() == number && number != 0) {
    if (const proto::EvalReply* r = msg.body_as_EvalReply()) return finish(std::string(bytes_of(r->data())));
    if (const proto::HostCall* call = msg.body_as_HostCall()) {
      Current& c = *current_;
      const std::uint64_t call_id = call->call_id();
      if (c.pending_calls.count(call_id)) {
        return poison(ErrorCode::state_lost, "protocol violation: host call id " + std::to_string(call_id) + " reused");
      }
      if (c.pending_calls.size() + unwritten_replies_ >= kMaxPendingHostCalls) {
        return poison(ErrorCode::state_lost, "protocol violation: more than " + std::to_string(kMaxPendingHostCalls) +
                                                 " host calls outstanding");
      }
      if (!c.req.serve_host_calls) {
        send_to_worker(proto::make_host_reply(number, call_id, {}, "no host channel: the evaluating client serves no host calls"),
                       /*host_reply=*/true);
        return;
      }
      // The evaluation's channel: relay the call to its client, under the client's request id.
      c.pending_calls.insert(call_id);
      ++c.host_calls;
      c.req.send(proto::make_host_call(c.req.request_id, call_id, bytes_of(call->data())));
      return;
    }
  }
  poison(ErrorCode::state_lost, std::string("protocol violation: unexpected ") + proto::body_name(msg.body_type()) +
                                    " for evaluation " + std::to_string(msg.request_id()));
}

void Worker::send_to_worker(proto::Frame frame, bool host_reply) {
  out_bytes_ += frame.size();
  unwritten_replies_ += host_reply;
  out_.push_back({std::move(frame), host_reply});
  write_next();
}

void Worker::write_next() {
  if (!channel_ || channel_->writing || out_.empty()) return;
  channel_->writing = true;
  // The write owns its frame and its channel: a restart clears out_ and replaces channel_
  // while the write may still be in flight.
  auto sent = std::make_shared<Outgoing>(std::move(out_.front()));
  out_.pop_front();
  asio::async_write(channel_->socket, asio::buffer(sent->frame),
                    [weak = weak_from_this(), channel = channel_, sent](std::error_code ec, std::size_t) {
                      channel->writing = false;
                      auto w = weak.lock();
                      if (!w || w->generation_ != channel->generation) return;
                      const bool was_full = !w->accepts_host_replies();
                      w->out_bytes_ -= sent->frame.size();
                      w->unwritten_replies_ -= sent->host_reply;
                      if (was_full && w->accepts_host_replies()) {
                        if (w->may_read()) w->wake_reader();
                        if (w->current_ && w->current_->req.wake_client) w->current_->req.wake_client();
                      }
                      if (ec) return;  // the reader or the exit handler reports the broken worker
                      w->write_next();
                    });
}

void Worker::evaluate(EvalRequest req, bool reset) {
  if (state_ == State::stopped) {
    req.send(proto::make_error(req.request_id, ErrorCode::not_found, "worker " + name_ + " is stopped"));
    return;
  }
  if (reset) {
    // Whatever the old worker was doing is lost, never retried.
    if (current_) poison(ErrorCode::cancelled, "the worker was reset");
    kill_process();
    if (Status st = start(); !st.ok()) {
      req.send(proto::make_error(req.request_id, ErrorCode::internal, "cannot restart worker " + name_ + ": " + st.message()));
      return;
    }
    spdlog::info("worker {} in scope {} reset", name_, scope_->id());
  }
  if (state_ == State::state_lost) {
    req.send(proto::make_error(req.request_id, ErrorCode::state_lost,
                               "worker " + name_ + " lost its state (" + lost_reason_ +
                                   "); evaluate with --reset to start a fresh one"));
    return;
  }
  if (req.data.size() > kMaxWorkerRequest) {
    req.send(proto::make_error(req.request_id, ErrorCode::invalid_request,
                               "request of " + std::to_string(req.data.size()) + " bytes is over the " +
                                   std::to_string(kMaxWorkerRequest) + "-byte limit"));
    return;
  }
  idle_.cancel();
  queue_.push_back(std::move(req));
  next();
}

void Worker::next() {
  if (current_ || state_ != State::idle) return;
  if (queue_.empty()) return arm_idle();
  current_.emplace();
  current_->req = std::move(queue_.front());
  queue_.pop_front();
  current_->number = next_number_++;
  state_ = State::busy;
  deadline_.expires_after(current_->req.timeout);
  const std::uint64_t number = current_->number;
  deadline_.async_wait([weak = weak_from_this(), number](std::error_code ec) {
    auto w = weak.lock();
    if (ec || !w || !w->current_ || w->current_->number != number) return;
    w->poison(ErrorCode::eval_timeout, "the evaluation passed its " + std::to_string(w->current_->req.timeout.count()) +
                                           "ms deadline and the worker was killed");
  });
  send_to_worker(proto::make_evaluate(number, current_->req.data));
}

void Worker::finish(std::string reply) {
  deadline_.cancel();
  Current c = std::move(*current_);
  current_.reset();
  ++evaluations_;
  state_ = State::idle;
  c.req.send(proto::make_worker_eval_result(c.req.request_id, reply, c.host_calls));
  // The channel is closed now: replies still pending for it are refused when they come.
  next();
}

void Worker::poison(ErrorCode code, const std::string& reason) {
  if (state_ == State::stopped) return;
  spdlog::warn("worker {} in scope {}: {}; state lost", name_, scope_->id(), reason);
  deadline_.cancel();
  state_ = State::state_lost;
  lost_reason_ = reason;
  ++generation_;  // whatever the old process still sends is ignored
  kill_process();
  // Nothing queued for the old process will be written: its client may be read again.
  const bool was_full = !accepts_host_replies();
  out_.clear();
  out_bytes_ = 0;
  unwritten_replies_ = 0;
  if (was_full && current_ && current_->req.wake_client) current_->req.wake_client();
  if (current_) {
    Current c = std::move(*current_);
    current_.reset();
    c.req.send(proto::make_error(c.req.request_id, code,
                                 reason + "; the worker's state is lost and the request was not retried; "
                                          "evaluate with --reset to start a fresh worker"));
  }
  fail_queue(ErrorCode::state_lost, "worker " + name_ + " lost its state (" + reason + "); evaluate with --reset");
}

void Worker::fail_queue(ErrorCode code, const std::string& message) {
  auto queued = std::move(queue_);
  queue_.clear();
  for (auto& q : queued) q.send(proto::make_error(q.request_id, code, message));
}

bool Worker::host_reply(const void* client, std::uint64_t request_id, std::uint64_t call_id, std::string data,
                        std::string error) {
  if (!current_ || current_->req.client != client || current_->req.request_id != request_id) return false;
  if (!current_->pending_calls.erase(call_id)) return false;
  send_to_worker(proto::make_host_reply(current_->number, call_id, data, error), /*host_reply=*/true);
  return true;
}

bool Worker::cancel(const void* client, std::uint64_t request_id) {
  if (current_ && current_->req.client == client && current_->req.request_id == request_id) {
    poison(ErrorCode::cancelled, "the evaluation was cancelled by its client and the worker was killed");
    return true;
  }
  for (auto it = queue_.begin(); it != queue_.end(); ++it) {
    if (it->client == client && it->request_id == request_id) {
      it->send(proto::make_error(request_id, ErrorCode::cancelled, "the evaluation was cancelled before it started"));
      queue_.erase(it);
      return true;
    }
  }
  return false;
}

void Worker::client_gone(const void* client) {
  std::erase_if(queue_, [client](const EvalRequest& r) { return r.client == client; });
  if (current_ && current_->req.client == client)
    poison(ErrorCode::state_lost, "the evaluating client disconnected mid-evaluation");
}

void Worker::stop(bool force) {
  if (state_ == State::stopped) return;
  if (current_) {
    current_->req.send(proto::make_error(current_->req.request_id, ErrorCode::cancelled, "worker " + name_ + " was stopped"));
    current_.reset();
  }
  fail_queue(ErrorCode::cancelled, "worker " + name_ + " was stopped");
  const bool running = state_ != State::state_lost && !exec_.finished();
  state_ = State::stopped;
  deadline_.cancel();
  idle_.cancel();
  if (force) exec_.terminate();
  else exec_.stop();
  if (channel_) {
    std::error_code ignored;
    channel_->socket.close(ignored);  // EOF tells a well-behaved worker to exit
  }
  if (scope_hook_) scope_->detach(scope_hook_);
  // A live process reports its exit through the done handler, which then lets go of us.
  if (!running && on_stopped_) {
    auto f = std::move(on_stopped_);
    on_stopped_ = nullptr;
    f();
  }
}

void Worker::arm_idle() {
  idle_.expires_after(idle_timeout_);
  idle_.async_wait([weak = weak_from_this()](std::error_code ec) {
    auto w = weak.lock();
    if (ec || !w || w->current_ || !w->queue_.empty() || w->state_ == State::stopped) return;
    spdlog::info("worker {} in scope {} idle for {}ms: stopping it", w->name_, w->scope_->id(), w->idle_timeout_.count());
    w->stop(/*force=*/false);
  });
}

void Worker::append_log(std::string_view data) {
  logs_.append(data);
  if (logs_.size() > kWorkerLogBytes) logs_.erase(0, logs_.size() - kWorkerLogBytes);
}

}  // namespace corral::supervisor
