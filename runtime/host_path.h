// Host paths named by a request (workspace roots, bind sources, protect, deny-read, worker
// programs), resolved as descriptors rather than strings, with the credentials of the peer
// that named them. docs/threat-model.md ("Planted links", "Peer credentials").
//
// The walk starts at "/" and opens one component at a time (O_PATH | O_NOFOLLOW):
//  - a symlink is followed only when the directory holding it is one that no sandbox identity
//    can write: a *system directory* ("/" itself, /usr and /etc and everything beneath them)
//    that is owned by root and not writable by group or others. That keeps Debian's merged-/usr
//    links (/bin -> usr/bin, /lib -> usr/lib) and /etc/alternatives working;
//  - from the first directory that is not such a system directory on, the rest of the path is
//    opened with openat2(RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS): a link planted by any
//    sandbox (whose links are owned by root inside an idmapped root-owned workspace, so their
//    owner proves nothing) fails the request instead of redirecting it;
//  - system directories are therefore never writable roots (refused by writable_root_allowed).
// What was resolved is kept as an O_PATH descriptor: mounts, idmaps and file tools use that
// descriptor, never the name again.
#pragma once

#include <sys/stat.h>
#include <sys/types.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "runtime/status.h"
#include "runtime/unique_fd.h"

namespace corral {

// The identity a host path is checked with: a peer's uid, gid and supplementary groups
// (SO_PEERCRED + SO_PEERGROUPS).
struct Credentials {
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> groups;
};

// One resolved host path. Copies share the descriptor.
struct HostPath {
  std::string path;                   // canonical: absolute, no symlink, no "." or ".."
  std::shared_ptr<UniqueFd> fd;       // O_PATH | O_CLOEXEC, the object resolved
  struct stat st {};                  // fstat of fd at resolution time
  int get() const { return fd ? fd->get() : -1; }
};

// Resolves `path` (absolute, no ".." component, no NUL) by descriptor walk, with the calling
// thread's filesystem credentials. `what` names the option in messages ("--workspace").
// Steps: "path" (shape), "symlink" (ELOOP: a link below a directory a sandbox may write),
// otherwise the errno of the failed open ("resolve").
StatusOr<HostPath> resolve_host_path(const std::string& path, const std::string& what);

// Opens `rel` (relative, no "..") beneath the resolved directory `dir` without following any
// symlink; O_PATH | O_CLOEXEC plus `extra_flags`.
StatusOr<UniqueFd> open_below(int dir, const std::string& rel, int extra_flags = 0);

// True for "/", /usr, /etc and their descendants: where links are followed, and what can
// never be a writable root.
bool system_directory(const std::string& canonical_path);

// A writable workspace root or writable bind source must not be a system directory (see the
// top of this file); the message names `what`.
Status writable_root_allowed(const HostPath& p, const std::string& what);

// access(2) on the resolved object with the calling thread's filesystem credentials
// (faccessat2 with AT_EACCESS | AT_EMPTY_PATH, Linux 5.8). `mode` as for access(2).
Status check_access(const HostPath& p, int mode, const std::string& what);

// Runs `fn` with filesystem credentials `creds` (fsuid, fsgid, supplementary groups) on a
// thread of its own: setfsuid, setfsgid and setgroups are issued as raw syscalls, which change
// only the calling thread (glibc's wrappers would change every thread). Needs root; a process
// that is not root, or a null `creds`, runs `fn` inline with its own credentials. A failure to
// switch comes back as a Status and `fn` does not run.
Status with_credentials(const Credentials* creds, const std::function<Status()>& fn);

}  // namespace corral
