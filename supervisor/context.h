// State every connection of one supervisor shares: its options, the host layer report,
// and the counters `corral status` prints. Single-threaded: only the event loop touches it.
#pragma once

#include <chrono>
#include <map>
#include <memory>
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

struct Context {
  ServerOptions options;
  std::unique_ptr<SandboxHost> host;  // the isolation layers this host enforces
  std::vector<LayerReport> layers;    // what hello and status report
  std::vector<proto::BoundInfo> defaults;  // the default bounds status reports (server.cc)
  std::unique_ptr<ScopeRegistry> scopes;
  std::unique_ptr<BackgroundTable> background;
  std::map<std::string, std::shared_ptr<class Worker>> workers;  // by "scope/name"
  std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();
  unsigned connections = 0;                   // open client sockets
  std::map<uid_t, unsigned> connections_by_uid;  // the same, per peer uid
  unsigned running_commands = 0;
  std::uint64_t launches = 0;  // names each command's cgroup
  // File requests run here (Connection::on_file), and launches (ExecSpec::offload) on a pool
  // of their own, so that a slow fsync never delays a launch. Declared last: destroyed first,
  // so a running job finishes while everything above is still alive.
  std::unique_ptr<BlockingPool> blocking;
  std::unique_ptr<BlockingPool> launcher;
};

}  // namespace corral::supervisor
