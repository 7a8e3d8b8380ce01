#include "supervisor/connection.h"

#include <spdlog/spdlog.h>

#include <array>
#include <cerrno>
#include <asio/co_spawn.hpp>
#include <asio/experimental/as_tuple.hpp>
#include <asio/post.hpp>
#include <asio/read.hpp>
#include <asio/use_awaitable.hpp>
#include <asio/write.hpp>

#include "runtime/file_tools.h"
#include "supervisor/audit.h"
#include "supervisor/exec_request.h"
#include "supervisor/file_requests.h"
#include "supervisor/worker.h"
#include "worker_proto/messages.h"

namespace corral::supervisor {

using proto::ErrorCode;
constexpr auto use_tuple = asio::experimental::as_tuple(asio::use_awaitable);
// The writer hands the kernel up to this much per write: fewer syscalls under streaming.
constexpr std::size_t kWriteBatchBytes = 256 * 1024;
// What a final reply carries besides its payload (ids, figures, messages), reserved with it.
constexpr std::uint64_t kReplyOverheadBytes = 4 * 1024;

Connection::Connection(asio::io_context& io, asio::local::stream_protocol::socket socket, Peer peer,
                       Context& ctx)
    : io_(io), socket_(std::move(socket)), peer_(peer), ctx_(ctx), scope_(ctx.scopes->make_implicit(peer.uid)),
      writer_wake_(io), reader_wake_(io), hello_deadline_(io) {
  writer_wake_.expires_at(std::chrono::steady_clock::time_point::max());
  ++ctx_.connections;
  ++ctx_.connections_by_uid[peer_.uid];
}

Connection::~Connection() { release_slot(); }

// The connection counts against --max-connections and the per-uid quota while its socket
// is open, not while something still refers to this object.
void Connection::release_slot() {
  if (!counted_) return;
  counted_ = false;
  --ctx_.connections;
  auto it = ctx_.connections_by_uid.find(peer_.uid);
  if (it != ctx_.connections_by_uid.end() && --it->second == 0) ctx_.connections_by_uid.erase(it);
}

void Connection::start() {
  auto self = shared_from_this();
  // A connection that never says hello only holds a slot: it gets the hello deadline.
  std::weak_ptr<Connection> weak = self;
  hello_deadline_.expires_after(ctx_.options.hello_timeout);
  hello_deadline_.async_wait([weak](std::error_code ec) {
    auto c = weak.lock();
    if (ec || !c || c->closed_ || c->hello_done_) return;
    spdlog::warn("connection pid={} uid={}: no hello within {}ms; closing it", c->peer_.pid, c->peer_.uid,
                 c->ctx_.options.hello_timeout.count());
    c->close_after(proto::make_error(0, ErrorCode::hello_required,
                                     "no hello within " + std::to_string(c->ctx_.options.hello_timeout.count()) +
                                         "ms (serve --hello-timeout); closing the connection"));
  });  asio::co_spawn(io_, reader(), [self](std::exception_ptr e) {
    if (e) spdlog::error("connection pid={}: reader failed", self->peer_.pid);
    // After a fatal error frame the writer closes once it is flushed.
    if (!self->flush_then_close_) self->close();
  });
  asio::co_spawn(io_, writer(), [self](std::exception_ptr e) {
    if (e) spdlog::error("connection pid={}: writer failed", self->peer_.pid);
    self->close();
  });
}

void Connection::close() {
  if (closed_) return;
  closed_ = true;
  // Everything this client started dies with the connection: its commands (in whatever
  // scope), its implicit scope and the named scopes it owns. Done handlers still run (and
  // hold this object and the scopes alive) until each command is reaped; the temp dirs go
  // with the last reference.
  authorizations_.clear();  // their commands are terminated below: "not launched"
  file_jobs_.clear();       // not started; one that is running finds us closed
  hello_deadline_.cancel();
  reader_wake_.cancel();
  for (auto& [id, exec] : running_) exec.terminate();
  // An evaluation whose client is gone poisons its worker: its outcome is unknown.
  auto evals = std::move(evals_);
  evals_.clear();
  for (auto& [id, weak] : evals)
    if (auto w = weak.lock()) w->client_gone(this);
  scope_->close();
  for (auto& weak : owned_scopes_)
    if (auto s = weak.lock()) ctx_.scopes->close(s);
  std::error_code ignored;
  socket_.shutdown(asio::socket_base::shutdown_both, ignored);
  socket_.close(ignored);
  release_slot();
  writer_wake_.cancel();
  auto dropped = std::move(queue_);
  queue_.clear();
  queued_bytes_ = 0;
  for (auto& p : dropped)
    if (p.on_dropped) p.on_dropped();
}

asio::awaitable<void> Connection::reader() {
  auto self = shared_from_this();
  std::array<std::uint8_t, proto::kHeaderBytes> header;
  std::vector<std::uint8_t> payload;
  while (!closed_ && !flush_then_close_) {
    if (reading_paused()) {
      reader_wake_.expires_at(std::chrono::steady_clock::time_point::max());
      co_await reader_wake_.async_wait(use_tuple);
      continue;
    }
    auto [ec, n] = co_await asio::async_read(socket_, asio::buffer(header), use_tuple);
    if (ec) break;
    const std::uint32_t len = proto::read_length(header.data());
    if (len > ctx_.options.max_frame) {
      // The stream cannot be resynchronised without reading the payload: refuse and close.
      close_after(proto::make_error(0, ErrorCode::frame_too_large,
                                    "frame of " + std::to_string(len) + " bytes is over the " +
                                        std::to_string(ctx_.options.max_frame) + "-byte limit; closing the connection"));
      break;
    }
    payload.resize(len);
    auto [ec2, n2] = co_await asio::async_read(socket_, asio::buffer(payload), use_tuple);
    if (ec2) break;
    proto::DecodeError err;
    const proto::Message* msg = proto::verify_payload(payload, ctx_.options.max_frame, err);
    if (!msg) {
      send_error(0, err.code, err.message);
      continue;
    }
    dispatch(*msg, payload);
    // Don't keep a 16 MiB buffer around for a connection that sent one big frame.
    if (payload.capacity() > 1 << 20) payload = {};
  }
}

asio::awaitable<void> Connection::writer() {
  auto self = shared_from_this();
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
    if (ec)
      for (auto& f : dropped) f();  // never reached the client
    if (closed_) break;
    queued_bytes_ -= bytes;
    update_backpressure();
    if (!reading_paused()) reader_wake_.cancel();
    // Workers relaying host calls to this client wait for its queue to drain.
    if (!congested())
      for (auto& [eval_id, weak] : evals_)
        if (auto w = weak.lock()) w->client_drained(this);
    if (ec) break;
  }
}

