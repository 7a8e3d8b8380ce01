#include "runtime/prepared.h"

#include <cerrno>
#include <vector>

namespace corral {

namespace {
constexpr std::size_t kMaxTracked = 256;  // views counted or refused per scope

// A failure that another try may not meet: the total in use, a full temp dir or process table,
// a descriptor or memory shortage.
bool transient(int err) {
  switch (err) {
    case EBUSY: case EAGAIN: case ENOSPC: case EMFILE: case ENFILE: case ENOMEM: case EINTR: case ETIMEDOUT:
      return true;
    default:
      return false;
  }
}
}  // namespace

PreparedSandboxes::~PreparedSandboxes() = default;

std::vector<pid_t> PreparedSandboxes::server_pids() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<pid_t> out;
  for (const auto& p : ready_) out.push_back(p->server_pid());
  return out;
}

StatusOr<SandboxLaunch> PreparedSandboxes::launch(const SpawnSpec& spec, const Policy& policy,
                                                  const std::string& temp_dir, const std::string& name, bool hold,
                                                  int netns_fd) {
  auto usual = [&] { return host_->launch(spec, policy, temp_dir, name, hold, netns_fd); };
  if (hold || spec.exec_fd >= 0 || prepare_after_ == 0) return usual();
  for (const auto& m : spec.fds)
    if (m.target > 2) return usual();  // a worker's channel: workers start as usual
  const auto key = host_->prepared_key(policy, netns_fd);
  if (!key) return usual();

  std::shared_ptr<PreparedSandbox> prepared;
  std::list<std::shared_ptr<PreparedSandbox>> dropped;  // broken ones, ended outside the lock
  bool make = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto it = ready_.begin(); it != ready_.end();) {
      auto next = std::next(it);
      if ((*it)->broken()) {
        dropped.splice(dropped.end(), ready_, it);
      } else if (!prepared && (*it)->key() == *key) {
        prepared = *it;
        ready_.splice(ready_.begin(), ready_, it);
      }
      it = next;
    }
    if (!prepared && !failed_.count(*key) && !making_.count(*key)) {
      if (seen_.size() >= kMaxTracked && !seen_.count(*key)) seen_.clear();
      make = ++seen_[*key] >= prepare_after_;
      if (make) making_.insert(*key);  // one at a time per view; the others launch as usual
    }
  }
  if (make) {
    auto made = host_->prepare(policy, temp_dir, netns_fd);
    std::shared_ptr<PreparedSandbox> evicted;  // ended outside the lock
    std::lock_guard<std::mutex> lock(mutex_);
    making_.erase(*key);
    if (made.ok()) {
      prepared = std::move(made).value();
      seen_.erase(*key);
      ready_.push_front(prepared);
      if (ready_.size() > max_) {
        evicted = std::move(ready_.back());
        ready_.pop_back();
      }
    } else if (transient(made.status().err())) {
      seen_[*key] = 0;  // tried again after as many commands again
    } else {
      if (failed_.size() >= kMaxTracked) failed_.clear();
      failed_.insert(*key);  // this view cannot be prepared here: not tried again
    }
  }
  if (!prepared) return usual();
  auto launched = host_->launch_prepared(*prepared, spec, policy, name);
  if (launched.ok() || launched.status().step() != "prepared") return launched;
  // The prepared sandbox failed, not the command: forget it (the view is prepared again at a
  // later command) and launch this one as usual.
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (prepared->broken()) ready_.remove(prepared);
  }
  return usual();
}

}  // namespace corral
