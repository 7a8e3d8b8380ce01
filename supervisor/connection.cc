#include "supervisor/connection.h"

#include <spdlog/spdlog.h>

#include <asio/co_spawn.hpp>

#include "worker_proto/messages.h"

namespace corral::supervisor {

using proto::ErrorCode;

Connection::Connection(asio::io_context& io, asio::local::stream_protocol::socket socket, Peer peer, Context& ctx)
    : io_(io),
      peer_(std::move(peer)),
      ctx_(ctx),
      scope_(ctx.scopes->make_implicit(peer_.uid)),
      transport_(io, std::move(socket), *this, {ctx.options.max_frame, ctx.options.max_queued, ctx.options.hello_timeout}),
      hello_deadline_(io) {
  ++ctx_.connections;
  ++ctx_.connections_by_uid[peer_.uid];
}

// The handlers go with us: their commands are terminated as their Executions are destroyed,
// and every callback still pending finds the session gone.
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
    c->transport_.close_after(proto::make_error(0, ErrorCode::hello_required,
                                                "no hello within " + std::to_string(c->ctx_.options.hello_timeout.count()) +
                                                    "ms (serve --hello-timeout); closing the connection"));
  });
  asio::co_spawn(io_, transport_.reader(), [self](std::exception_ptr e) {
    if (e) spdlog::error("connection pid={}: reader failed", self->peer_.pid);
    // After a fatal error frame the writer closes once it is flushed.
    if (!self->transport_.closing()) self->close();
  });
  asio::co_spawn(io_, transport_.writer(), [self](std::exception_ptr e) {
    if (e) spdlog::error("connection pid={}: writer failed", self->peer_.pid);
    self->close();
  });
}

void Connection::close() {
  if (closed_) return;
  closed_ = true;
  // Everything this client started dies with the connection: its commands (in whatever
  // scope), its evaluations, its implicit scope and the named scopes it owns. Each command's
  // end is still audited; the temp dirs go with the last reference to their scope.
  hello_deadline_.cancel();
  exec_.close();
  files_.close();
  workers_.close();
  scope_->close();
  scopes_.close();
  transport_.close();
  release_slot();
}

void Connection::on_frame(const proto::Message& msg, const std::vector<std::uint8_t>& payload) {
  const proto::Body type = msg.body_type();
  if (!hello_done_ && type != proto::Body::Hello) {
    send_error(msg.request_id(), ErrorCode::hello_required,
               std::string("the client must send a Hello first, got ") + proto::body_name(type));
    return;
  }
  switch (type) {
    case proto::Body::Hello: return on_hello(msg);
    case proto::Body::StatusRequest: return on_status(msg);
    case proto::Body::Cancel: return on_cancel(msg);
    case proto::Body::ExecRequest: return exec_.on_exec(msg);
    case proto::Body::Authorization: return exec_.on_authorization(msg);
    case proto::Body::ReadRequest:
    case proto::Body::WriteRequest:
    case proto::Body::ListRequest: return files_.on_file(msg, payload);
    case proto::Body::ScopeCreate: return scopes_.on_create(msg);
    case proto::Body::ScopeClose: return scopes_.on_close(msg);
    case proto::Body::ScopeListRequest: return scopes_.on_list(msg);
    case proto::Body::Poll: return background_.on_poll(msg);
    case proto::Body::BackgroundStop: return background_.on_stop(msg);
    case proto::Body::WorkerStart: return workers_.on_start(msg);
    case proto::Body::WorkerEval: return workers_.on_eval(msg);
    case proto::Body::HostReply: return workers_.on_host_reply(msg);
    case proto::Body::WorkerStop: return workers_.on_stop(msg);
    case proto::Body::WorkerListRequest: return workers_.on_list(msg);
    case proto::Body::WorkerLogsRequest: return workers_.on_logs(msg);
    default:
      send_error(msg.request_id(), ErrorCode::malformed,
                 std::string(proto::body_name(type)) + " is not a message a client sends");
  }
}

void Connection::on_hello(const proto::Message& msg) {
  const proto::Hello* hello = msg.body_as_Hello();
  if (hello_done_) return send_error(msg.request_id(), ErrorCode::malformed, "hello already received on this connection");
  if (hello->protocol_version() != proto::kProtocolVersion)
    return send_error(msg.request_id(), ErrorCode::version_mismatch,
                      "protocol version " + std::to_string(hello->protocol_version()) +
                          " is not supported; this supervisor speaks " + std::to_string(proto::kProtocolVersion));
  hello_done_ = true;
  hello_deadline_.cancel();
  queue(proto::make_hello_reply(kServerVersion, layer_infos(), ctx_.options.max_frame));
}

// A Cancel names an evaluation or a command; request ids are one space for both.
void Connection::on_cancel(const proto::Message& msg) {
  const std::uint64_t id = msg.request_id();
  if (workers_.on_cancel(id) || exec_.on_cancel(msg)) return;
  send_error(id, ErrorCode::unknown_request_id, "no request " + std::to_string(id) + " is in flight");
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