void Connection::queue(proto::Frame frame, std::function<void()> on_dropped) {
  if (closed_) {
    if (on_dropped) on_dropped();
    return;
  }
  queued_bytes_ += frame.size();
  queue_.push_back({std::move(frame), std::move(on_dropped)});
  writer_wake_.cancel();
  update_backpressure();
}

void Connection::close_after(proto::Frame last) {
  if (closed_ || flush_then_close_) return;
  queue(std::move(last));
  flush_then_close_ = true;
  reader_wake_.cancel();
  writer_wake_.cancel();
  // The reader may be blocked in a read: ending the read side ends it.
  std::error_code ignored;
  socket_.shutdown(asio::socket_base::shutdown_receive, ignored);
  // A client that does not read gets no more than the grace of a hello deadline to take it.
  std::weak_ptr<Connection> weak = shared_from_this();
  hello_deadline_.expires_after(ctx_.options.hello_timeout);
  hello_deadline_.async_wait([weak](std::error_code ec) {
    if (auto c = weak.lock(); c && !ec) c->close();
  });
}

void Connection::reserve(std::uint64_t id, std::uint64_t bytes) {
  bytes = std::min<std::uint64_t>(bytes, ctx_.options.max_queued);
  reserved_[id] += bytes;
  reserved_bytes_ += bytes;
}

void Connection::release(std::uint64_t id) {
  auto it = reserved_.find(id);
  if (it == reserved_.end()) return;
  reserved_bytes_ -= it->second;
  reserved_.erase(it);
  if (!reading_paused()) reader_wake_.cancel();
}

