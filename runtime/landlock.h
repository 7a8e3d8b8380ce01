// The Landlock layer: an unprivileged, stackable LSM policy (Linux >= 5.13) that the child
// applies to itself between clone and exec. The parent builds the ruleset fd (opening every
// root, allocation allowed); the child makes one landlock_restrict_self call.
//
// The policy grants, and everything handled but not granted is refused (EACCES for files and
// TCP, EPERM for scoped signals and abstract sockets): read+execute beneath read roots, every
// file right beneath write roots, read+write on single files. It can only grant, never
// subtract, so --protect/--deny-read stay the mount layer's job.
//
// What the kernel handles depends on its Landlock ABI version (landlock_abi()):
//   1 (5.13) file rights; 2 (5.19) REFER (rename/link across directories);
//   3 (6.2) TRUNCATE; 4 (6.7) TCP bind/connect; 5 (6.10) IOCTL_DEV on devices;
//   6 (6.12) scopes: signals and abstract unix sockets; 7 (6.15) audit logging only.
// Rights the running kernel does not know are left out (best effort): a caller that needs a
// protection must check landlock_abi() and refuse the request itself (fail closed).
#pragma once

#include <string>
#include <vector>

#include "runtime/status.h"
#include "runtime/unique_fd.h"

namespace corral {

// The Landlock ABI version of the running kernel (landlock_create_ruleset with
// LANDLOCK_CREATE_RULESET_VERSION); 0 if Landlock is not built in or not enabled at boot.
int landlock_abi();

struct LandlockPolicy {
  std::vector<std::string> read_roots;    // read + execute beneath (e.g. "/")
  std::vector<std::string> write_roots;   // full file access beneath (workspace roots, the temp dir)
  std::vector<int> write_root_fds;        // the same, by descriptor (borrowed; host paths resolved once)
  std::vector<std::string> write_files;   // single files that need write (e.g. /dev/null, /dev/tty)
  bool deny_tcp = true;                   // ABI>=4: handle bind/connect TCP with no rule (= denied)
  bool scope_signals = true;              // ABI>=6: the sandbox cannot signal processes outside it
  bool scope_abstract_unix = true;        // ABI>=6: nor connect to abstract unix sockets outside it
  bool handle_fs = true;                  // false: no file rights handled (a domain for scopes/TCP only)
};

// Parent side: creates a ruleset handling every file right the running ABI knows (plus TCP and
// scopes as the policy asks and the ABI allows) and adds one rule per existing path:
//   read_roots:  EXECUTE | READ_FILE | READ_DIR (file rights only when the path is a file)
//   write_roots: every file right (read, write, make_*, remove_*, refer, truncate, ioctl_dev)
//   write_files: READ_FILE | WRITE_FILE | TRUNCATE | IOCTL_DEV
// Symlinks in the paths are followed; paths that do not exist are skipped. Returns the
// close-on-exec ruleset fd, owned by the caller. Fails with step "landlock": ENOSYS/EOPNOTSUPP
// when Landlock is unavailable, or the errno of the open/create/add_rule that failed.
StatusOr<UniqueFd> build_landlock_ruleset(const LandlockPolicy& policy);

// Child side, async-signal-safe, no allocation: restricts the calling thread (and everything
// it execs or forks afterwards) to the ruleset. Needs no_new_privs (install_seccomp sets it;
// call that first) or CAP_SYS_ADMIN in the current user namespace. Returns 0 or an errno
// (EPERM without either; EBADF/EBADFD for a bad fd). The ruleset fd stays open; close it or
// let exec close it (it is close-on-exec).
int landlock_restrict(int ruleset_fd) noexcept;

// Host probe: builds a ruleset with read root "/" and nothing writable, then in a forked child
// sets no_new_privs, restricts itself, and checks that reading "/" still works and opening
// /dev/null for writing is refused with EACCES. Ok, or the step and errno that say why not.
Status probe_landlock();

}  // namespace corral
