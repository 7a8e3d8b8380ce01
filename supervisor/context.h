// State every connection of one supervisor shares: its options, the host layer report,
// and the counters `corral status` prints. Single-threaded: only the event loop touches it.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "runtime/probe.h"
#include "runtime/sandbox.h"
#include "supervisor/background.h"
#include "supervisor/blocking_pool.h"
#include "supervisor/scope.h"
#include "supervisor/server.h"
#include "worker_proto/messages.h"

namespace corral::supervisor {

inline constexpr const char* kServerVersion = "corral 0.1.0";

// Members are destroyed in reverse order, and that order is the shutdown order (io.run() has
// returned: nothing runs on the loop any more): workers, background commands and scopes first,
// handing their teardown (cgroups, temp dirs) to the pools; then the pools, which finish what
// they run and release what they drop (its holder does the work in its destructor); the host
// last, with the cgroup parents and the temp root mount everything above lived in.
struct Context {
  ServerOptions options;
  std::unique_ptr<SandboxHost> host;  // the isolation layers this host enforces
  std::vector<LayerReport> layers;    // what hello and status report
  std::vector<proto::BoundInfo> defaults;  // the default bounds status reports (server.cc)
  // File requests run here (FileRequests); launches (ExecSpec::offload) on a pool of their own,
  // so that a slow fsync never delays a launch; the lineage walks of new peers on a thread of
  // their own (admission), so that launches held up (up to limits::kSetupDeadline each by an
  // init a host process of the sandbox uid stopped) never keep a new client out; cgroup
  // teardown (ExecSpec::teardown, up to a second each) and temp-dir removal on a third, so
  // that neither delays the other two.
  // The teardown pool goes last of the three: what the others drop (a scope a job still held)
  // may hand its teardown to it.
  std::unique_ptr<BlockingPool> teardown;
  std::unique_ptr<BlockingPool> blocking;
  std::unique_ptr<BlockingPool> launcher;
  std::unique_ptr<BlockingPool> admission;
  std::unique_ptr<ScopeRegistry> scopes;
  std::unique_ptr<BackgroundTable> background;
  std::map<std::string, std::shared_ptr<class Worker>> workers;  // by "scope/name"
  std::set<std::string> starting_workers;  // names held while a start is checked off the loop
  std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();
  unsigned connections = 0;                   // open client sockets
  std::map<uid_t, unsigned> connections_by_uid;  // the same, per peer uid
  unsigned running_commands = 0;
  std::uint64_t launches = 0;  // names each command's cgroup
};

}  // namespace corral::supervisor
