// Crash cleanup: what a supervisor leaves on the host (its temp dir, its cgroups), recorded
// so that the next supervisor can remove it if this one dies without cleaning up.
//
// Each live supervisor holds an instance record: a file in the registry directory (0700,
// ours: /run/corral/instances for root, else $XDG_RUNTIME_DIR/corral/instances, else
// /tmp/corral-$UID/instances) that it keeps flock()ed for its whole life and that lists what
// it created, one "KIND PATH" line each. A clean exit removes what it lists and then the
// record. A new supervisor takes each record whose lock it can get (the lock dies with its
// holder, however it dies): that supervisor is gone, so it removes what the record lists and
// then the record. It never guesses from a name or a pid, and never touches the record of a
// supervisor that is alive. (Its sandboxes are already gone: the death pipe ended them.)
#pragma once

#include <string>
#include <vector>

#include "runtime/status.h"
#include "runtime/unique_fd.h"

namespace corral::supervisor {

// The registry directory for this process's euid (created 0700 if missing).
std::string instance_registry_dir();

class InstanceRecord {
 public:
  // Creates and locks the record `<dir>/<name>`. Fails if `dir` is not a directory of ours
  // that only we can write (then there is nowhere safe to keep it).
  static StatusOr<InstanceRecord> create(const std::string& dir, const std::string& name);
  InstanceRecord() = default;
  InstanceRecord(InstanceRecord&&) = default;
  InstanceRecord& operator=(InstanceRecord&&) = default;
  // Removes the record (what it lists is the owner's to remove first).
  ~InstanceRecord();

  // Records a temp dir ("temp") or a cgroup directory ("cgroup") this supervisor created.
  Status add(const std::string& kind, const std::string& path);
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  UniqueFd fd_;  // holds the flock
};

// Removes what every dead supervisor's record in `dir` lists, then the record. Returns one
// line per thing removed (or that could not be), for the log. Never fails.
std::vector<std::string> clean_dead_instances(const std::string& dir);

}  // namespace corral::supervisor
