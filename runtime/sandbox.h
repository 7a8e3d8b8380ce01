// The isolation layers, parent side: what this host can enforce (probed by trying each
// layer), and the launch of one command inside user, mount, PID, IPC, UTS and (network
// denied) network namespaces, with a mount view built from the policy, Landlock, seccomp,
// empty capabilities, rlimits and a cgroup. The child side is sandbox_child.cc.
//
// A request that needs a layer this host lacks is refused by check() with the layer's name
// and the probe's reason; nothing is downgraded silently.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "runtime/cgroup.h"
#include "runtime/limits.h"
#include "runtime/policy.h"
#include "runtime/probe.h"
#include "runtime/process.h"
#include "runtime/spawn.h"
#include "runtime/status.h"

namespace corral {

namespace sandbox {
struct SandboxPlan;
}

struct HostOptions {
  // A root supervisor runs commands as this unprivileged host uid/gid (serve --sandbox-uid),
  // never as host uid 0. A non-root supervisor runs them as its own uid.
  uid_t sandbox_uid = 65534;
  gid_t sandbox_gid = 65534;
  std::vector<std::string> hidden_paths;  // masked in every sandbox: the supervisor's socket dir
  std::string cgroup_root = "/sys/fs/cgroup";
  std::string temp_root = "/tmp";         // where scope temp dirs are made, and the mount probes try
  // A root supervisor mounts each scope temp dir as a tmpfs of this size (layer temp-size): a
  // bound on what a scope's commands write there, and a /tmp whose mount shows no host path.
  // Its pages count as memory (no swap here), against the memory cap of the command that
  // writes them. 0: plain host directories, unbounded.
  std::uint64_t temp_size = limits::kDefaultTempSize;
  // RLIMIT_NPROC of a command without a --pids cap (with one: the cap). 0: none.
  std::uint64_t default_pids = limits::kDefaultPids;
  // Memory cgroup limit of a command without a --memory cap, where a memory cgroup exists (a
  // default the host cannot enforce is reported as not enforced, never refused). 0: none.
  std::uint64_t default_memory = 0;
  // temp_root is a directory the supervisor made for itself alone (serve does): only then is it
  // made a mount of its own for the tmpfs mounts (never /tmp itself).
  bool own_temp_root = false;
  // Host files under /run shown at their own paths in the otherwise empty /run of the
  // confining modes. Empty: /etc/resolv.conf's target when it lies under /run
  // (systemd-resolved), so that DNS keeps working.
  std::vector<std::string> run_keep;
  // A non-root supervisor that cannot drop its sandboxes' supplementary groups (no newgidmap,
  // or no /etc/subgid range for its user) refuses commands unless this is set
  // (serve --allow-supplementary-groups): the layer "groups-dropped" is then missing, said so.
  bool allow_supplementary_groups = false;
  std::string newgidmap = "/usr/bin/newgidmap";
  // Called with each cgroup directory the host is about to make for the supervisor (its
  // crash-cleanup record; runtime/cgroup.h CgroupManager::create).
  std::function<void(const std::string&)> before_cgroup_mkdir;
  std::string subgid_file = "/etc/subgid";
};

// One launched sandbox: its init (PID 1 of the command's namespaces) and what it enforces.
struct SandboxLaunch {
  Process init;
  UniqueFd report;                      // read end of init's report pipe
  std::unique_ptr<Cgroup> cgroup;       // null when no cgroup was used
  std::vector<std::string> enforced;    // layer names, as corral status prints them
  // After init has exited: the command's exit and usage as init reported it. False if init
  // died before reporting (SIGKILLed), in which case `info` is left as is.
  bool read_report(ExitInfo& info);

