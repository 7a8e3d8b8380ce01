// The worker side of a worker channel (docs/protocol.md "Between the supervisor and a worker"), for worker programs
// written in C++. Blocking, single-threaded, no Asio; the Python twin is
// worker_proto/python/corral_worker.py.
//
// The supervisor starts the worker with one end of a socketpair as the fd named by
// CORRAL_WORKER_FD (stdout/stderr stay plain logs). On that fd, framed as in codec.h:
//   supervisor -> worker  Message{N, Evaluate{data}}        evaluation N (one at a time)
//   worker -> supervisor  Message{N, HostCall{id, data}}    during N, any number in flight
//   supervisor -> worker  Message{N, HostReply{id, data, error}}
//   worker -> supervisor  Message{N, EvalReply{data}}       ends evaluation N
//   supervisor -> worker  Message{0, Error{code, message}}  the worker broke the protocol
// EOF on the fd means the supervisor is gone: serve() returns success and the worker should
// exit. Every call returns a Result (worker_proto/result.h): the value or a Failure.
//
//   int main() {
//     auto conn = corral::proto::WorkerConnection::from_env();
//     if (!conn) { std::fprintf(stderr, "%s\n", conn.error().message.c_str()); return 1; }
//     auto served = (*conn)->serve([](std::string_view request, corral::proto::WorkerConnection& c) {
//       auto reply = c.host_call("question");
//       if (!reply) return "failed: " + reply.error().message;
//       return std::string(request) + *reply;
//     });
//     return served ? 0 : 1;
//   }
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "worker_proto/codec.h"
#include "worker_proto/result.h"

namespace corral::proto {

class WorkerConnection {
 public:
  // Frames over this size are refused in both directions (the supervisor's own limit may be
  // lower: keep replies well under its max frame).
  static constexpr std::uint32_t kMaxFrame = 64u << 20;

  using Handler = std::function<std::string(std::string_view request, WorkerConnection&)>;

  // Adopts the fd named by CORRAL_WORKER_FD, marks it close-on-exec and removes the variable
  // from the environment, so programs the worker starts inherit neither. Fails if the
  // variable is missing or does not name an open fd.
  static Result<std::unique_ptr<WorkerConnection>> from_env();
  explicit WorkerConnection(int fd);  // adopts `fd`
  ~WorkerConnection();
  WorkerConnection(const WorkerConnection&) = delete;
  WorkerConnection& operator=(const WorkerConnection&) = delete;

  // Answers evaluations until the supervisor closes the fd (success) or the channel breaks
  // (the failure says why: read/write failure, malformed or oversized frame, an Error frame
  // from the supervisor, a message that makes no sense). Every Evaluate gets one EvalReply: a
  // handler that throws gets "corral worker error: <what()>" as its reply, and a reply over
  // the frame limit is replaced by an error text.
  Result<void> serve(const Handler& handler);

  // Host calls, only from inside the handler (same thread). host_call() sends one call and
  // returns its reply. It fails (kind refused) when the host answered with an error (the
  // host's message, verbatim), or when the channel is gone (then closed() is true and
  // serve() ends after the handler returns, sending nothing).
  Result<std::string> host_call(std::string_view data);
  // The same in two steps, to keep several calls in flight: start_host_call() returns the
  // call id (never 0); wait_host_call() waits for that id's reply, keeping replies to other
  // calls of this evaluation for their own wait.
  Result<std::uint64_t> start_host_call(std::string_view data);
  Result<std::string> wait_host_call(std::uint64_t call_id);

  // The evaluation in progress (its request_id), 0 outside the handler.
  std::uint64_t evaluation() const { return in_eval_ ? eval_id_ : 0; }
  // True once the channel is unusable (EOF, I/O or protocol error).
  bool closed() const { return broken_.has_value(); }

 private:
  using Payload = std::vector<std::uint8_t>;
  // One frame's payload, or nullopt at a clean EOF (between frames).
  Result<std::optional<Payload>> read_frame();
  Result<void> write_frame(const Frame& frame);
  void fail(Failure why, bool eof = false);

  int fd_;
  bool in_eval_ = false;
  std::uint64_t eval_id_ = 0;
  std::uint64_t next_call_id_ = 1;
  std::set<std::uint64_t> pending_;           // calls sent, not answered yet
  std::map<std::uint64_t, Result<std::string>> answers_;  // answered, not waited for yet
  std::optional<Failure> broken_;             // why the channel is unusable
  bool eof_ = false;                          // ...and it is because the supervisor left
};

}  // namespace corral::proto
