// Background commands (CommandMode::Background): started with no deadline, owned by a scope,
// their output kept in a bounded buffer that each poll drains. When the buffer is full the
// command's output is paused (it blocks on its pipe) until the next poll: nothing is lost.
// A finished command's record stays until polled once after it ended, or for an hour. Each
// owner uid's held output and record count are bounded (below).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "runtime/execution.h"
#include "runtime/status.h"
#include "supervisor/scope.h"
#include "worker_proto/codec.h"

namespace asio {
class io_context;
}

namespace corral::supervisor {

inline constexpr std::size_t kMaxBackgroundPerScope = 256;
inline constexpr std::size_t kBackgroundBufferBytes = 1 << 20;  // per command, both streams
// Per owner uid, whatever its scopes: the output held for all its records (running or ended,
// not yet polled; past it their output pauses after one more read each, nothing is lost, and
// a polled command still goes on a read at a time), and the records themselves
// (past it a start is refused until some are polled). Without them, finished records that
// nobody polls would hold a MiB each for an hour, and scopes are many.
inline constexpr std::size_t kBackgroundBytesPerUid = 64u << 20;
inline constexpr std::size_t kMaxBackgroundRecordsPerUid = 512;
inline constexpr std::chrono::hours kBackgroundRecordTtl{1};

class BackgroundTable {
 public:
  explicit BackgroundTable(asio::io_context& io) : io_(io) {}
  ~BackgroundTable();

  // Starts `spec` in `scope` for `owner`; returns the new id ("bg1", ...). `log_line` runs
  // with the final result (the audit log).
  StatusOr<std::string> start(ExecSpec spec, const std::shared_ptr<Scope>& scope, uid_t owner,
                              std::function<void(const Result&)> log_line);
  // The PollReply (or an Error) for `id` as `uid` sees it.
  proto::Frame poll(std::uint64_t request_id, const std::string& id, uid_t uid);
  // Ends a running command (Ack), or refuses (Error).
  proto::Frame stop(std::uint64_t request_id, const std::string& id, bool force, uid_t uid);
  // Terminates it now (a start whose id never reached its client).
  void abandon(const std::string& id);
  std::size_t running() const;

  struct Record;

 private:
  void purge();
  void erase(std::map<std::string, std::shared_ptr<Record>>::iterator it);
  // After `uid`'s held output shrank: resumes its records paused only by the uid's budget.
  void resume_within_budget(uid_t uid);
  asio::io_context& io_;
  std::uint64_t next_id_ = 1;
  std::map<std::string, std::shared_ptr<Record>> records_;
  struct Owner {
    std::size_t bytes = 0;    // output held for the uid's records
    std::size_t records = 0;  // its records, running or ended
  };
  std::map<uid_t, Owner> owners_;
};

}  // namespace corral::supervisor
