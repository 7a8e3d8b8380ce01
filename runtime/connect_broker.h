// The host-IPC layer's broker (docs/threat-model.md, "Host IPC"), run by the sandbox's init.
//
// In read-only and workspace-write modes the command's seccomp filter stops every connect()
// (SECCOMP_RET_USER_NOTIF) and init, which holds the filter's listener, performs it:
//   1. copies the address once from the caller's memory (process_vm_readv), checks that the
//      notification is still pending (so the pid was not reused), takes the caller's socket
//      with pidfd_getfd (the same open file description);
//   2. for an AF_UNIX socket and a pathname address, resolves the path in the caller's view
//      (its cwd for a relative one; no magic links) to an O_PATH descriptor and decides on that
//      inode: allowed if it is a socket named by --allow-socket (by device and inode), or the
//      listener bound to it belongs to the command's scope (see scope_by_netns);
//   3. connects the caller's socket itself, to /proc/self/fd/<that descriptor>, so nothing the
//      caller changes after the check (its memory, its fd table, the path) matters, and
//      answers with connect's result. Other families and abstract addresses are connected the
//      same way with the copied address; init's own Landlock domain (abstract-socket and signal
//      scopes, and TCP as the command's) keeps those to what the command itself may reach.
// A blocking connect that is still in progress (TCP) is answered when the socket becomes
// writable; init never blocks on one. The listener sees init's pid and the sandbox's uid.
//
// Everything here runs in init after clone: no allocation, no logging, no exceptions.
#pragma once

#include <poll.h>
#include <sys/types.h>

#include <cstddef>
#include <cstdint>

namespace corral::sandbox {

inline constexpr std::size_t kMaxAllowedSockets = 16;

// A host socket a request named with --allow-socket, by identity (from fstat in the supervisor).
struct AllowedSocket {
  std::uint64_t dev;
  std::uint64_t ino;
};

struct BrokerPlan {
  bool enabled;               // the command's filter sends connect() here
  // true (network denied): init runs in the scope's own network namespace, where only the
  // scope's sandboxes create sockets, so a listener found there (unix_diag) is the scope's.
  // false (network allowed): the listener must be held open by a process of this sandbox
  // (this PID namespace).
  bool scope_by_netns;
  AllowedSocket allowed[kMaxAllowedSockets];
  std::size_t allowed_count;
};

// The broker's state in init.
struct Broker {
  static constexpr std::size_t kMaxPending = 64;
  struct Pending {
    int fd;            // the caller's socket (our duplicate); -1: free
    std::uint64_t id;  // the notification to answer when it becomes writable
  };
  const BrokerPlan* plan = nullptr;
  int listener = -1;   // the command's filter's listener; -1 once every filtered task is gone
  Pending pending[kMaxPending];
};
inline constexpr std::size_t kBrokerMaxPollFds = 1 + Broker::kMaxPending;

void broker_start(Broker& b, const BrokerPlan* plan, int listener);

// init's poll loop: broker_poll_fds() fills `out` (room for kBrokerMaxPollFds) with what the
// broker waits for and returns how many; after poll(), broker_on_poll() handles them (the same
// entries, same order), answering the command's connect() calls.
std::size_t broker_poll_fds(const Broker& b, struct pollfd* out);
void broker_on_poll(Broker& b, const struct pollfd* fds, std::size_t n);

}  // namespace corral::sandbox
