// Connection: one client of the supervisor. It owns the client's Transport (the socket, its
// reader and writer, the bounded reply queue: supervisor/transport.h) and one handler per
// family of requests (supervisor/requests.h), and is the Session those handlers use.
//
// It routes each frame, answers Hello and StatusRequest itself, and holds the peer's slot of
// --max-connections and of its uid's quota while the socket is open. The connection's implicit
// scope owns everything it started: when the client goes away every command is terminated,
// reaped, and the scope's temp dir removed. A client that has not said hello within the hello
// deadline is disconnected.
//
// Lifetime: the reader and writer coroutines hold the connection; every other callback holds
// it weakly (Session::weak()).
#pragma once

#include <asio/io_context.hpp>
#include <asio/local/stream_protocol.hpp>
#include <asio/steady_timer.hpp>
#include <memory>

#include "supervisor/context.h"
#include "supervisor/peer.h"
#include "supervisor/requests.h"
#include "supervisor/scope.h"
#include "supervisor/session.h"
#include "supervisor/transport.h"

namespace corral::supervisor {

class Connection final : public Session, public Transport::Owner, public std::enable_shared_from_this<Connection> {
 public:
  Connection(asio::io_context& io, asio::local::stream_protocol::socket socket, Peer peer, Context& ctx);
  ~Connection() override;

  void start();
  // Terminates every command and closes the socket. Idempotent.
  void close();

  // Session
  Context& ctx() override { return ctx_; }
  asio::io_context& io() override { return io_; }
  const Peer& peer() const override { return peer_; }
  const std::shared_ptr<Scope>& implicit_scope() const override { return scope_; }
  std::weak_ptr<Session> weak() override { return std::weak_ptr<Connection>(shared_from_this()); }
  void queue(proto::Frame frame, std::function<void()> on_dropped = {}) override {
    transport_.queue(std::move(frame), std::move(on_dropped));
  }
  void reserve(std::uint64_t id, std::uint64_t bytes) override { transport_.reserve(id, bytes); }
  void release(std::uint64_t id) override { transport_.release(id); }
  void hold(std::uint64_t bytes) override { transport_.hold(bytes); }
  void unhold(std::uint64_t bytes) override { transport_.unhold(bytes); }
  bool congested() const override { return transport_.congested(); }
  void wake_reader() override { transport_.wake_reader(); }
  bool closed() const override { return closed_; }
  bool in_flight(std::uint64_t id) const override { return exec_.running(id) || workers_.evaluating(id); }

  // Transport::Owner
  void on_frame(const proto::Message& msg, const std::vector<std::uint8_t>& payload) override;
  bool holds_reading() const override { return workers_.holds_reading(); }
  void on_pressure(bool over) override { exec_.pause_output(over); }
  void on_drained() override { workers_.drained(); }

 private:
  void on_hello(const proto::Message& msg);
  void on_status(const proto::Message& msg);
  void on_cancel(const proto::Message& msg);
  void release_slot();
  std::vector<proto::LayerInfo> layer_infos() const;

  asio::io_context& io_;
  Peer peer_;
  Context& ctx_;
  std::shared_ptr<Scope> scope_;  // the implicit scope
  Transport transport_;
  asio::steady_timer hello_deadline_;
  ExecRequests exec_{*this};
  FileRequests files_{*this};
  ScopeRequests scopes_{*this};
  BackgroundRequests background_{*this};
  WorkerRequests workers_{*this};
  bool counted_ = true;  // holds a slot of --max-connections and of its uid's quota
  bool hello_done_ = false;
  bool closed_ = false;
};

}  // namespace corral::supervisor
