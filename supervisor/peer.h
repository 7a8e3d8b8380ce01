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

// True if `pid` descends from `ancestor` (following PPid in /proc). Every process of a
// sandbox, orphans included, stays beneath its init, which is the supervisor's child.
bool descends_from(pid_t pid, pid_t ancestor);

}  // namespace corral::supervisor
