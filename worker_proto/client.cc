#include "worker_proto/client.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace corral::proto {

std::string default_socket_path() {
  if (const char* s = std::getenv("CORRAL_SOCKET"); s && *s) return s;
  if (const char* x = std::getenv("XDG_RUNTIME_DIR"); x && *x) return std::string(x) + "/corral/corral.sock";
  if (::geteuid() == 0) return "/run/corral/corral.sock";
  return "/tmp/corral-" + std::to_string(::geteuid()) + "/corral.sock";
}

namespace {

Failure failure(Failure::Kind kind, std::string message) { return {kind, std::move(message)}; }

}  // namespace

Result<std::unique_ptr<Client>> Client::connect_raw(const std::string& path, std::uint32_t max_frame) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof addr.sun_path)
    return failure(Failure::Kind::invalid, "socket path is too long (" + std::to_string(path.size()) +
                                               " bytes; the limit is " + std::to_string(sizeof addr.sun_path - 1) +
                                               "): " + path);
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return failure(Failure::Kind::io, std::string("socket: ") + std::strerror(errno));
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) < 0) {
    int e = errno;
    ::close(fd);
    std::string message = "cannot connect to " + path + ": " + std::strerror(e);
    if (e == ENOENT || e == ECONNREFUSED) message += " (is `corral serve` running?)";
    return failure(Failure::Kind::io, std::move(message));
  }
  return std::unique_ptr<Client>(new Client(fd, max_frame));
}

Result<std::unique_ptr<Client>> Client::connect(const std::string& path, std::string_view client_name,
                                                std::uint32_t max_frame) {
  auto c = connect_raw(path, max_frame);
  if (!c) return c;
  if (auto said = (*c)->hello(client_name); !said) return said.error();
  return c;
}

Client::~Client() {
  if (fd_ >= 0) ::close(fd_);
}

Result<void> Client::hello(std::string_view client_name) {
  if (auto sent = send(make_hello(client_name)); !sent) {
    // A supervisor that refuses a peer writes why and closes at once; the hello may then meet
    // a closed socket, but the reason is still there to read.
    if (auto r = receive(1000); r && r->msg->body_as_Error())
      return failure(Failure::Kind::refused,
                     "the supervisor refused the connection: " + str(r->msg->body_as_Error()->message()));
    return sent.error();
  }
  auto r = receive(kHelloReplyTimeoutMs);
  if (!r && r.error().kind == Failure::Kind::timeout)
    return failure(Failure::Kind::timeout, "the supervisor accepted the connection but did not answer the hello within " +
                                               std::to_string(kHelloReplyTimeoutMs / 1000) + " s");
  if (!r) return r.error();
  if (const Error* e = r->msg->body_as_Error())
    return failure(Failure::Kind::refused, "the supervisor refused the hello: " + str(e->message()));
  const HelloReply* h = r->msg->body_as_HelloReply();
  if (!h)
    return failure(Failure::Kind::protocol, std::string("expected HelloReply, got ") + body_name(r->msg->body_type()));
  if (h->protocol_version() != kProtocolVersion)
    return failure(Failure::Kind::protocol, "protocol version mismatch: server " +
                                                std::to_string(h->protocol_version()) + ", client " +
                                                std::to_string(kProtocolVersion));
  layers_ = read_layers(h->layers());
  server_version_ = str(h->server_version());
  server_max_frame_ = h->max_frame_bytes();
  // Accept what the server may send (a read window is bounded by its frame limit).
  if (server_max_frame_ > max_frame_ && server_max_frame_ <= kMaxMaxFrame) max_frame_ = server_max_frame_;
  return {};
}

Result<void> Client::send_bytes(const void* data, std::size_t n) {
  if (const int err = write_all(fd_, data, n))
    return failure(write_failure_kind(err), std::string("send: ") + std::strerror(err));
  return {};
}

Result<void> Client::send(const Frame& frame) { return send_bytes(frame.data(), frame.size()); }

Result<Received> Client::receive(int timeout_ms) {
  FrameIn in = read_frame(fd_, max_frame_, timeout_ms);
  switch (in.end) {
    case FrameIn::End::frame: break;
    case FrameIn::End::timeout: return failure(Failure::Kind::timeout, "timed out waiting for the supervisor");
    case FrameIn::End::io: return failure(Failure::Kind::io, std::string("receive: ") + std::strerror(in.err));
    case FrameIn::End::eof: return failure(Failure::Kind::closed, "the supervisor closed the connection");
    case FrameIn::End::truncated:
      return failure(Failure::Kind::closed, in.in_header ? "the supervisor closed the connection"
                                                         : "the supervisor closed the connection mid-frame");
    case FrameIn::End::oversized:
      return failure(Failure::Kind::protocol, "the supervisor sent a frame of " + std::to_string(in.length) +
                                                  " bytes, over the " + std::to_string(max_frame_) + "-byte limit");
  }
  Received out;
  out.payload = std::move(in.payload);
  DecodeError err;
  out.msg = verify_payload(out.payload, max_frame_, err);
  if (!out.msg) return failure(Failure::Kind::protocol, "bad frame from the supervisor: " + err.message);
  return out;
}

Result<Received> Client::call(std::uint64_t request_id, const Frame& frame) {
  if (auto sent = send(frame); !sent) return sent.error();
  for (;;) {
    auto reply = receive();
    if (!reply) return reply;
    const std::uint64_t id = reply->msg->request_id();
    if (id == request_id && reply->msg->body_type() != Body::OutputChunk) return reply;
    if (id == 0 && reply->msg->body_type() == Body::Error) return reply;
  }
}

Result<ExecReply> Client::exec(std::uint64_t request_id, const ExecArgs& args, const ChunkFn& on_chunk,
                               const AuthorizeFn& authorize) {
  if (auto sent = send(make_exec(request_id, args)); !sent) return sent.error();
  ExecReply reply;
  for (;;) {
    auto r = receive();
    if (!r) return r.error();
    if (r->msg->request_id() != request_id) {
      // A connection-level error (id 0) ends this exchange too.
      if (r->msg->request_id() == 0 && r->msg->body_type() == Body::Error) {
        reply.final = std::move(*r);
        return reply;
      }
      continue;
    }
    if (const AuthorizationRequest* a = r->msg->body_as_AuthorizationRequest()) {
      const bool grant = authorize && authorize(str(a->description()));
      auto sent = send(make_authorization(request_id, grant, grant ? "" : "refused by the client's authorizer"));
      if (!sent) return sent.error();
      continue;
    }
    if (const OutputChunk* c = r->msg->body_as_OutputChunk()) {
      std::string_view data;
      if (c->data()) data = {reinterpret_cast<const char*>(c->data()->data()), c->data()->size()};
      if (on_chunk) on_chunk(c->stream(), data);
      else (c->stream() == Stream::err ? reply.err : reply.out).append(data);
      continue;
    }
    reply.final = std::move(*r);
    return reply;
  }
}

}  // namespace corral::proto
