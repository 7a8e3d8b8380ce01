// The request handlers of one connection, one class per family. Each gets its session
// (supervisor/session.h) and keeps the state of its own requests; Connection routes each
// frame to one of them (Connection::on_frame) and tells each when the connection closes.
//
//   ExecRequests        ExecRequest (foreground, background, authorized), Cancel, Authorization
//   FileRequests        ReadRequest, WriteRequest, ListRequest: one at a time, on the blocking pool
//   ScopeRequests       ScopeCreate, ScopeClose, ScopeListRequest
//   BackgroundRequests  Poll, BackgroundStop
//   WorkerRequests      WorkerStart, WorkerEval, HostReply, WorkerStop, WorkerListRequest,
//                       WorkerLogsRequest, and Cancel of an evaluation
//
// Implemented in exec_request.cc, file_requests.cc, scope_requests.cc, background_requests.cc
// and worker_requests.cc.
#pragma once

#include <asio/steady_timer.hpp>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <vector>

#include "runtime/execution.h"
#include "supervisor/session.h"
#include "worker_proto/messages.h"

namespace corral::supervisor {

class Worker;

// What a final reply carries besides its payload (ids, figures, messages), reserved with it.
inline constexpr std::uint64_t kReplyOverheadBytes = 4 * 1024;

class ExecRequests {
 public:
  explicit ExecRequests(Session& s) : s_(s) {}
  void on_exec(const proto::Message& msg);
  // False if no command of this session runs under that id.
  bool on_cancel(const proto::Message& msg);
  void on_authorization(const proto::Message& msg);
  bool running(std::uint64_t id) const { return running_.count(id) > 0; }
  // Back-pressure: stop or resume reading every command's output.
  void pause_output(bool paused);
  // Terminates every command (their results are still audited, never sent).
  void close();
  // The audit line of one launch. Static: a background command's line is written after its
  // connection may be long gone.
  static void log_launch(const Peer& peer, std::uint64_t id, const ExecSpec& spec, const Result& result);

 private:
  void on_done(std::uint64_t id, Result result);

  Session& s_;
  std::map<std::uint64_t, Execution> running_;
  // Authorized launches waiting for this client's answer: their deadline timers.
  std::map<std::uint64_t, std::unique_ptr<asio::steady_timer>> authorizations_;
  bool paused_ = false;
};

class FileRequests {
 public:
  explicit FileRequests(Session& s) : s_(s) {}
  // `payload` is the frame `msg` was verified in: the job serves its own copy, off the loop.
  void on_file(const proto::Message& msg, const std::vector<std::uint8_t>& payload);
  void close();  // drops the waiting requests; one that is running finds the session gone

 private:
  // Runs the next waiting request on the blocking pool, if none of ours is running.
  void next();

  Session& s_;
  // Served one at a time (in the order they came, so that a write and a later read of the
  // same file keep their order). Each holds its request and its reply's room reserved against
  // --max-queued until its reply is queued.
  struct Job {
    std::uint64_t id;
    std::vector<std::uint8_t> payload;  // the request frame
    std::uint64_t held;                 // bytes held on the session
    std::function<proto::Frame(const proto::Message&)> serve;
  };
  std::deque<Job> jobs_;
  bool running_ = false;
};

class ScopeRequests {
 public:
  explicit ScopeRequests(Session& s) : s_(s) {}
  void on_create(const proto::Message& msg);
  void on_close(const proto::Message& msg);
  void on_list(const proto::Message& msg);
  void close();  // closes the scopes this session made and did not detach

 private:
  Session& s_;
  std::vector<std::weak_ptr<Scope>> owned_;
};

class BackgroundRequests {
 public:
  explicit BackgroundRequests(Session& s) : s_(s) {}
  void on_poll(const proto::Message& msg);
  void on_stop(const proto::Message& msg);

 private:
  Session& s_;
};

class WorkerRequests {
 public:
  explicit WorkerRequests(Session& s) : s_(s) {}
  void on_start(const proto::Message& msg);
  void on_eval(const proto::Message& msg);
  void on_host_reply(const proto::Message& msg);
  void on_stop(const proto::Message& msg);
  void on_list(const proto::Message& msg);
  void on_logs(const proto::Message& msg);
  // False if no evaluation of this session runs under that id.
  bool on_cancel(std::uint64_t id);
  bool evaluating(std::uint64_t id) const { return evals_.count(id) > 0; }
  // True while a worker this session evaluates on cannot take more of its host replies.
  bool holds_reading() const;
  // The session's queue drained: workers relaying host calls to it may go on.
  void drained();
  // The session is gone: each of its evaluations poisons its worker (its outcome is unknown).
  void close();

 private:
  // The worker a request names (its scope: named, else the peer uid's default); sends the
  // Error and returns null if there is none this peer may use.
  std::shared_ptr<Worker> find(std::uint64_t id, const flatbuffers::String* scope, const flatbuffers::String* name);
  // A start's work off the loop (the launcher pool): the scope's resources, the program's and
  // the script's checks with the peer's credentials. `error` set: the start is refused.
  struct StartJob {
    std::shared_ptr<ExecSpec> spec;
    Credentials creds;
    std::string python;  // the shipped Python worker's directory; empty: argv's own program
    std::chrono::milliseconds idle{0};
    Status error;
    proto::ErrorCode error_code = proto::ErrorCode::internal;
    void prepare();
  };
  // Back on the loop after StartJob::prepare(): registers the worker and starts it.
  void launch_worker(std::uint64_t id, const std::string& key, const std::string& name,
                     const std::shared_ptr<class Scope>& scope, const std::string& argv0, StartJob& job);

  Session& s_;
  std::map<std::uint64_t, std::weak_ptr<Worker>> evals_;  // evaluations in flight, by request id
};

}  // namespace corral::supervisor
