// The supervisor daemon's entry point: `corral serve`.
//
// serve() sets up the Unix socket (directory 0700, socket 0600, a lock so that only one
// supervisor owns a path, a stale socket file replaced), accepts connections whose peer
// credentials pass, and runs every connection on one Asio event loop until SIGTERM or
// SIGINT. Then it stops accepting, terminates every command, removes the socket and returns.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "runtime/limits.h"
#include "runtime/status.h"

namespace corral::supervisor {

struct ServerOptions {
  std::string socket_path;          // required
  std::vector<uid_t> allow_uids;    // peers besides the supervisor's own uid
  unsigned max_connections = limits::kDefaultMaxConnections;
  unsigned max_connections_per_uid = limits::kDefaultMaxConnectionsPerUid;  // the smaller of the two applies
  std::chrono::milliseconds hello_timeout = limits::kDefaultHelloTimeout;
  unsigned max_in_flight = limits::kDefaultMaxInFlight;        // requests per connection
  // A policy's view is prepared at its Nth command in a scope (runtime/prepared.h); 0: never.
  unsigned prepare_after = limits::kDefaultPrepareAfter;
  std::uint64_t max_queued = limits::kDefaultMaxQueued;        // bytes queued per client
  std::uint64_t max_worker_queued = limits::kDefaultMaxWorkerQueued;  // bytes queued per worker
  std::uint64_t temp_size = limits::kDefaultTempSize;  // each scope temp dir's tmpfs; 0: host dirs
  std::uint64_t default_pids = limits::kDefaultPids;  // RLIMIT_NPROC without --pids; 0: none
  // Memory cgroup limit without --memory; 0: none. Unset: limits::default_memory_for(host RAM).
  std::optional<std::uint64_t> default_memory;
  std::uint32_t max_frame = limits::kDefaultMaxFrame;          // bytes
  std::chrono::milliseconds max_timeout = limits::kMaxTimeout; // per request
  std::chrono::milliseconds authorization_deadline = limits::kAuthorizationDeadline;
  std::string temp_root;            // parent of scope temp dirs; empty: $TMPDIR or /tmp
  // A root supervisor runs commands as this unprivileged uid/gid (`serve --sandbox-uid`).
  uid_t sandbox_uid = 65534;
  gid_t sandbox_gid = 65534;
  // A non-root supervisor that cannot drop its sandboxes' supplementary groups runs commands
  // anyway, the layer reported missing (`serve --allow-supplementary-groups`).
  bool allow_supplementary_groups = false;
  // Masked in every sandbox and never exposed by a workspace or bind: the socket's directory.
  // Filled by serve().
  std::vector<std::string> hidden_paths;
};

// Refuses absurd values with a message naming the flag and the limit.
Status validate(const ServerOptions& options);

// The host's physical memory, bytes (what --default-memory's default is half of).
std::uint64_t host_memory();

// Serves until SIGTERM/SIGINT. Returns a Status only for start-up failures (another
// supervisor owns the socket, bad directory ownership, bind failure); a clean shutdown is ok.
Status serve(const ServerOptions& options);

}  // namespace corral::supervisor