bool Connection::reading_paused() const {
  if (closed_) return false;
  if (queued_bytes_ + reserved_bytes_ > ctx_.options.max_queued) return true;
  for (const auto& [id, weak] : evals_)
    if (auto w = weak.lock(); w && !w->accepts_host_replies()) return true;
  return false;
}

void Connection::update_backpressure() {
  const std::uint64_t limit = ctx_.options.max_queued;
  if (!paused_ && queued_bytes_ > limit) {
    paused_ = true;
    for (auto& [id, exec] : running_) exec.pause_output();
  } else if (paused_ && queued_bytes_ <= limit / 2) {
    paused_ = false;
    for (auto& [id, exec] : running_) exec.resume_output();
  }
}

void Connection::send_error(std::uint64_t id, ErrorCode code, std::string_view message) {
  queue(proto::make_error(id, code, message));
}

void Connection::dispatch(const proto::Message& msg, const std::vector<std::uint8_t>& payload) {
  const proto::Body type = msg.body_type();
  if (!hello_done_ && type != proto::Body::Hello) {
    send_error(msg.request_id(), ErrorCode::hello_required,
               std::string("the client must send a Hello first, got ") + proto::body_name(type));
    return;
  }
  switch (type) {
    case proto::Body::Hello: return on_hello(msg);
    case proto::Body::ExecRequest: return on_exec(msg);
    case proto::Body::Cancel: return on_cancel(msg);
    case proto::Body::StatusRequest: return on_status(msg);
    case proto::Body::ReadRequest:
    case proto::Body::WriteRequest:
    case proto::Body::ListRequest: return on_file(msg, payload);
    case proto::Body::ScopeCreate: return on_scope_create(msg);
    case proto::Body::ScopeClose: return on_scope_close(msg);
    case proto::Body::ScopeListRequest: return on_scope_list(msg);
    case proto::Body::Poll: return on_poll(msg);
    case proto::Body::BackgroundStop: return on_background_stop(msg);
    case proto::Body::Authorization: return on_authorization(msg);
    case proto::Body::WorkerStart: return on_worker_start(msg);
    case proto::Body::WorkerEval: return on_worker_eval(msg);
    case proto::Body::HostReply: return on_host_reply(msg);
    case proto::Body::WorkerStop: return on_worker_stop(msg);
    case proto::Body::WorkerListRequest: return on_worker_list(msg);
    case proto::Body::WorkerLogsRequest: return on_worker_logs(msg);
    default:
      send_error(msg.request_id(), ErrorCode::malformed,
                 std::string(proto::body_name(type)) + " is not a message a client sends");
  }
}

void Connection::on_hello(const proto::Message& msg) {
  const proto::Hello* hello = msg.body_as_Hello();
  if (hello_done_) {
    send_error(msg.request_id(), ErrorCode::malformed, "hello already received on this connection");
    return;
  }
  if (hello->protocol_version() != proto::kProtocolVersion) {
    send_error(msg.request_id(), ErrorCode::version_mismatch,
               "protocol version " + std::to_string(hello->protocol_version()) +
                   " is not supported; this supervisor speaks " + std::to_string(proto::kProtocolVersion));
    return;
  }
  hello_done_ = true;
  hello_deadline_.cancel();
  queue(proto::make_hello_reply(kServerVersion, layer_infos(), ctx_.options.max_frame));
}

