// The C++ client library: a blocking connection to a corral supervisor, used by the CLI
// and the tests. One Client is one connection; it is not thread-safe.
//
// connect() says hello and keeps the server's reply (version, layers). send()/receive()
// move single frames; exec() runs one command to its final reply, passing output chunks to
// a callback as they arrive. Every call returns a Result (worker_proto/result.h): the value,
// or a Failure whose kind tells a receive() timeout (the connection is still open, though a
// frame may have been cut in half) from a peer that went away. After any other failure the
// connection is best closed.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "worker_proto/codec.h"
#include "worker_proto/messages.h"
#include "worker_proto/result.h"

namespace corral::proto {

// How long connect() waits for the HelloReply: a supervisor admits a new client in
// milliseconds, and something that accepts and never answers must not hang a client forever.
inline constexpr int kHelloReplyTimeoutMs = 10'000;

// The default socket path (docs/protocol.md "Transport"): $CORRAL_SOCKET, else $XDG_RUNTIME_DIR/corral/corral.sock,
// else /run/corral/corral.sock for root, else /tmp/corral-$UID/corral.sock.
std::string default_socket_path();

// A received, verified message together with the bytes it points into. Move-only: a copy
// would get its own payload while `msg` still pointed into the original's (a moved vector
// keeps its buffer, so a move is safe).
struct Received {
  Received() = default;
  Received(Received&&) = default;
  Received& operator=(Received&&) = default;
  Received(const Received&) = delete;
  Received& operator=(const Received&) = delete;

  std::vector<std::uint8_t> payload;
  const Message* msg = nullptr;
};

// What exec() collects: the final message (ExecResult, or Error) and, when no chunk callback
// took it, the streamed output.
struct ExecReply {
  Received final;
  std::string out, err;
  const ExecResult* result() const { return final.msg ? final.msg->body_as_ExecResult() : nullptr; }
  const Error* error() const { return final.msg ? final.msg->body_as_Error() : nullptr; }
};

class Client {
 public:
  // Connects to `path` and exchanges hellos. The failure names the path when nobody listens.
  static Result<std::unique_ptr<Client>> connect(const std::string& path,
                                                 std::string_view client_name = "corral-client",
                                                 std::uint32_t max_frame = kDefaultMaxFrame);
  // Connects without the hello (for tests of what a server does before it).
  static Result<std::unique_ptr<Client>> connect_raw(const std::string& path,
                                                     std::uint32_t max_frame = kDefaultMaxFrame);
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  Result<void> send(const Frame& frame);
  Result<void> send_bytes(const void* data, std::size_t n);  // raw bytes, for malformed-input tests
  // Blocks until one frame arrives, or `timeout_ms` passes (-1 waits forever): then the
  // failure's kind is timeout, where a peer that went away is closed.
  Result<Received> receive(int timeout_ms = -1);

  // Sends `frame` (a request with `request_id`) and waits for that id's final reply (anything
  // but an OutputChunk); a connection-level Error (id 0) also ends the wait.
  Result<Received> call(std::uint64_t request_id, const Frame& frame);

  using ChunkFn = std::function<void(Stream, std::string_view)>;
  // Judges an authorized launch from its description (JSON); true grants it.
  using AuthorizeFn = std::function<bool(std::string_view description)>;
  // Sends an ExecRequest with `request_id` and collects replies for that id until its final
  // reply. Frames for other ids are dropped. Output goes to `on_chunk` as it arrives; without
  // one it is collected in ExecReply::out and ::err (a caller that streams never holds all of
  // it: 64 MiB of output is not 64 MiB of client memory). `authorize` answers an
  // AuthorizationRequest (args.authorize), and without it every request is denied. A reply
  // that is the supervisor's Error is a value (ExecReply::error()), not a failure.
  Result<ExecReply> exec(std::uint64_t request_id, const ExecArgs& args, const ChunkFn& on_chunk,
                         const AuthorizeFn& authorize = nullptr);

  const std::vector<LayerInfo>& layers() const { return layers_; }
  const std::string& server_version() const { return server_version_; }
  std::uint32_t server_max_frame() const { return server_max_frame_; }
  int fd() const { return fd_; }

 private:
  Client(int fd, std::uint32_t max_frame) : fd_(fd), max_frame_(max_frame) {}
  Result<void> hello(std::string_view client_name);

  int fd_;
  std::uint32_t max_frame_;
  std::vector<LayerInfo> layers_;
  std::string server_version_;
  std::uint32_t server_max_frame_ = 0;
};

}  // namespace corral::proto
