// SandboxPlan: everything the sandbox's init (PID 1 of the command's namespaces) needs
// between clone and the command's exec, prepared by the parent (sandbox.cc) so that the
// child side (sandbox_child.cc) only reads it and makes syscalls.
#pragma once

#include <linux/filter.h>
#include <sys/types.h>

#include <cstddef>
#include <cstdint>

#include "runtime/child_setup.h"
#include "runtime/connect_broker.h"

namespace corral::sandbox {

// Steps of sandbox setup, reported with errno when one fails. Names: step_name().
enum class Step : int {
  none = 0,
  sync = 100,      // waiting for the parent (uid maps, cgroup)
  ids,             // setresuid/setresgid/setgroups inside the user namespace
  hostname,
  loopback,
  mount_private,   // making every mount private
  mount_source,    // opening a bind source
  mount_root_ro,
  mount_bind,
  mount_target,    // creating a missing mount point
  mount_dev,
  mount_proc,
  mount_mask,
  mount_protect,
  rlimits,
  fork,
  chdir,
  no_new_privs,
  landlock,
  caps,
  seccomp,
  exec,
  broker,          // setting up the host-IPC broker (runtime/connect_broker.h)
  mount_run,       // the empty /run
  ready,           // not a failure: prepared up to exec, waiting for the release (authorized launch)
  cgroup_ns,       // a cgroup namespace rooted at the sandbox's own cgroup
  mount_root,      // entering the root tree the parent cloned (SandboxPlan::root_tree)
  cgroup_join,     // moving init into its own cgroup v1 groups (SandboxPlan::cgroup_join_fds)
  own_ids,         // a prepared sandbox's command init writing its own id maps
  prepared,        // a prepared sandbox's server taking a request
};
const char* step_name(int step);

struct BindMount {
  // The source as the parent resolved it (runtime/host_path.h): a detached tree the parent
  // cloned from its descriptor (tree_fd >= 0 before clone: root supervisors), or an idmapped
  // one it sends after clone (parent_slot >= 0), or else (non-root supervisors, which cannot
  // clone trees of the host's mount namespace) its canonical path, opened inside without
  // following any link and checked to be the same (dev, ino).
  const char* source;
  dev_t dev;
  ino_t ino;
  int parent_slot;      // >= 0: a detached (idmapped) mount the parent sent, by index
  const char* target;   // path inside
  bool writable;
  bool is_dir;          // how to create a missing target: a dir or an empty file
  int tree_fd;          // the child's working copy: the detached tree to move into place
};

inline constexpr std::size_t kMaxBinds = 64;
inline constexpr std::size_t kMaxMasks = 64;
inline constexpr std::size_t kMaxDevNodes = 8;

struct Mask {
  const char* path;
  bool is_dir;
};

// A --protect/--deny-read guard, or one of its ancestors pinned in place (a mount point cannot
// be renamed or removed: EBUSY). `path` is where it shows inside the view, canonical (opened
// without following any link); dev/ino is the object the parent resolved there. Applied in
// order: pins outermost first, then protects, then masks. docs/threat-model.md.
enum class GuardKind : int { pin, protect, mask };
struct Guard {
  const char* path;
  dev_t dev;
  ino_t ino;
  GuardKind kind;
  bool is_dir;
};
inline constexpr std::size_t kMaxGuards = 256;

// The report init writes when the command ends (read by the parent after init exits).
struct Report {
  int exited;       // 1: code valid; 0: killed by `signal`
  int code;
  int signal;
  std::uint64_t user_cpu_us, sys_cpu_us, max_rss_kb;  // every process init reaped
};

struct SandboxPlan {
  child::ChildPlan exec;     // argv, envp, exec paths, cwd (inside view), fds 0-2, error_fd

  int sync_fd;               // SOCK_SEQPACKET: one message "go", with the parent's mount fds
  // The `tasks` files of the command's groups that init joins itself (cgroup v1), opened by the
  // parent: init writes "0" to each right after "go". A process that moves itself spares the
  // kernel's global threadgroup lock, which moving another takes (5-15 ms per launch on this
  // project's CI machine; runtime/cgroup.h CgroupJoin).
  int cgroup_join_fds[4];
  std::size_t cgroup_join_count;
  // The groups carry only the default memory bound: a join that fails leaves the command
  // unbounded (the parent then reports it so), never unlaunched.
  bool cgroup_join_optional;
  int report_fd;             // write end of the report pipe
  uid_t inside_uid;          // the command's uid inside (0 for a root supervisor, else its uid)
  gid_t inside_gid;
  bool drop_groups;          // setgroups(0) (only possible when the parent left setgroups allowed)