void Connection::on_exec(const proto::Message& msg) {
  const std::uint64_t id = msg.request_id();
  const proto::ExecRequest& req = *msg.body_as_ExecRequest();
  if (id == 0) {
    send_error(0, ErrorCode::invalid_request, "request_id 0 is reserved for connection-level errors");
    return;
  }
  if (!req.background() && running_.count(id)) {
    send_error(id, ErrorCode::duplicate_request_id,
               "request id " + std::to_string(id) + " is already in flight; the running request is unaffected");
    return;
  }
  if (!req.background() && running_.size() >= ctx_.options.max_in_flight) {
    send_error(id, ErrorCode::too_many_requests,
               "this connection already has " + std::to_string(running_.size()) +
                   " requests in flight (serve --max-in-flight)");
    return;
  }
  // A background command outlives the request: without a named scope it goes to the peer
  // uid's default detached scope.
  const bool named = req.scope() && req.scope()->size() > 0;
  auto scope = named ? scope_for(id, req.scope(), nullptr)
               : req.background() ? ctx_.scopes->default_for(peer_.uid)
                                  : scope_;
  if (!scope) return;
  auto spec = prepare_spec(id, req, *scope, "cmd-");
  if (!spec) return;
  if (req.background()) spec->timeout = std::chrono::milliseconds(0);  // owned and cancellable instead
  ExecSpec logged = *spec;
  logged.stdin_data.reset();
  auto self = shared_from_this();

  if (req.authorize()) {
    if (req.background()) {
      send_error(id, ErrorCode::invalid_request, "an authorized launch runs in the foreground (no --background)");
      return;
    }
    // Prepared up to exec, then the client is asked; it runs only on a grant in time.
    spec->hold_for_authorization = true;
    std::weak_ptr<Connection> weak_conn = self;
    spec->on_prepared = [weak_conn, id, description = authorization_description(*spec, scope->id())] {
      auto c = weak_conn.lock();
      if (!c || c->closed_) return;
      flatbuffers::FlatBufferBuilder fbb(description.size() + 64);
      const auto deadline = c->ctx_.options.authorization_deadline;
      auto body = proto::CreateAuthorizationRequest(fbb, fbb.CreateString(description),
                                                    static_cast<std::uint64_t>(deadline.count()));
      c->queue(proto::finish_frame(fbb, proto::CreateMessage(fbb, id, proto::Body::AuthorizationRequest, body.Union())));
      auto timer = std::make_unique<asio::steady_timer>(c->io_, deadline);
      timer->async_wait([weak_conn, id](std::error_code ec) {
        auto conn = weak_conn.lock();
        if (ec || !conn || !conn->authorizations_.erase(id)) return;
        if (auto it = conn->running_.find(id); it != conn->running_.end())
          it->second.authorize(false, "the authorization deadline passed");
      });
      c->authorizations_[id] = std::move(timer);
    };
  }

  if (req.background()) {
    // The record outlives this connection: its audit line needs the peer, not the connection.
    auto started = ctx_.background->start(std::move(*spec), scope, peer_.uid,
                                          [peer = peer_, id, logged](const Result& r) { log_launch(peer, id, logged, r); });
    if (!started.ok()) {
      send_error(id, ErrorCode::too_many_requests, started.status().message());
      return;
    }
    flatbuffers::FlatBufferBuilder fbb(128);
    auto body = proto::CreateBackgroundStarted(fbb, fbb.CreateString(*started), fbb.CreateString(scope->id()));
    BackgroundTable* table = ctx_.background.get();
    queue(proto::finish_frame(fbb, proto::CreateMessage(fbb, id, proto::Body::BackgroundStarted, body.Union())),
          [table, bg = *started] { table->abandon(bg); });
    return;
  }

  auto sink = [this, self, id](StreamId stream, std::string_view data) {
    queue(proto::make_output(id, stream == StreamId::err ? proto::Stream::err : proto::Stream::out, data));
  };
  std::weak_ptr<Connection> weak = self;
  const std::uint64_t hook = scope->attach([weak, id] {
    if (auto c = weak.lock()) {
      auto it = c->running_.find(id);
      if (it != c->running_.end()) it->second.terminate();
    }
  });
  auto done = [this, self, id, scope, hook, logged = std::move(logged)](Result result) {
    scope->detach(hook);
    authorizations_.erase(id);
    on_exec_done(id, logged, std::move(result));
  };
  // The final reply carries the retained output: promise its room now, not when it completes.
  reserve(id, spec->max_output + kReplyOverheadBytes);
  ++ctx_.running_commands;
  auto [it, inserted] = running_.emplace(id, Execution::start(io_, std::move(*spec), sink, done));
  if (paused_) it->second.pause_output();
}

