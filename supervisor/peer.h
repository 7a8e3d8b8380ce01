// Who is on the other end of a connection: credentials from SO_PEERCRED, and whether the
// peer is something this supervisor runs (and so must never be served).
#pragma once

#include <sys/types.h>

namespace corral::supervisor {

struct Peer {
  uid_t uid = 0;
  gid_t gid = 0;
  pid_t pid = 0;
};

enum class Lineage {
  stranger,      // not a descendant of the supervisor: may be served (the uid check still applies)
  ours,          // a descendant: something a sandbox runs
  unverifiable,  // the peer (or an ancestor on the way) vanished mid-check: refuse
};

// Walks `pid`'s parents (PPid in /proc) up to `ancestor` or init. Every process of a sandbox,
// orphans included, stays beneath its init, which is the supervisor's child. A process that
// is gone before the walk ends cannot be vouched for; with `pidfd` (SO_PEERPIDFD, Linux 6.5)
// the peer is also checked to be alive after the walk, so a reused pid cannot pass.
Lineage lineage(pid_t pid, pid_t ancestor, int pidfd = -1);

// Convenience for tests: lineage(...) == Lineage::ours.
bool descends_from(pid_t pid, pid_t ancestor);

}  // namespace corral::supervisor
