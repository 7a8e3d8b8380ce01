// PreparedSandboxes: the prepared sandboxes of one scope (docs/design.md "Prepared sandboxes"),
// and the one place that decides whether a command starts from one. A policy's view is prepared
// at its `prepare_after`th command in the scope; at most `max` are kept, the least recently used
// going first; a prepared sandbox that fails is dropped, and its command launched as usual.
// Thread-safe: launches of one scope run on the launcher pool's threads at once.
#pragma once

#include <cstddef>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>

#include "runtime/limits.h"
#include "runtime/sandbox.h"

namespace corral {

class PreparedSandboxes {
 public:
  // prepare_after 0: never (every command is launched as usual).
  explicit PreparedSandboxes(const SandboxHost* host, unsigned prepare_after = limits::kDefaultPrepareAfter,
                             std::size_t max = limits::kPreparedPerScope)
      : host_(host), prepare_after_(prepare_after), max_(max) {}
  ~PreparedSandboxes();

  // SandboxHost::launch's arguments and outcome, whichever way the command starts. A held
  // launch and a program by descriptor (a worker's) always start as usual.
  StatusOr<SandboxLaunch> launch(const SpawnSpec& spec, const Policy& policy, const std::string& temp_dir,
                                 const std::string& name, bool hold, int netns_fd);

  // For tests: the servers kept, most recently used first.
  std::vector<pid_t> server_pids() const;

 private:
  const SandboxHost* host_;
  const unsigned prepare_after_;
  const std::size_t max_;
  mutable std::mutex mutex_;
  std::map<std::string, unsigned> seen_;  // launches per view not prepared yet (bounded)
  std::set<std::string> failed_;          // views that could not be prepared: not tried again
  std::set<std::string> making_;          // views being prepared now
  std::list<std::shared_ptr<PreparedSandbox>> ready_;  // most recently used first
};

}  // namespace corral