  // Authorized launch: a launch made with `hold` stops right before exec. release() lets it
  // exec (at most once) and returns how that went, like launch() would have; dropping the
  // launch (or terminating init) instead means the command never ran.
  bool held() const { return release_fd.valid(); }
  Status release();
  UniqueFd release_fd;  // write end: one byte 'g' releases
  UniqueFd error_read;  // the error pipe, read to EOF after the release
  std::string program;  // argv[0], for messages
};

// A prepared sandbox (docs/design.md "Prepared sandboxes"): a server already in one scope's
// namespaces and in the mount view of one policy, which starts each command from there
// (SandboxHost::launch_prepared) in its own user, PID, mount and IPC namespaces with its own
// /proc. Thread-safe. Destroying it ends the server; the commands it started are not its own.
class PreparedSandbox {
 public:
  ~PreparedSandbox();
  PreparedSandbox(const PreparedSandbox&) = delete;
  PreparedSandbox& operator=(const PreparedSandbox&) = delete;
  const std::string& key() const { return key_; }
  // The server failed or is gone: launch_prepared() refuses; make another.
  bool broken() const { return broken_.load(); }
  pid_t server_pid() const { return server_.pid(); }  // for tests

 private:
  friend class SandboxHost;
  PreparedSandbox() = default;
  std::string key_;
  Process server_;
  UniqueFd control_;  // SOCK_SEQPACKET: PreparedRequest out, PreparedReply and a pidfd back
  std::mutex mutex_;  // one request at a time on control_
  std::atomic<bool> broken_{false};
  std::uint32_t seq_ = 0;  // the last request's number (under mutex_)
  std::atomic<int>* counter_ = nullptr;  // the host's count of live ones
  // Broken from the parent's side: no more requests, no late answer read, the server killed.
  void fail_from_parent();
  bool landlock_ = false, drop_groups_ = false, idmapped_ = false, broker_ = false, temp_is_tmpfs_ = false;
};

// Unmounts a scope temp dir that adopt_temp_dir() mounted (its files go with the mount);
// nothing for a plain directory. The dir itself is left for the caller to remove.
void release_temp_dir(const std::string& dir);

namespace detail {
// The body of the short-lived children the host clones into a user namespace of their own (to
// write their id maps, or to keep the namespace for an idmap): waits for one byte on read_fd
// (then returns then(), if any) or for EOF, after closing its own copy of write_fd, so that it
// ends when its parent does, killed or not. Returns 0, EPIPE on EOF, or then()'s result.
struct WaitArgs {
  int read_fd, write_fd;
  int (*then)();
};
int wait_for_parent_in_child(void* args);
}  // namespace detail

class SandboxHost {
 public:
  // Probes every layer (a few short-lived children; tens of ms) and prepares what launches share.
  static std::unique_ptr<SandboxHost> create(HostOptions options);
  ~SandboxHost();

  const std::vector<LayerReport>& layers() const { return layers_; }
  const HostOptions& options() const { return options_; }
  bool root() const { return root_; }
  // The cgroup directories this host created for the supervisor (crash-cleanup records).
  std::vector<std::string> cgroup_dirs() const;
  // ok if every layer `policy` needs is available; otherwise names the first missing one.
  Status check(const Policy& policy) const;
  // Prepares the scope temp dir `dir` (just made, empty) for commands: for a root supervisor,
  // owned by the sandbox uid, and a tmpfs of options().temp_size where layer temp-size is
  // available. release_temp_dir() undoes the mount (call it before removing the dir).
  Status adopt_temp_dir(const std::string& dir) const;

  // Launches spec.argv under `policy`. `temp_dir` (host path) is the command's /tmp;
  // spec.cwd and spec.env are as the command sees them. On success the command has exec'd.
  // `name` names the cgroup. Failures before exec come back as a Status naming the step.
  // `netns_fd` (network denied only): a network namespace from take_network_namespace() to
  // run in instead of a fresh one.
  StatusOr<SandboxLaunch> launch(const SpawnSpec& spec, const Policy& policy, const std::string& temp_dir,
                                 const std::string& name, bool hold = false, int netns_fd = -1) const;