  bool new_net;              // a fresh network namespace: bring its loopback up
  bool new_mount;            // build the mount view (always true for sandboxes)
  bool full_access;          // danger-full-access: keep the host's mounts writable
  // -1, or (root supervisors with scope temp dirs as tmpfs mounts) a detached recursive copy
  // of the host's tree, cloned by the parent: the view is built on it after pivot_root, so that
  // the host mounts it leaves out (the unbindable temp root with every scope's tmpfs) are not
  // in the sandbox's mount namespace at all, /proc/self/mountinfo included.
  int root_tree;
  BindMount binds[kMaxBinds];
  std::size_t bind_count;
  const char* dev_nodes[kMaxDevNodes];  // "/dev/null", ... bound into a fresh /dev
  std::size_t dev_node_count;
  const char* dev_shm_source;           // bound at /dev/shm (the scope's temp dir)
  Mask masks[kMaxMasks];                // the supervisor's socket dir (by name, if in the view)
  std::size_t mask_count;
  Guard guards[kMaxGuards];             // protect, deny-read and their pinned ancestors
  std::size_t guard_count;

  bool limit_core;                      // RLIMIT_CORE 0
  std::uint64_t fsize_limit;            // RLIMIT_FSIZE, 0 = unlimited
  std::uint64_t cpu_limit_s;            // RLIMIT_CPU (per-process floor), 0 = unlimited
  std::uint64_t nproc_limit;            // RLIMIT_NPROC (per sandbox: its own user namespace), 0 = unlimited

  int exec_fd;                          // >= 0: execveat(exec_fd, "", AT_EMPTY_PATH), no PATH search
  int landlock_fd;                      // -1: none
  int init_landlock_fd;                 // init's own domain (scopes only), -1: none
  BrokerPlan broker;                    // host IPC: the command's connect() goes through init
  int broker_fd;                        // the command's end of the listener hand-over (init sets it)
  // /run (and /var/run if it is a directory of its own) replaced by an empty tmpfs, but for
  // these host files shown at their own paths (the resolv.conf that systemd-resolved keeps there).
  bool empty_run;
  const char* var_run;                  // "/var/run" when it is not a link to /run, else nullptr
  const char* run_keep[4];
  std::size_t run_keep_count;
  int release_fd;                       // -1: exec at once; else read one byte first ('g': go)
  // Read end of the supervisor's death pipe, whose write end only the supervisor holds: EOF
  // (or an error) means the supervisor is gone, and init then ends the whole sandbox. This
  // does not depend on credentials or on which thread launched us, as PR_SET_PDEATHSIG would.
  int death_fd;                         // -1: none (tests of the engine alone)
  const sock_fprog* seccomp;            // nullptr: none

  // A prepared sandbox's fork server (SandboxHost::prepare): no PID namespace and no /proc of
  // its own; once the view is built it closes the error pipe (EOF: ready) and serves
  // PreparedRequests on control_fd until EOF there or on the death pipe (serve_prepared).
  bool prepared;
  int control_fd;
};

// One command for a prepared sandbox's fork server, sent on its control socket with these
// descriptors, in order: the memfd of the strings, the command init's sync socket, the error
// pipe's and the report pipe's write ends, `join_count` cgroup join fds, then `fd_count`
// descriptors for the command, placed at `fd_targets`. The memfd holds `argc` arguments, `envc`
// environment entries and `pathc` exec paths, each NUL-terminated, then the working directory
// when `has_cwd`. The server clones the command's init (CLONE_PARENT: the supervisor's own
// child) and answers with a PreparedReply and that init's pidfd. The init's first act is one
// byte ('h') on its sync socket, whose sender the kernel names (SO_PASSCRED): a supervisor
// that lost the reply still finds its child, and reaps it.
inline constexpr std::uint32_t kPreparedMagic = 0x43525052;  // "CRPR"
inline constexpr std::size_t kPreparedMaxFds = 4 + 4 + 16;
inline constexpr std::uint32_t kPreparedMaxStrings = 1u << 20;
struct PreparedRequest {
  std::uint32_t magic;
  std::uint32_t seq;  // echoed in the reply

  std::uint32_t argc, envc, pathc;
  std::uint64_t blob_size;
  std::uint32_t has_cwd;
  std::uint32_t join_count;
  std::uint32_t join_optional;
  std::uint32_t fd_count;
  std::int32_t fd_targets[16];
  std::int32_t first_closed_fd;
  std::uint64_t fsize_limit, cpu_limit_s, nproc_limit;
};
struct PreparedReply {
  std::uint32_t seq;  // the request's
  std::int32_t pid;   // > 0: the command's init, whose pidfd comes with the reply
  std::int32_t err;   // else the errno of the step that failed
};

// The function clone() runs: becomes init (PID 1), sets everything up, forks the command,
// then forwards signals and reaps until the command ends. Never returns.
int init_main(void* plan);

// The supervisor's command line names its socket, temp root and audit log. Every init is a
// copy of the supervisor, and its command reads /proc/1/cmdline: `corral serve` registers its
// argv once at start, and each init (and prepared-sandbox server) blanks its own copy to
// "corral-init" before anything runs in the sandbox.
void register_command_line(int argc, char** argv);

}  // namespace corral::sandbox