std::optional<ExecSpec> Connection::prepare_spec(std::uint64_t id, const proto::ExecRequest& req, Scope& scope,
                                                const char* cgroup_prefix) {
  const Credentials creds = peer_.credentials();
  auto spec = to_spec(req, ctx_.options, scope.defaults, scope.ceiling, &creds);
  if (!spec.ok()) {
    send_error(id, spec.status().code() == StatusCode::refused ? ErrorCode::refused_by_policy : ErrorCode::invalid_request,
               spec.status().message());
    return std::nullopt;
  }
  if (Status st = ctx_.host->check(*spec->policy); !st.ok()) {
    send_error(id, ErrorCode::unsupported, st.message());
    return std::nullopt;
  }
  // A peer opens through --allow-socket only what it could connect to itself (the mode bits
  // for its uid and primary gid; root may name any socket).
  for (const auto& a : spec->policy->allow_sockets) {
    const bool may = peer_.uid == 0 || (a.uid == peer_.uid ? (a.mode & 0200) : a.gid == peer_.gid ? (a.mode & 020) : (a.mode & 02));
    if (!may) {
      send_error(id, ErrorCode::invalid_request,
                 "--allow-socket " + a.path + ": uid " + std::to_string(peer_.uid) + " may not connect to it");
      return std::nullopt;
    }
  }
  auto temp = scope.temp_dir();
  if (!temp.ok()) {
    send_error(id, ErrorCode::internal, "cannot create the scope's temp dir: " + temp.status().message());
    return std::nullopt;
  }
  spec->temp_dir = *temp;
  spec->host = ctx_.host.get();
  spec->offload = [pool = ctx_.launcher.get()](std::function<void()> job) { pool->submit(std::move(job)); };
  spec->cgroup_name = cgroup_prefix + std::to_string(++ctx_.launches);
  if (spec->policy->network == Network::denied) spec->netns_fd = scope.network_namespace();
  return std::move(spec).value();
}

std::shared_ptr<Scope> Connection::scope_for(std::uint64_t id, const flatbuffers::String* name,
                                             const std::shared_ptr<Scope>& fallback) {
  if (!name || name->size() == 0) return fallback;
  auto found = ctx_.scopes->find(name->str(), peer_.uid);
  if (!found.ok()) {
    const int err = found.status().err();
    send_error(id, err == EPERM ? ErrorCode::permission_denied : err == ENOENT ? ErrorCode::not_found : ErrorCode::invalid_request,
               found.status().message());
    return nullptr;
  }
  return *found;
}

void Connection::on_exec_done(std::uint64_t id, const ExecSpec& spec, Result result) {
  --ctx_.running_commands;
  log_launch(peer_, id, spec, result);
  release(id);
  queue(make_exec_result(id, result));
  running_.erase(id);
}

void Connection::log_launch(const Peer& peer, std::uint64_t id, const ExecSpec& spec, const Result& result) {
  audit("launch " + launch_record(peer.uid, peer.pid, id, spec, result));
}

void Connection::on_file(const proto::Message& msg, const std::vector<std::uint8_t>& payload) {
  const std::uint64_t id = msg.request_id();
  if (id == 0) {
    send_error(0, ErrorCode::invalid_request, "request_id 0 is reserved for connection-level errors");
    return;
  }
  const flatbuffers::String* name = msg.body_type() == proto::Body::ReadRequest    ? msg.body_as_ReadRequest()->scope()
                                   : msg.body_type() == proto::Body::WriteRequest ? msg.body_as_WriteRequest()->scope()
                                                                                  : msg.body_as_ListRequest()->scope();
  auto scope = scope_for(id, name, scope_);
  if (!scope) return;
  auto temp = scope->temp_dir();
  if (!temp.ok()) {
    send_error(id, ErrorCode::internal, "cannot create the scope's temp dir: " + temp.status().message());
    return;
  }
  // Everything the job needs, by value: it runs on another thread, and may outlive us.
  auto fc = std::make_shared<FileContext>(
      FileContext{*temp, ctx_.options.max_frame, scope->defaults, scope->ceiling, ctx_.options.hidden_paths, nullptr});
  auto creds = std::make_shared<Credentials>(peer_.credentials());
  fc->peer = creds.get();
  // The reply's room: a read's window (what it asks, else the default; at most a frame), a
  // listing's (1 MiB: 10,000 entries), a write's (small). Plus the request itself, held until then.
  const proto::Body type = msg.body_type();
  std::uint64_t reply = kReplyOverheadBytes;
  if (type == proto::Body::ReadRequest) {
    const proto::ReadRequest& r = *msg.body_as_ReadRequest();
    const std::uint64_t window = r.max_bytes() ? r.max_bytes() : r.binary() ? files::kDefaultReadBytes : files::kDefaultReadText;
    reply += std::min<std::uint64_t>(window, ctx_.options.max_frame);
  } else if (type == proto::Body::ListRequest) {
    reply += 1 << 20;
  }
  const std::uint64_t bytes = std::min<std::uint64_t>(payload.size() + reply, ctx_.options.max_queued);
  reserved_bytes_ += bytes;
  file_jobs_.push_back({id, payload, bytes, [fc, creds, type](const proto::Message& m) {
                          const std::uint64_t rid = m.request_id();
                          if (type == proto::Body::ReadRequest) return handle_read(rid, *m.body_as_ReadRequest(), *fc);
                          if (type == proto::Body::WriteRequest) return handle_write(rid, *m.body_as_WriteRequest(), *fc);
                          return handle_list(rid, *m.body_as_ListRequest(), *fc);
                        }});
  next_file_job();
}