  // A fresh network namespace with its loopback up, for one scope's commands to share (a
  // new namespace per command costs ~1 ms, most of the isolation cost). Root only (joining
  // needs CAP_SYS_ADMIN over it); elsewhere a Status says so and commands get their own.
  // Changes the calling thread's network namespace for a moment: call it off the event loop.
  StatusOr<UniqueFd> make_network_namespace() const;
  // The same, from the spares made ahead of time when there is one (each is handed out once,
  // never used before), else made now. Making one is about a millisecond, on every new scope's
  // first command (every `corral exec` is a new connection, so a new scope): the spares take it
  // off that path.
  StatusOr<UniqueFd> take_network_namespace() const;
  // Makes spares until `count` wait (a background thread calls it after each take). Nothing on
  // a host that cannot share namespaces.
  void refill_network_namespaces(std::size_t count) const;
  // Spare cgroups for the default memory bound (HostOptions::default_memory): a command that
  // names no cap takes one made ahead of time (each used once, never before), so that its
  // launch does not wait for the memory cgroup's mkdir and limit writes (about 0.2 ms on this
  // project's CI machine). Makes spares until `count` wait; the teardown pool calls it after
  // each command's group goes, and the supervisor once at start. Nothing where the default
  // bound is off or the host has no memory controller. They go with the host.
  void refill_default_groups(std::size_t count) const;

  // The identity of the view `policy` (normalized) would get in a scope whose network
  // namespace is `netns_fd`: its mode, network and every host path by the object it resolved
  // to. None when such a command is not run from a prepared sandbox here: a non-root
  // supervisor, full access, no shared network namespace, a guard or bind under /proc, or a
  // cgroup v2 group (joined at birth, which a prepared sandbox's server may not do).
  std::optional<std::string> prepared_key(const Policy& policy, int netns_fd) const;
  // Builds a prepared sandbox for `policy` in a scope (its temp dir and network namespace),
  // about as long as one launch. At most limits::kMaxPreparedSandboxes live at once (step
  // "prepared", ENOSPC past that).
  StatusOr<std::unique_ptr<PreparedSandbox>> prepare(const Policy& policy, const std::string& temp_dir,
                                                     int netns_fd) const;
  // launch(), from a prepared sandbox of `policy`'s key: the same command, the same layers, the
  // same `enforced`. A failure of the prepared sandbox itself (not of the command) has step
  // "prepared" (and marks it broken where it is); the caller may then launch() as usual.
  StatusOr<SandboxLaunch> launch_prepared(PreparedSandbox& prepared, const SpawnSpec& spec, const Policy& policy,
                                          const std::string& name) const;

  struct Impl;
  struct LaunchParts;  // what launch() builds before the clone (sandbox.cc)

 private:
  // launch()'s steps before the clone, in order (plan_exec, a free function, comes first).
  // plan_identity: the ids inside, the groups, and whether the sandbox's init (or a prepared
  // sandbox's server) makes a network namespace or joins the scope's (the result).
  bool plan_identity(const Policy& policy, int netns_fd, sandbox::SandboxPlan& plan) const;
  bool joins_scope_network(const Policy& policy, int netns_fd) const;
  Status plan_view(const Policy& policy, const std::string& temp_dir, LaunchParts& parts) const;
  Status plan_confinement(const Policy& policy, LaunchParts& parts, SandboxLaunch& out) const;
  Status plan_cgroup(const Policy& policy, const std::string& name, LaunchParts& parts, SandboxLaunch& out) const;
  // A spare from refill_default_groups(), or null when none waits.
  std::unique_ptr<Cgroup> take_default_group() const;
  // After the plan: the clone, the id maps, and the "go" with the idmapped trees.
  StatusOr<Process> clone_from_parent(int flags, sandbox::SandboxPlan& plan, int netns_fd, const UniqueFd& birth_group,
                                      bool& born_in_group) const;
  Status map_ids_from_parent(pid_t pid) const;
  Status go_from_parent(pid_t pid, LaunchParts& parts, int sync_fd) const;
  // A digest of this process's mount table (less the temp root's mounts), which a prepared
  // view's root tree copied: a mount made or removed on the host makes views prepared before it
  // stale (prepared_key).
  std::string host_mounts_generation() const;
  // Root: a user namespace mapping host uid/gid (a workspace's owner) to the sandbox uid/gid,
  // for idmapped mounts; made once per owner and kept (the fd is borrowed from the cache).
  StatusOr<int> owner_userns(uid_t uid, gid_t gid) const;
  SandboxHost() = default;
  HostOptions options_;
  bool root_ = false;
  std::vector<LayerReport> layers_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace corral
