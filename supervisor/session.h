// Session: what a request handler (supervisor/requests.h) may use of the connection it serves:
// the shared Context, the peer, the connection's implicit scope, and the reply queue with its
// reservations. Connection implements it over a Transport; the handlers' unit tests implement
// it over a vector of frames (tests/handlers_test.cc).
//
// A callback that may run after the request (a command's end, a worker's reply) holds
// weak() and does nothing once the session is gone; it never holds the session itself.
#pragma once

#include <asio/io_context.hpp>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string_view>

#include "runtime/execution.h"
#include "supervisor/context.h"
#include "supervisor/peer.h"
#include "supervisor/scope.h"
#include "worker_proto/codec.h"

namespace corral::supervisor {

class Session {
 public:
  virtual ~Session() = default;

  virtual Context& ctx() = 0;
  virtual asio::io_context& io() = 0;
  virtual const Peer& peer() const = 0;
  // The connection's implicit scope: what a request without a named scope runs in.
  virtual const std::shared_ptr<Scope>& implicit_scope() const = 0;
  virtual std::weak_ptr<Session> weak() = 0;

  // Replies (Transport::queue, reserve, release, congested, wake_reader).
  virtual void queue(proto::Frame frame, std::function<void()> on_dropped = {}) = 0;
  virtual void reserve(std::uint64_t id, std::uint64_t bytes) = 0;
  virtual void release(std::uint64_t id) = 0;
  virtual void hold(std::uint64_t bytes) = 0;
  virtual void unhold(std::uint64_t bytes) = 0;
  virtual bool congested() const = 0;
  virtual void wake_reader() = 0;
  virtual bool closed() const = 0;
  // True if a command or an evaluation of this session runs under `id` (one id space for both).
  virtual bool in_flight(std::uint64_t id) const = 0;

  void send_error(std::uint64_t id, proto::ErrorCode code, std::string_view message);
  // The scope a request names (empty: `fallback`), if this peer may act on it; else sends the
  // Error for `id` and returns null.
  std::shared_ptr<Scope> scope_for(std::uint64_t id, const flatbuffers::String* name,
                                   const std::shared_ptr<Scope>& fallback);
  // The engine's spec for `req` in `scope` (defaults, limits, the host's layers, the launcher
  // pool), or nullopt after sending the Error for `id`. The scope's temp dir and network
  // namespace are filled in by the spec's before_launch, on the launcher pool.
  std::optional<ExecSpec> prepare_spec(std::uint64_t id, const proto::ExecRequest& req, Scope& scope,
                                       const char* cgroup_prefix);
};

}  // namespace corral::supervisor