void Connection::next_file_job() {
  if (file_job_running_ || file_jobs_.empty() || closed_) return;
  file_job_running_ = true;
  auto job = std::make_shared<FileJob>(std::move(file_jobs_.front()));
  file_jobs_.pop_front();
  std::weak_ptr<Connection> weak = shared_from_this();
  ctx_.blocking->submit([job, weak, executor = socket_.get_executor()] {
    // The payload was verified when it was read; this copy is the same bytes.
    auto reply = std::make_shared<proto::Frame>(job->serve(*flatbuffers::GetRoot<proto::Message>(job->payload.data())));
    asio::post(executor, [job, weak, reply] {
      auto c = weak.lock();
      if (!c) return;
      c->reserved_bytes_ -= job->reserved;
      c->file_job_running_ = false;
      c->queue(std::move(*reply));
      if (!c->reading_paused()) c->reader_wake_.cancel();
      c->next_file_job();
    });
  });
}

void Connection::on_authorization(const proto::Message& msg) {
  const std::uint64_t id = msg.request_id();
  auto pending = authorizations_.find(id);
  auto running = running_.find(id);
  if (pending == authorizations_.end() || running == running_.end()) {
    // A grant launches at most once; a late or repeated answer changes nothing.
    send_error(id, ErrorCode::unknown_request_id, "no authorization is pending for request " + std::to_string(id));
    return;
  }
  authorizations_.erase(pending);  // cancels its deadline
  const proto::Authorization& a = *msg.body_as_Authorization();
  std::string reason = proto::str(a.reason());
  running->second.authorize(a.grant(), reason.empty() ? "denied by the client" : "denied by the client: " + reason);
}

void Connection::on_cancel(const proto::Message& msg) {
  const std::uint64_t id = msg.request_id();
  if (auto e = evals_.find(id); e != evals_.end()) {
    if (auto w = e->second.lock()) w->cancel(this, id);
    return;
  }
  auto it = running_.find(id);
  if (it == running_.end()) {
    send_error(id, ErrorCode::unknown_request_id, "no request " + std::to_string(id) + " is in flight");
    return;
  }
  if (msg.body_as_Cancel()->force()) it->second.terminate();
  else it->second.stop();
}

void Connection::on_status(const proto::Message& msg) {
  proto::StatusInfo info;
  info.server_version = kServerVersion;
  info.layers = layer_infos();
  info.defaults = ctx_.defaults;
  info.pid = static_cast<std::uint32_t>(::getpid());
  info.uptime_ms = static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - ctx_.started).count());
  info.connections = ctx_.connections;
  info.running_commands = ctx_.running_commands + static_cast<std::uint32_t>(ctx_.background->running());
  info.socket_path = ctx_.options.socket_path;
  queue(proto::make_status_reply(msg.request_id(), info));
}

std::vector<proto::LayerInfo> Connection::layer_infos() const {
  std::vector<proto::LayerInfo> layers;
  for (const auto& l : ctx_.layers) layers.push_back({l.name, l.available, l.reason});
  return layers;
}

}  // namespace corral::supervisor
