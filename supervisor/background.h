// Background commands (CommandMode::Background): started with no deadline, owned by a scope,
// their output kept in a bounded buffer that each poll drains. When the buffer is full the
// command's output is paused (it blocks on its pipe) until the next poll: nothing is lost.
// A finished command's record stays until polled once after it ended, or for an hour.
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
  asio::io_context& io_;
  std::uint64_t next_id_ = 1;
  std::map<std::string, std::shared_ptr<Record>> records_;
};

}  // namespace corral::supervisor
