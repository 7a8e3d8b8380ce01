#include "supervisor/connection.h"

#include <spdlog/spdlog.h>

#include <array>
#include <asio/co_spawn.hpp>
#include <asio/experimental/as_tuple.hpp>
#include <asio/read.hpp>
#include <asio/use_awaitable.hpp>
#include <asio/write.hpp>

#include "supervisor/exec_request.h"
#include "supervisor/file_requests.h"
#include "worker_proto/messages.h"

namespace corral::supervisor {

using proto::ErrorCode;
constexpr auto use_tuple = asio::experimental::as_tuple(asio::use_awaitable);
// The writer hands the kernel up to this much per write: fewer syscalls under streaming.
constexpr std::size_t kWriteBatchBytes = 256 * 1024;

Connection::Connection(asio::io_context& io, asio::local::stream_protocol::socket socket, Peer peer,
                       Context& ctx)
    : io_(io), socket_(std::move(socket)), peer_(peer), ctx_(ctx), scope_(ctx.options.temp_root),
      writer_wake_(io) {
  writer_wake_.expires_at(std::chrono::steady_clock::time_point::max());
  ++ctx_.connections;
}

Connection::~Connection() { --ctx_.connections; }

void Connection::start() {
  auto self = shared_from_this();
  asio::co_spawn(io_, reader(), [self](std::exception_ptr e) {
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
  // The scope's commands die with the connection; their done handlers still run (and hold
  // this object alive) until each is reaped, then the scope's temp dir goes with us.
  for (auto& [id, exec] : running_) exec.terminate();
  std::error_code ignored;
  socket_.shutdown(asio::socket_base::shutdown_both, ignored);
  socket_.close(ignored);
  writer_wake_.cancel();
  queue_.clear();
  queued_bytes_ = 0;
}

asio::awaitable<void> Connection::reader() {
  auto self = shared_from_this();
  std::array<std::uint8_t, proto::kHeaderBytes> header;
  std::vector<std::uint8_t> payload;
  while (!closed_ && !flush_then_close_) {
    auto [ec, n] = co_await asio::async_read(socket_, asio::buffer(header), use_tuple);
    if (ec) break;
    const std::uint32_t len = proto::read_length(header.data());
    if (len > ctx_.options.max_frame) {
      // The stream cannot be resynchronised without reading the payload: refuse and close.
      send_error(0, ErrorCode::frame_too_large,
                 "frame of " + std::to_string(len) + " bytes is over the " +
                     std::to_string(ctx_.options.max_frame) + "-byte limit; closing the connection");
      flush_then_close_ = true;
      writer_wake_.cancel();
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
    dispatch(*msg);
    // Don't keep a 16 MiB buffer around for a connection that sent one big frame.
    if (payload.capacity() > 1 << 20) payload = {};
  }
}

asio::awaitable<void> Connection::writer() {
  auto self = shared_from_this();
  std::vector<proto::Frame> batch;
  std::vector<asio::const_buffer> buffers;
  while (!closed_) {
    if (queue_.empty()) {
      if (flush_then_close_) break;
      co_await writer_wake_.async_wait(use_tuple);
      continue;
    }
    batch.clear();
    buffers.clear();
    std::size_t bytes = 0;
    while (!queue_.empty() && (batch.empty() || bytes + queue_.front().size() <= kWriteBatchBytes)) {
      bytes += queue_.front().size();
      batch.push_back(std::move(queue_.front()));
      queue_.pop_front();
      buffers.emplace_back(asio::buffer(batch.back()));
    }
    auto [ec, n] = co_await asio::async_write(socket_, buffers, use_tuple);
    if (closed_) break;
    queued_bytes_ -= bytes;
    update_backpressure();
    if (ec) break;
  }
}

void Connection::queue(proto::Frame frame) {
  if (closed_) return;
  queued_bytes_ += frame.size();
  queue_.push_back(std::move(frame));
  writer_wake_.cancel();
  update_backpressure();
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

void Connection::dispatch(const proto::Message& msg) {
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
    case proto::Body::ListRequest: return on_file(msg);
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
  queue(proto::make_hello_reply(kServerVersion, layer_infos(), ctx_.options.max_frame));
}

void Connection::on_exec(const proto::Message& msg) {
  const std::uint64_t id = msg.request_id();
  if (id == 0) {
    send_error(0, ErrorCode::invalid_request, "request_id 0 is reserved for connection-level errors");
    return;
  }
  if (running_.count(id)) {
    send_error(id, ErrorCode::duplicate_request_id,
               "request id " + std::to_string(id) + " is already in flight; the running request is unaffected");
    return;
  }
  if (running_.size() >= ctx_.options.max_in_flight) {
    send_error(id, ErrorCode::too_many_requests,
               "this connection already has " + std::to_string(running_.size()) +
                   " requests in flight (serve --max-in-flight)");
    return;
  }
  auto spec = to_spec(*msg.body_as_ExecRequest(), ctx_.options);
  if (!spec.ok()) {
    send_error(id, ErrorCode::invalid_request, spec.status().message());
    return;
  }
  if (Status st = ctx_.host->check(*spec->policy); !st.ok()) {
    send_error(id, ErrorCode::unsupported, st.message());
    return;
  }
  auto temp = scope_temp_dir();
  if (!temp.ok()) {
    send_error(id, ErrorCode::internal, "cannot create the scope's temp dir: " + temp.status().message());
    return;
  }
  spec->temp_dir = *temp;
  spec->host = ctx_.host.get();
  spec->cgroup_name = "cmd-" + std::to_string(++ctx_.launches);

  auto self = shared_from_this();
  auto sink = [this, self, id](StreamId stream, std::string_view data) {
    queue(proto::make_output(id, stream == StreamId::err ? proto::Stream::err : proto::Stream::out, data));
  };
  ExecSpec logged = spec.value();
  logged.stdin_data.reset();
  auto done = [this, self, id, logged = std::move(logged)](Result result) {
    on_exec_done(id, logged, std::move(result));
  };
  ++ctx_.running_commands;
  auto [it, inserted] = running_.emplace(id, Execution::start(io_, std::move(spec).value(), sink, done));
  if (paused_) it->second.pause_output();
}

void Connection::on_exec_done(std::uint64_t id, const ExecSpec& spec, Result result) {
  --ctx_.running_commands;
  spdlog::info(
      "launch peer_uid={} peer_pid={} request={} {} cwd=\"{}\" {} timeout_ms={} max_output={} "
      "status={} exit_code={} signal={} wall_ms={} output_bytes={} truncated={}{}{}",
      peer_.uid, peer_.pid, id, describe_command(spec), spec.cwd.empty() ? spec.temp_dir : spec.cwd,
      describe_policy(spec), spec.timeout.count(), spec.max_output, status_name(result.status),
      result.exit_code ? std::to_string(*result.exit_code) : "null", result.signal, result.wall_ms,
      result.out_bytes + result.err_bytes, result.output_truncated,
      result.setup_step.empty() ? "" : " setup_step=" + result.setup_step,
      result.setup_errno ? " setup_errno=" + std::to_string(result.setup_errno) : "");
  queue(make_exec_result(id, result));
  running_.erase(id);
}

StatusOr<std::string> Connection::scope_temp_dir() {
  auto temp = scope_.temp_dir();
  if (temp.ok()) {
    if (Status st = ctx_.host->adopt_temp_dir(*temp); !st.ok()) return st;
  }
  return temp;
}

void Connection::on_file(const proto::Message& msg) {
  const std::uint64_t id = msg.request_id();
  if (id == 0) {
    send_error(0, ErrorCode::invalid_request, "request_id 0 is reserved for connection-level errors");
    return;
  }
  auto temp = scope_temp_dir();
  if (!temp.ok()) {
    send_error(id, ErrorCode::internal, "cannot create the scope's temp dir: " + temp.status().message());
    return;
  }
  FileContext fc{*temp, ctx_.options.max_frame};
  proto::Frame reply;
  switch (msg.body_type()) {
    case proto::Body::ReadRequest: reply = handle_read(id, *msg.body_as_ReadRequest(), fc); break;
    case proto::Body::WriteRequest: reply = handle_write(id, *msg.body_as_WriteRequest(), fc); break;
    default: reply = handle_list(id, *msg.body_as_ListRequest(), fc); break;
  }
  queue(std::move(reply));
}

void Connection::on_cancel(const proto::Message& msg) {
  const std::uint64_t id = msg.request_id();
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
  info.pid = static_cast<std::uint32_t>(::getpid());
  info.uptime_ms = static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - ctx_.started).count());
  info.connections = ctx_.connections;
  info.running_commands = ctx_.running_commands;
  info.socket_path = ctx_.options.socket_path;
  queue(proto::make_status_reply(msg.request_id(), info));
}

std::vector<proto::LayerInfo> Connection::layer_infos() const {
  std::vector<proto::LayerInfo> layers;
  for (const auto& l : ctx_.layers) layers.push_back({l.name, l.available, l.reason});
  return layers;
}

}  // namespace corral::supervisor
