// Who is on the other end of a connection: credentials from SO_PEERCRED, and whether the
// peer is something this supervisor runs (and so must never be served).
#pragma once

#include <sys/types.h>

#include <vector>

#include "runtime/host_path.h"

namespace corral::supervisor {

struct Peer {
  uid_t uid = 0;
  gid_t gid = 0;
  pid_t pid = 0;
  std::vector<gid_t> groups;  // supplementary groups (SO_PEERGROUPS)
  // What host paths named by this peer are checked with (runtime/host_path.h).
  Credentials credentials() const { return {uid, gid, groups}; }
};

// The peer's supplementary groups (SO_PEERGROUPS, Linux 4.13), as the kernel recorded them at
// connect(); empty with errno set on failure.
std::vector<gid_t> peer_groups(int socket_fd);

// Makes the kernel refuse descriptors sent to this Unix socket (SO_PASSRIGHTS off, Linux
// 6.16): the sender's sendmsg fails with EPERM. A descriptor that did arrive would be closed
// by our read, and a file's last close runs its release in the closing thread (a TCP socket
// with SO_LINGER waits out its linger time there): a client or a sandboxed worker could stall
// the event loop that way. Set on a listening socket, accepted ones inherit it, from before
// they are accepted. 0, or the errno (ENOPROTOOPT: the kernel is older).
int refuse_descriptors(int socket_fd);

enum class Lineage {
  stranger,      // not a descendant of the supervisor, nor in any corral sandbox: may be served
                 // (the uid check still applies)
  ours,          // a descendant: something a sandbox runs
  sandboxed,     // inside a corral sandbox of another supervisor
  unverifiable,  // the peer (or an ancestor on the way) vanished mid-check: refuse
};

// Walks `pid` and its parents (PPid in /proc) up to `ancestor` or init. Every process of a
// sandbox, orphans included, stays beneath its init, which is the supervisor's child. Every
// corral sandbox's init, whichever supervisor started it, carries a marker nothing inside the
// sandbox can remove or fake away: it is PID 1 of a PID namespace below ours (NSpid ends in 1)
// named "corral-init" (a comm only the process itself can change, and init never execs). A
// process inside a sandbox cannot leave its PID namespace, so such an init is always on its
// way up. A host process that names itself so only gets itself refused. A process that is
// gone before the walk ends cannot be vouched for; with `pidfd` (SO_PEERPIDFD, Linux 6.5) the
// peer is also checked to be alive after the walk, so a reused pid cannot pass.
Lineage lineage(pid_t pid, pid_t ancestor, int pidfd = -1);

// Convenience for tests: lineage(...) == Lineage::ours.
bool descends_from(pid_t pid, pid_t ancestor);

}  // namespace corral::supervisor
