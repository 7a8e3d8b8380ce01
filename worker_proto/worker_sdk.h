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
// EOF on the fd means the supervisor is gone: serve() returns true and the worker should exit.
//
//   int main() {
//     std::string error;
//     auto conn = corral::proto::WorkerConnection::from_env(error);
//     if (!conn) { std::fprintf(stderr, "%s\n", error.c_str()); return 1; }
//     bool ok = conn->serve([](std::string_view request, corral::proto::WorkerConnection& c) {
//       std::string reply, err;
//       if (!c.host_call("question", reply, err)) return "failed: " + err;
//       return std::string(request) + reply;
//     }, error);
//     return ok ? 0 : 1;
//   }
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "worker_proto/codec.h"

namespace corral::proto {

class WorkerConnection {
 public:
  // Frames over this size are refused in both directions (the supervisor's own limit may be
  // lower: keep replies well under its max frame).
  static constexpr std::uint32_t kMaxFrame = 64u << 20;

  using Handler = std::function<std::string(std::string_view request, WorkerConnection&)>;

  // Adopts the fd named by CORRAL_WORKER_FD, marks it close-on-exec and removes the variable
  // from the environment, so programs the worker starts inherit neither. nullptr + error if
  // the variable is missing or does not name an open fd.
  static std::unique_ptr<WorkerConnection> from_env(std::string& error);
  explicit WorkerConnection(int fd);  // adopts `fd`
  ~WorkerConnection();
  WorkerConnection(const WorkerConnection&) = delete;
  WorkerConnection& operator=(const WorkerConnection&) = delete;

  // Answers evaluations until the supervisor closes the fd (returns true) or the channel
  // breaks (returns false with `error`: read/write failure, malformed or oversized frame, an
  // Error frame from the supervisor, a message that makes no sense). Every Evaluate gets one
  // EvalReply: a handler that throws gets "corral worker error: <what()>" as its reply, and a
  // reply over the frame limit is replaced by an error text.
  bool serve(const Handler& handler, std::string& error);

  // Host calls, only from inside the handler (same thread). host_call() sends one call and
  // waits for its reply. false + error when the host answered with an error (the host's
  // message, verbatim) or the channel is gone (then closed() is true and serve() ends after
  // the handler returns, sending nothing).
  bool host_call(std::string_view data, std::string& reply, std::string& error);
  // The same in two steps, to keep several calls in flight: start_host_call() returns the
  // call id (0 + error on failure); wait_host_call() waits for that id's reply, keeping
  // replies to other calls of this evaluation for their own wait.
  std::uint64_t start_host_call(std::string_view data, std::string& error);
  bool wait_host_call(std::uint64_t call_id, std::string& reply, std::string& error);

  // The evaluation in progress (its request_id), 0 outside the handler.
  std::uint64_t evaluation() const { return in_eval_ ? eval_id_ : 0; }
  // True once the channel is unusable (EOF, I/O or protocol error).
  bool closed() const { return !broken_.empty(); }

 private:
  enum class Read { frame, eof, error };
  Read read_frame(std::vector<std::uint8_t>& payload, std::string& error);
  bool write_frame(const Frame& frame, std::string& error);
  void fail(std::string why, bool eof = false);

  struct Answer {
    bool ok = false;
    std::string data;  // the reply, or the host's error
  };

  int fd_;
  bool in_eval_ = false;
  std::uint64_t eval_id_ = 0;
  std::uint64_t next_call_id_ = 1;
  std::set<std::uint64_t> pending_;           // calls sent, not answered yet
  std::map<std::uint64_t, Answer> answers_;   // answered, not waited for yet
  std::string broken_;                        // why the channel is unusable; empty: fine
  bool eof_ = false;                          // ...and it is because the supervisor left
};

}  // namespace corral::proto
