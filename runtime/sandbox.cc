#include "runtime/sandbox.h"

#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <spawn.h>
#include <sched.h>
#include <signal.h>
#include <linux/magic.h>
#include <net/if.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>

#include "runtime/fd_passing.h"
#include "runtime/host_path.h"
#include "runtime/landlock.h"
#include "runtime/sandbox_plan.h"
#include "runtime/seccomp_filter.h"
#include "runtime/unique_fd.h"
#include "runtime/units.h"

#ifndef AT_RECURSIVE
#define AT_RECURSIVE 0x8000
#endif

namespace corral {

using sandbox::SandboxPlan;

namespace {

// clone3 with CLONE_INTO_CGROUP (Linux 5.7), fork-like: no new stack, so the child returns
// here on its own copy of the caller's stack and must call init at once. -1 with errno if the
// kernel has no clone3 or refuses the group (the caller then clones and moves the child).
pid_t clone_into_cgroup(int flags, int cgroup_fd, int* pidfd) {
  struct {
    std::uint64_t flags, pidfd, child_tid, parent_tid, exit_signal, stack, stack_size, tls, set_tid, set_tid_size,
        cgroup;
  } args{};
  constexpr std::uint64_t kCloneIntoCgroup = 0x200000000ULL;
  args.flags = (static_cast<std::uint64_t>(flags) & ~std::uint64_t{0xff}) | kCloneIntoCgroup;
  args.pidfd = reinterpret_cast<std::uint64_t>(pidfd);
  args.exit_signal = static_cast<std::uint64_t>(flags & 0xff);
  args.cgroup = static_cast<std::uint64_t>(cgroup_fd);
  return static_cast<pid_t>(::syscall(SYS_clone3, &args, sizeof args));
}

constexpr std::size_t kInitStackBytes = 256 * 1024;
// Device nodes every non-full-access sandbox gets (docs/threat-model.md "Policy by mode"); /dev/shm is
// the scope's temp dir, so that its writes fall under the same rules as /tmp.
constexpr const char* kDevNodes[] = {"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty"};

Status write_file(const std::string& path, const std::string& data) {
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CLOEXEC));
  if (!fd) return Status::from_errno("open", errno, path);
  if (::write(fd.get(), data.data(), data.size()) != static_cast<ssize_t>(data.size()))
    return Status::from_errno("write", errno, path + " <- '" + data + "'");
  return {};
}

// A short-lived child in new namespaces: `fn` runs in it; its exit status is the probe's answer.
struct ProbeArgs {
  int (*fn)(void*);
  void* arg;
};
int probe_trampoline(void* p) {
  auto* a = static_cast<ProbeArgs*>(p);
  return a->fn(a->arg);
}

// 0 on success, else an errno (from clone, or the child's exit status).
int probe_clone(int flags, int (*fn)(void*) = nullptr, void* arg = nullptr) {
  static int (*const noop)(void*) = [](void*) -> int { return 0; };
  ProbeArgs args{fn ? fn : noop, arg};
  std::vector<char> stack(64 * 1024);
  pid_t pid = ::clone(probe_trampoline, stack.data() + stack.size(), flags | SIGCHLD, &args);
  if (pid < 0) return errno;
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return EINTR;
}

// Brings the current network namespace's loopback up; 0 or an errno.
int probe_loopback(void*) {
  UniqueFd s(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (!s) return errno;
  struct ifreq ifr {};
  std::memcpy(ifr.ifr_name, "lo", 3);
  if (::ioctl(s.get(), SIOCGIFFLAGS, &ifr) < 0) return errno;
  ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
  if (::ioctl(s.get(), SIOCSIFFLAGS, &ifr) < 0) return errno;
  return 0;
}

std::string errno_reason(const std::string& what, int err) {
  return what + " failed: " + std::strerror(err);
}

// The first gid of `uid`'s range in an /etc/subgid-format file (lines "name:start:count", the
// name being a user name or a uid number).
std::optional<gid_t> subgid_for(uid_t uid, const std::string& file) {
  std::string name = std::to_string(uid);
  std::vector<char> buf(16384);
  struct passwd pw {};
  struct passwd* found = nullptr;
  if (::getpwuid_r(uid, &pw, buf.data(), buf.size(), &found) == 0 && found) name = found->pw_name;
  std::ifstream in(file);
  for (std::string line; std::getline(in, line);) {
    auto a = line.find(':'), b = line.rfind(':');
    if (a == std::string::npos || b == a) continue;
    const std::string who = line.substr(0, a);
    if (who != name && who != std::to_string(uid)) continue;
    char* end = nullptr;
    unsigned long start = std::strtoul(line.c_str() + a + 1, &end, 10);
    unsigned long count = std::strtoul(line.c_str() + b + 1, nullptr, 10);
    if (count > 0 && start > 0) return static_cast<gid_t>(start);
  }
  return std::nullopt;
}

// Writes `pid`'s gid map through the setuid newgidmap (uidmap package): our own gid to itself,
// plus one gid of our /etc/subgid range at inside gid `gid == 0 ? 1 : 0`. A map that uses a
// subgid range leaves setgroups allowed, so the sandbox can drop its supplementary groups
// (writing gid_map ourselves needs setgroups denied first). newgidmap(1).
Status run_newgidmap(const std::string& program, pid_t pid, gid_t gid, gid_t subgid) {
  const std::string other = gid == 0 ? "1" : "0";
  std::vector<std::string> args = {program, std::to_string(pid), std::to_string(gid), std::to_string(gid), "1",
                                   other, std::to_string(subgid), "1"};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  char* envp[] = {nullptr};
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
  pid_t child = -1;
  int err = ::posix_spawn(&child, program.c_str(), &fa, nullptr, argv.data(), envp);
  posix_spawn_file_actions_destroy(&fa);
  if (err != 0) return Status::from_errno("newgidmap", err, program);
  int status = 0;
  while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    return Status::error("newgidmap", EPERM, program + " " + std::to_string(pid) + " failed (exit status " +
                                                 std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : -1) + ")");
  return {};
}

// A child that waits for its parent: for one byte on `read_fd` (then runs `then`, if any), or
// for EOF. It is a copy of us with a copy of every descriptor, the pipe's write end included:
// it closes that first, or a supervisor killed before it ends the child would leave it waiting
// forever (an orphan holding a copy of the supervisor's memory).
}  // namespace

int detail::wait_for_parent_in_child(void* p) {
  const auto* a = static_cast<const WaitArgs*>(p);
  ::close(a->write_fd);
  char c;
  ssize_t n;
  do n = ::read(a->read_fd, &c, 1);
  while (n < 0 && errno == EINTR);
  if (n != 1) return EPIPE;
  return a->then ? a->then() : 0;
}

namespace {

// Probe for a non-root supervisor: a user namespace whose gid map newgidmap writes, in which
// setgroups(0) then works. 0 or an errno; `why` says what failed.
int probe_drop_groups(const HostOptions& o, gid_t subgid, std::string& why) {
  int pipefd[2];
  if (::pipe2(pipefd, O_CLOEXEC) < 0) return errno;
  UniqueFd r(pipefd[0]), w(pipefd[1]);
  detail::WaitArgs args{r.get(), w.get(), [] { return ::setgroups(0, nullptr) == 0 ? 0 : errno; }};
  std::vector<char> stack(64 * 1024);
  pid_t pid = ::clone(detail::wait_for_parent_in_child, stack.data() + stack.size(), CLONE_NEWUSER | SIGCHLD, &args);
  if (pid < 0) return errno;
  Status st = write_file("/proc/" + std::to_string(pid) + "/uid_map",
                         std::to_string(::geteuid()) + " " + std::to_string(::geteuid()) + " 1");
  if (st.ok()) st = run_newgidmap(o.newgidmap, pid, ::getegid(), subgid);
  if (!st.ok()) why = st.message();
  char go = 'g';
  if (st.ok() && ::write(w.get(), &go, 1) != 1) st = Status::from_errno("probe", errno);
  w.reset();
  int status = 0;
  if (!st.ok()) ::kill(pid, SIGKILL);
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!st.ok()) return st.err() ? st.err() : EPERM;
  const int err = WIFEXITED(status) ? WEXITSTATUS(status) : EINTR;
  if (err) why = errno_reason("setgroups(0) after newgidmap", err);
  return err;
}

}  // namespace

struct SandboxHost::Impl {
  std::unique_ptr<CgroupManager> cgroups;
  std::optional<SeccompProgram> seccomp_denied, seccomp_allowed, seccomp_full;
  // The confining modes' filters: connect() goes to the broker (runtime/connect_broker.h).
  std::optional<SeccompProgram> seccomp_denied_broker, seccomp_allowed_broker;
  UniqueFd init_landlock_denied, init_landlock_allowed;  // init's own domain, by network
  bool idmap = false;
  bool temp_tmpfs = false;      // scope temp dirs are tmpfs mounts (layer temp-size)
  bool temp_root_mounted = false;  // the temp root is bound onto itself, unbindable
  std::optional<gid_t> subgid;  // non-root: a gid of our /etc/subgid range, for newgidmap
  std::mutex userns_mutex;      // guards owner_userns
  std::map<std::pair<uid_t, gid_t>, UniqueFd> owner_userns;  // owner -> sandbox ids, for idmaps
  UniqueFd host_netns;  // ours, to come back to after cloning into a scope's namespace
  std::atomic<int> prepared_count{0};  // live PreparedSandboxes (bounded: limits::kMaxPreparedSandboxes)
  UniqueFd mounts_fd{::open("/proc/self/mounts", O_RDONLY | O_CLOEXEC)};  // polled for changes
  std::mutex mounts_mutex;   // guards mounts_digest
  std::string mounts_digest;  // of our mount table, as the views copy it (host_mounts_generation)
  std::mutex spare_mutex;           // guards spare_netns, spare_groups, spare_serial
  std::vector<UniqueFd> spare_netns;  // fresh, unused network namespaces (take_network_namespace)
  // Fresh, empty cgroups with the default memory bound (refill_default_groups). After
  // `cgroups`: they go before their manager.
  std::vector<std::unique_ptr<Cgroup>> spare_groups;
  std::uint64_t spare_serial = 0;  // their names: "spare-<n>"
  // The death pipe: every sandbox's init watches the read end; the write end is ours alone
  // (close-on-exec, and each init closes its copy first thing), so our death, however it
  // comes, is an EOF in every init, which then ends its sandbox.
  UniqueFd death_read, death_write;
};

StatusOr<int> SandboxHost::owner_userns(uid_t uid, gid_t gid) const {
  std::lock_guard<std::mutex> lock(impl_->userns_mutex);
  auto it = impl_->owner_userns.find({uid, gid});
  if (it != impl_->owner_userns.end()) return it->second.get();
  // A user namespace only needs to exist to be used for an idmap: a child's, kept by its fd.
  int pipefd[2];
  if (::pipe2(pipefd, O_CLOEXEC) < 0) return Status::from_errno("idmap", errno, "pipe");
  UniqueFd r(pipefd[0]), w(pipefd[1]);
  detail::WaitArgs args{r.get(), w.get(), nullptr};
  std::vector<char> stack(64 * 1024);
  pid_t pid = ::clone(detail::wait_for_parent_in_child, stack.data() + stack.size(), CLONE_NEWUSER | SIGCHLD, &args);
  if (pid < 0) return Status::from_errno("idmap", errno, "clone(CLONE_NEWUSER)");
  const std::string proc = "/proc/" + std::to_string(pid);
  Status st = write_file(proc + "/uid_map", std::to_string(uid) + " " + std::to_string(options_.sandbox_uid) + " 1");
  if (st.ok()) st = write_file(proc + "/gid_map", std::to_string(gid) + " " + std::to_string(options_.sandbox_gid) + " 1");
  UniqueFd ns(::open((proc + "/ns/user").c_str(), O_RDONLY | O_CLOEXEC));
  if (st.ok() && !ns) st = Status::from_errno("idmap", errno, proc + "/ns/user");
  ::kill(pid, SIGKILL);
  int status;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!st.ok()) return st;
  const int fd = ns.get();
  impl_->owner_userns.emplace(std::make_pair(uid, gid), std::move(ns));
  return fd;
}

StatusOr<UniqueFd> SandboxHost::make_network_namespace() const {
  if (!root_ || !impl_->host_netns) return Status::error("netns", EPERM, "shared network namespaces need a root supervisor");
  if (::unshare(CLONE_NEWNET) < 0) return Status::from_errno("netns", errno, "unshare(CLONE_NEWNET)");
  UniqueFd ns(::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC));
  const int open_errno = errno;
  int lo_errno = probe_loopback(nullptr);
  // Back to our own namespace whatever happened: a supervisor left in the wrong one would be
  // wrong for everything after.
  if (::setns(impl_->host_netns.get(), CLONE_NEWNET) < 0) std::abort();
  if (!ns) return Status::from_errno("netns", open_errno, "/proc/thread-self/ns/net");
  if (lo_errno) return Status::from_errno("netns", lo_errno, "bringing the loopback up");
  return ns;
}

StatusOr<UniqueFd> SandboxHost::take_network_namespace() const {
  {
    std::lock_guard<std::mutex> lock(impl_->spare_mutex);
    if (!impl_->spare_netns.empty()) {
      UniqueFd ns = std::move(impl_->spare_netns.back());
      impl_->spare_netns.pop_back();
      return ns;
    }
  }
  return make_network_namespace();
}

void SandboxHost::refill_network_namespaces(std::size_t count) const {
  if (!root_ || !impl_->host_netns) return;
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(impl_->spare_mutex);
      if (impl_->spare_netns.size() >= count) return;
    }
    auto ns = make_network_namespace();
    if (!ns.ok()) return;  // the take will say why
    std::lock_guard<std::mutex> lock(impl_->spare_mutex);
    impl_->spare_netns.push_back(std::move(ns).value());
  }
}

void SandboxHost::refill_default_groups(std::size_t count) const {
  if (!options_.default_memory || !impl_->cgroups->capabilities().memory) return;
  CgroupLimits limits;
  limits.memory_bytes = options_.default_memory;
  for (;;) {
    std::string name;
    {
      std::lock_guard<std::mutex> lock(impl_->spare_mutex);
      if (impl_->spare_groups.size() >= count) return;
      name = "spare-" + std::to_string(++impl_->spare_serial);
    }
    auto group = impl_->cgroups->create_group(name, limits, false);
    if (!group.ok()) return;  // the launch that finds none makes its own, and says why it could not
    std::lock_guard<std::mutex> lock(impl_->spare_mutex);
    impl_->spare_groups.push_back(std::move(group).value());
  }
}

std::unique_ptr<Cgroup> SandboxHost::take_default_group() const {
  std::lock_guard<std::mutex> lock(impl_->spare_mutex);
  if (impl_->spare_groups.empty()) return nullptr;
  std::unique_ptr<Cgroup> group = std::move(impl_->spare_groups.back());
  impl_->spare_groups.pop_back();
  return group;
}

SandboxHost::~SandboxHost() {
  // Whatever scope tmpfs mounts are left go with it.
  if (impl_ && impl_->temp_root_mounted) ::umount2(options_.temp_root.c_str(), MNT_DETACH | UMOUNT_NOFOLLOW);
}

std::vector<std::string> SandboxHost::cgroup_dirs() const { return impl_->cgroups->created_dirs(); }

std::unique_ptr<SandboxHost> SandboxHost::create(HostOptions options) {
  std::unique_ptr<SandboxHost> host(new SandboxHost());
  host->options_ = std::move(options);
  host->root_ = ::geteuid() == 0;
  host->impl_ = std::make_unique<Impl>();
  host->impl_->host_netns.reset(::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC));
  if (int death[2]; ::pipe2(death, O_CLOEXEC) == 0) {
    host->impl_->death_read.reset(death[0]);
    host->impl_->death_write.reset(death[1]);
  }
  auto& layers = host->layers_;
  auto add = [&](Layer layer, bool ok, std::string reason) { layers.push_back(layer_report(layer, ok, std::move(reason))); };

  int err = probe_clone(CLONE_NEWUSER);
  add(Layer::user_ns, err == 0, err == 0 ? "clone(CLONE_NEWUSER) works" : errno_reason("clone(CLONE_NEWUSER)", err));
  const int u = err == 0 ? CLONE_NEWUSER : 0;
  struct NsProbe {
    Layer layer;
    int flag;
  };
  for (NsProbe ns : {NsProbe{Layer::mount_ns, CLONE_NEWNS}, NsProbe{Layer::pid_ns, CLONE_NEWPID},
                     NsProbe{Layer::ipc_ns, CLONE_NEWIPC}, NsProbe{Layer::uts_ns, CLONE_NEWUTS}}) {
    err = probe_clone(u | ns.flag);
    add(ns.layer, err == 0, err == 0 ? std::string("clone works inside a user namespace") : errno_reason("clone", err));
  }
  err = probe_clone(u | CLONE_NEWCGROUP);
  add(Layer::cgroup_ns, err == 0,
      err == 0 ? "/proc/self/cgroup shows \"/\"; /sys/fs/cgroup is masked" : errno_reason("clone(CLONE_NEWCGROUP)", err));
  err = probe_clone(u | CLONE_NEWNET, probe_loopback);
  add(Layer::net_ns, err == 0, err == 0 ? "a fresh network namespace with only its own loopback" : errno_reason("clone(CLONE_NEWNET)", err));

  if (Status st = probe_landlock(); st.ok())
    add(Layer::landlock, true, "Landlock ABI " + std::to_string(landlock_abi()) + ": writes only beneath writable roots");
  else
    add(Layer::landlock, false, st.message());

  // Three filters: network denied (socket families allowlisted), network allowed in a
  // confining mode (AF_VSOCK refused), network allowed with danger-full-access.
  auto denied = build_seccomp_program(SeccompPolicy{true, true});
  auto allowed = build_seccomp_program(SeccompPolicy{false, true});
  auto full = build_seccomp_program(SeccompPolicy{false, false});
  Status seccomp_probe = probe_seccomp();
  if (denied.ok() && allowed.ok() && full.ok() && seccomp_probe.ok()) {
    host->impl_->seccomp_denied.emplace(std::move(denied).value());
    host->impl_->seccomp_allowed.emplace(std::move(allowed).value());
    host->impl_->seccomp_full.emplace(std::move(full).value());
    add(Layer::seccomp, true,
        "libseccomp filter with no_new_privs (" + std::to_string(host->impl_->seccomp_denied->instructions()) +
            " BPF instructions); network denied: socket families AF_UNIX, AF_INET, AF_INET6, NETLINK_ROUTE only; "
            "AF_VSOCK refused but in danger-full-access");
  } else {
    add(Layer::seccomp, false,
        !seccomp_probe.ok() ? seccomp_probe.message()
        : !denied.ok()      ? denied.status().message()
        : !allowed.ok()     ? allowed.status().message()
                            : full.status().message());
  }

  // Host IPC: the broker needs seccomp user notification with a listener we may create here
  // (not nested under another one), pidfds for threads (6.9), and Landlock's abstract-socket
  // and signal scopes (ABI 6) for init's own domain.
  {
    SeccompPolicy d, a;
    d.deny_network = true;
    a.deny_network = false;
    d.deny_vsock = a.deny_vsock = true;
    d.broker_connect = a.broker_connect = true;
    auto denied_b = build_seccomp_program(d);
    auto allowed_b = build_seccomp_program(a);
    std::string why;
    if (!denied_b.ok() || !allowed_b.ok()) why = (!denied_b.ok() ? denied_b.status() : allowed_b.status()).message();
    if (why.empty() && landlock_abi() < 6)
      why = "needs Landlock ABI 6 (abstract-socket scoping), this kernel has " + std::to_string(landlock_abi());
    if (why.empty()) {
      UniqueFd self(static_cast<int>(::syscall(434 /* pidfd_open */, ::gettid(), O_EXCL /* PIDFD_THREAD */)));
      if (!self) why = errno_reason("pidfd_open(PIDFD_THREAD) (Linux 6.9)", errno);
    }
    if (why.empty()) {
      for (bool deny : {true, false}) {
        // TCP as the command's own domain has it (launch(): not handled; the network
        // namespace is the barrier), so the two stay the same per network setting.
        LandlockPolicy lp;
        lp.handle_fs = false;
        lp.deny_tcp = false;
        auto rs = build_landlock_ruleset(lp);
        if (!rs.ok()) {
          why = rs.status().message();
          break;
        }
        (deny ? host->impl_->init_landlock_denied : host->impl_->init_landlock_allowed) = std::move(rs).value();
      }
    }
    if (why.empty())
      if (Status st = probe_seccomp_notify(); !st.ok()) why = st.message();
    if (why.empty()) {
      host->impl_->seccomp_denied_broker.emplace(std::move(denied_b).value());
      host->impl_->seccomp_allowed_broker.emplace(std::move(allowed_b).value());
      add(Layer::host_ipc, true,
          "connect() brokered by the sandbox's init: host Unix sockets only with --allow-socket; "
          "no Unix datagram sockets; abstract sockets scoped (Landlock)");
    } else {
      add(Layer::host_ipc, false, why);
    }
  }
  if (host->options_.run_keep.empty()) {
    std::unique_ptr<char, decltype(&free)> real(::realpath("/etc/resolv.conf", nullptr), &free);
    if (real && std::string(real.get()).rfind("/run/", 0) == 0) host->options_.run_keep.push_back(real.get());
  }

  host->impl_->cgroups =
      CgroupManager::create(host->options_.cgroup_root, "/proc/self/cgroup", host->options_.before_cgroup_mkdir);
  const CgroupCapabilities& cg = host->impl_->cgroups->capabilities();
  add(Layer::cgroup_memory, cg.memory, cg.memory_reason);
  add(Layer::cgroup_pids, cg.pids, cg.pids_reason);
  add(Layer::cgroup_cpu, cg.cpu, cg.cpu_reason);
  add(Layer::cgroup_cpu_time, cg.cpu_accounting, cg.cpu_accounting_reason);
  add(Layer::cgroup_kill, cg.kill, cg.kill_reason);
  add(Layer::rlimits, true,
      "core 0, file size and CPU-time floors per process; " +
          (host->options_.default_pids
               ? "at most " + std::to_string(host->options_.default_pids) +
                     " processes per command without --pids (RLIMIT_NPROC, serve --default-pids)"
               : std::string("no process bound without --pids (serve --default-pids 0)")));
  add(Layer::caps_dropped, true, "empty bounding, ambient, effective and permitted sets; no_new_privs");
  if (host->root_) {
    add(Layer::groups_dropped, true, "setgroups(0) in the sandbox: no supplementary groups");
  } else {
    auto subgid = subgid_for(::geteuid(), host->options_.subgid_file);
    std::string why;
    if (::access(host->options_.newgidmap.c_str(), X_OK) != 0) {
      why = host->options_.newgidmap + " is missing (Debian package uidmap)";
    } else if (!subgid) {
      why = "uid " + std::to_string(::geteuid()) + " has no range in " + host->options_.subgid_file +
            " for newgidmap (e.g. `usermod --add-subgids 100000-165535 USER`)";
    } else if (probe_drop_groups(host->options_, *subgid, why) == 0) {
      host->impl_->subgid = subgid;
    }
    if (host->impl_->subgid)
      add(Layer::groups_dropped, true, "newgidmap maps a gid of " + host->options_.subgid_file + ", then setgroups(0)");
    else
      add(Layer::groups_dropped, false,
          "an unprivileged user namespace denies setgroups, so sandboxes would keep the supervisor's supplementary "
          "groups: " + why);
  }

  // Idmapped mounts make root-owned workspaces writable for the sandbox uid (root only).
  if (host->root_) {
    err = 0;
    UniqueFd tree(::open_tree(AT_FDCWD, host->options_.temp_root.c_str(), OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC));
    if (!tree) err = errno;
    // Any user namespace but the initial one will do: our own probe child's.
    int pipefd[2];
    if (!err && ::pipe2(pipefd, O_CLOEXEC) < 0) err = errno;
    if (!err) {
      UniqueFd r(pipefd[0]), w(pipefd[1]);
      std::vector<char> stack(64 * 1024);
      detail::WaitArgs args{r.get(), w.get(), nullptr};
      pid_t pid = ::clone(detail::wait_for_parent_in_child, stack.data() + stack.size(), CLONE_NEWUSER | SIGCHLD, &args);
      if (pid < 0) err = errno;
      else {
        Status st = write_file("/proc/" + std::to_string(pid) + "/uid_map", "0 " + std::to_string(host->options_.sandbox_uid) + " 1");
        if (st.ok()) st = write_file("/proc/" + std::to_string(pid) + "/gid_map", "0 " + std::to_string(host->options_.sandbox_gid) + " 1");
        UniqueFd ns(::open(("/proc/" + std::to_string(pid) + "/ns/user").c_str(), O_RDONLY | O_CLOEXEC));
        if (!st.ok()) err = st.err() ? st.err() : EINVAL;
        else if (!ns) err = errno;
        else {
          struct mount_attr attr {};
          attr.attr_set = MOUNT_ATTR_IDMAP;
          attr.userns_fd = static_cast<std::uint64_t>(ns.get());
          if (::mount_setattr(tree.get(), "", AT_EMPTY_PATH, &attr, sizeof attr) < 0) err = errno;
        }
        ::kill(pid, SIGKILL);
        int status;
        ::waitpid(pid, &status, 0);
      }
    }
    host->impl_->idmap = err == 0;
    add(Layer::idmapped_mounts, err == 0,
        err == 0 ? "root-owned workspace roots are shown writable to the sandbox uid " + std::to_string(host->options_.sandbox_uid)
                 : errno_reason("idmapping a mount of " + host->options_.temp_root, err));
  }

  // Scope temp dirs as tmpfs mounts of their own (root only): tried once on an empty dir.
  if (host->options_.temp_size == 0) {
    add(Layer::temp_size, false, "serve --temp-size 0: scope temp dirs are host directories, unbounded");
  } else if (!host->root_) {
    add(Layer::temp_size, false, "a non-root supervisor cannot mount a tmpfs: scope temp dirs are host directories, unbounded");
  } else if (!host->options_.own_temp_root) {
    add(Layer::temp_size, false, "the temp root " + host->options_.temp_root + " is not a directory of the supervisor's own");
  } else {
    // The temp root becomes a mount of its own, unbindable: a recursive copy of the host's tree
    // (each sandbox's view, launch()) leaves it and every scope's tmpfs beneath it out.
    std::string dir = host->options_.temp_root + "/corral-probe-XXXXXX";
    const char* root = host->options_.temp_root.c_str();
    err = 0;
    if (::mount(root, root, nullptr, MS_BIND, nullptr) < 0) err = errno;
    else {
      host->impl_->temp_root_mounted = true;
      if (::mount(nullptr, root, nullptr, MS_UNBINDABLE, nullptr) < 0) err = errno;
    }
    if (err) {
    } else if (::mkdtemp(dir.data()) == nullptr) err = errno;
    else {
      if (::mount("tmpfs", dir.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, "size=4k,mode=0700") < 0) err = errno;
      else ::umount2(dir.c_str(), MNT_DETACH | UMOUNT_NOFOLLOW);
      ::rmdir(dir.c_str());
    }
    host->impl_->temp_tmpfs = err == 0;
    add(Layer::temp_size, err == 0,
        err == 0 ? "each scope's /tmp is a tmpfs of " + format_size(host->options_.temp_size) +
                       ", whose pages count against the writing command's memory cap"
                 : errno_reason("mounting a tmpfs in " + host->options_.temp_root, err));
  }

  // Finally the whole mount view, end to end: a sandboxed /bin/true. While it runs, its own
  // report says "being probed" (check() never passes a layer without a report).
  bool mount_prereqs = true;
  for (Layer need : {Layer::user_ns, Layer::mount_ns, Layer::pid_ns})
    for (const auto& l : layers)
      if (l.layer == need && !l.available) mount_prereqs = false;
  if (mount_prereqs) {
    SpawnSpec s;
    s.argv = {"/bin/true"};
    s.env = {"PATH=/usr/bin:/bin"};
    s.cwd = "/";
    UniqueFd devnull(::open("/dev/null", O_RDWR | O_CLOEXEC));
    s.fds = {{devnull.get(), 0}, {devnull.get(), 1}, {devnull.get(), 2}};
    Policy p;
    p.network = Network::allowed;  // the view only; the network layer was probed above
    add(Layer::mount_view, true, "being probed");
    // The view is probed with or without the broker (a host without it still runs
    // danger-full-access, which needs the view too): while it runs, host-ipc does not stop it.
    LayerReport* host_ipc = nullptr;
    for (auto& l : layers)
      if (l.layer == Layer::host_ipc) host_ipc = &l;
    const LayerReport saved = host_ipc ? *host_ipc : LayerReport{};
    if (host_ipc) host_ipc->available = true;
    // The view alone: a missing groups layer is reported by its own name, not as the view's.
    const bool allow_groups = std::exchange(host->options_.allow_supplementary_groups, true);
    // A temp dir of its own, made as a scope's is (the temp root itself may be unbindable).
    std::string temp = host->options_.temp_root + "/corral-probe-XXXXXX";
    StatusOr<SandboxLaunch> launched = Status::invalid("not launched");
    if (::mkdtemp(temp.data()) != nullptr) {
      Status st = host->adopt_temp_dir(temp);
      launched = st.ok() ? host->launch(s, p, temp, "probe") : StatusOr<SandboxLaunch>(st);
    } else {
      launched = Status::from_errno("mkdtemp", errno, temp);
      temp.clear();
    }
    host->options_.allow_supplementary_groups = allow_groups;
    layers.pop_back();
    if (host_ipc) *host_ipc = saved;
    if (launched.ok()) {
      ExitInfo info;
      launched->init.reap(info, true);
    }
    if (!temp.empty()) {
      release_temp_dir(temp);
      ::rmdir(temp.c_str());
    }
    if (launched.ok()) {
      add(Layer::mount_view, true, "read-only root, writable roots and /tmp, private /proc and /dev, masked paths");
    } else {
      add(Layer::mount_view, false, launched.status().message());
    }
  } else {
    add(Layer::mount_view, false, "needs user, mount and PID namespaces");
  }
  return host;
}

Status SandboxHost::check(const Policy& policy) const {
  std::vector<Layer> needed = {Layer::user_ns, Layer::mount_ns,   Layer::pid_ns,  Layer::ipc_ns,
                               Layer::uts_ns,  Layer::cgroup_ns, Layer::mount_view, Layer::seccomp};
  if (!options_.allow_supplementary_groups) needed.push_back(Layer::groups_dropped);
  if (policy.network == Network::denied) needed.push_back(Layer::net_ns);
  if (policy.mode != Mode::danger_full_access) {
    needed.push_back(Layer::landlock);
    needed.push_back(Layer::host_ipc);
  }
  if (policy.caps.limits_memory()) needed.push_back(Layer::cgroup_memory);
  if (policy.caps.limits_pids()) needed.push_back(Layer::cgroup_pids);
  if (policy.caps.cpus) needed.push_back(Layer::cgroup_cpu);
  if (policy.caps.cpu_time) needed.push_back(Layer::cgroup_cpu_time);
  return require_layers(layers_, needed);
}

Status SandboxHost::adopt_temp_dir(const std::string& dir) const {
  if (!root_) return {};
  // The dir is ours (mkdtemp, in our 0711 temp root): nothing a sandbox or another user can
  // rename or replace, so its name is safe to use here.
  if (impl_->temp_tmpfs) {
    const std::string data = "size=" + std::to_string(options_.temp_size) + ",mode=0700,uid=" +
                             std::to_string(options_.sandbox_uid) + ",gid=" + std::to_string(options_.sandbox_gid);
    if (::mount("tmpfs", dir.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, data.c_str()) < 0)
      return Status::from_errno("mount", errno, "the scope's temp dir tmpfs on " + dir);
    return {};
  }
  if (::chown(dir.c_str(), options_.sandbox_uid, options_.sandbox_gid) < 0) return Status::from_errno("chown", errno, dir);
  return {};
}

void release_temp_dir(const std::string& dir) {
  // EINVAL when it is no mount point (a plain dir): nothing to do.
  ::umount2(dir.c_str(), MNT_DETACH | UMOUNT_NOFOLLOW);
}

bool SandboxLaunch::read_report(ExitInfo& info) {
  sandbox::Report r{};
  ssize_t n = ::read(report.get(), &r, sizeof r);
  if (n != static_cast<ssize_t>(sizeof r)) return false;
  info.exited = r.exited != 0;
  info.exit_code = r.code;
  info.signal = r.signal;
  info.user_cpu_ms = r.user_cpu_us / 1000;
  info.sys_cpu_ms = r.sys_cpu_us / 1000;
  info.max_rss_kb = r.max_rss_kb;
  return true;
}

namespace {

// Reads the error pipe to EOF: nothing means the command exec'd; a report names the step.
// Never longer than limits::kSetupDeadline: a sandbox's init runs as the sandbox uid, which any
// host process of that uid may SIGSTOP, and a launch must not wait for it forever (the caller
// then kills the init: SIGKILL ends a stopped process too).
Status read_child_errors(int fd, const SpawnSpec* spec, const std::string& program, bool stop_at_ready, bool* ready,
                         std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::now() +
                                                                          limits::kSetupDeadline) {
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0)
      return Status::error("setup", ETIMEDOUT,
                           "the sandbox's setup did not finish within " +
                               std::to_string(limits::kSetupDeadline.count() / 1000) +
                               " s (its init was stopped or is stuck); it was killed");
    pollfd in{fd, POLLIN, 0};
    const int r = ::poll(&in, 1, static_cast<int>(left.count()));
    if (r > 0) break;
    if (r < 0 && errno != EINTR) return Status::from_errno("setup", errno, "waiting for the sandbox's setup");
  }
  child::ChildError report{};
  ssize_t n;
  do {
    n = ::read(fd, &report, sizeof report);
  } while (n < 0 && errno == EINTR);
  if (n != static_cast<ssize_t>(sizeof report)) return {};
  const int step = static_cast<int>(report.step);
  if (step == static_cast<int>(sandbox::Step::ready)) {
    if (ready) *ready = true;
    if (stop_at_ready) return {};
    return read_child_errors(fd, spec, program, false, nullptr, deadline);  // one deadline for the whole setup
  }
  std::string detail;
  if (step == static_cast<int>(sandbox::Step::exec)) detail = "'" + program + "'";
  if (step == static_cast<int>(sandbox::Step::chdir) && spec) detail = "'" + spec->cwd + "'";
  return Status::from_errno(sandbox::step_name(step), report.err, detail);
}

}  // namespace

Status SandboxLaunch::release() {
  if (!release_fd) return Status::error("release", EALREADY, "already released");
  char go = 'g';
  ssize_t n = ::write(release_fd.get(), &go, 1);
  release_fd.reset();
  if (n != 1) return Status::from_errno("release", errno);
  Status st = read_child_errors(error_read.get(), nullptr, program, false, nullptr);
  error_read.reset();
  return st;
}

namespace {

struct BindSpec {
  HostPath source;
  std::string target;
  bool writable;
};

struct GuardSpec {
  std::string path;
  dev_t dev;
  ino_t ino;
  sandbox::GuardKind kind;
  bool is_dir;
};

bool under(const std::string& path, const std::string& root) {
  return path == root || root == "/" || path.rfind(root + "/", 0) == 0;
}

std::string rel_of(const std::string& path, const std::string& root) {
  if (path == root) return "";
  return root == "/" ? path.substr(1) : path.substr(root.size() + 1);
}

std::string join_path(const std::string& root, const std::string& rel) {
  if (rel.empty()) return root;
  return root == "/" ? "/" + rel : root + "/" + rel;
}

// Where each guarded path shows inside the view, and which of its ancestors must be pinned so
// that it cannot be renamed away (docs/threat-model.md, "Guard the thing"). A guard shows at its
// own path unless a bind from elsewhere covers it (the temp dir at /tmp), and at target/rel for
// every bind whose source holds it. Inside a writable bind (or anywhere in danger-full-access,
// where the host is writable as far as the uid goes) every ancestor between the writable root
// and the guard is pinned; each is resolved from the bind's descriptor without following links.
StatusOr<std::vector<GuardSpec>> plan_guards(const std::vector<BindSpec>& binds, const std::vector<HostPath>& protect,
                                             const std::vector<HostPath>& deny_read, bool full) {
  std::vector<GuardSpec> pins, out;
  std::map<std::string, std::size_t> seen_pins;
  auto add_pins = [&](const HostPath& base, const std::string& inside_root, const std::string& rel) -> Status {
    std::string prefix;
    std::size_t i = 0;
    while (true) {
      std::size_t j = rel.find('/', i);
      if (j == std::string::npos) break;  // the guard itself is not a pin
      prefix = rel.substr(0, j);
      i = j + 1;
      const std::string inside = join_path(inside_root, prefix);
      if (seen_pins.count(inside)) continue;
      auto fd = open_below(base.get(), prefix);
      if (!fd.ok()) return Status::error("guard", fd.status().err(), "pinning '" + inside + "': " + fd.status().message());
      struct stat st {};
      if (::fstat(fd->get(), &st) < 0) return Status::from_errno("guard", errno, inside);
      seen_pins[inside] = pins.size();
      pins.push_back({inside, st.st_dev, st.st_ino, sandbox::GuardKind::pin, S_ISDIR(st.st_mode)});
    }
    return {};
  };
  auto add = [&](const HostPath& g, sandbox::GuardKind kind) -> Status {
    std::vector<std::string> places;
    auto place = [&](const std::string& where) {
      if (std::find(places.begin(), places.end(), where) != places.end()) return;
      places.push_back(where);
      out.push_back({where, g.st.st_dev, g.st.st_ino, kind, S_ISDIR(g.st.st_mode)});
    };
    const BindSpec* cover = nullptr;  // the bind whose target is the longest prefix of g.path
    for (const auto& b : binds)
      if (under(g.path, b.target) && (!cover || b.target.size() > cover->target.size())) cover = &b;
    if (!cover || cover->source.path == cover->target) {
      place(g.path);
      if (!cover && full) {
        UniqueFd root(::open("/", O_PATH | O_DIRECTORY | O_CLOEXEC));
        if (!root) return Status::from_errno("guard", errno, "/");
        HostPath r;
        r.path = "/";
        r.fd = std::make_shared<UniqueFd>(std::move(root));
        if (Status st = add_pins(r, "/", rel_of(g.path, "/")); !st.ok()) return st;
      }
    }
    for (const auto& b : binds) {
      if (!under(g.path, b.source.path)) continue;
      const std::string rel = rel_of(g.path, b.source.path);
      place(join_path(b.target, rel));
      if (b.writable)
        if (Status st = add_pins(b.source, b.target, rel); !st.ok()) return st;
    }
    return {};
  };
  for (const auto& g : protect)
    if (Status st = add(g, sandbox::GuardKind::protect); !st.ok()) return st;
  for (const auto& g : deny_read)
    if (Status st = add(g, sandbox::GuardKind::mask); !st.ok()) return st;
  std::stable_sort(pins.begin(), pins.end(), [](const GuardSpec& a, const GuardSpec& b) {
    return std::count(a.path.begin(), a.path.end(), '/') < std::count(b.path.begin(), b.path.end(), '/');
  });
  // Protects before masks: a mask inside a protected tree lands on the read-only copy.
  std::stable_sort(out.begin(), out.end(), [](const GuardSpec& a, const GuardSpec& b) {
    return a.kind == sandbox::GuardKind::protect && b.kind == sandbox::GuardKind::mask;
  });
  pins.insert(pins.end(), out.begin(), out.end());
  return pins;
}

}  // namespace

// What a launch builds before the clone, and keeps until the child has its copies: the plan
// (runtime/sandbox_plan.h) and everything the plan points into. Built in steps, one concern
// each: plan_exec, plan_view, plan_confinement, plan_cgroup.
struct SandboxHost::LaunchParts {
  LaunchParts() { std::memset(&plan, 0, sizeof plan); }
  SandboxPlan plan;
  // plan_exec: the program and its arguments, environment and descriptors.
  std::vector<std::string> candidates, argv_store, env_store;
  std::vector<const char*> exec_paths;
  std::vector<char*> argv, envp;
  // plan_view: the mount view.
  UniqueFd root_tree;             // the host's tree, cloned for the view (a tmpfs temp root)
  Policy resolved_copy;           // a policy that came unresolved (the engine's own tests)
  HostPath temp;                  // the scope's temp dir
  bool temp_is_tmpfs = false;     // ... bounded (layer temp-size)
  std::vector<BindSpec> binds;    // the temp dir, workspaces, --bind, --allow-socket
  std::vector<UniqueFd> cloned_trees;  // root: each bind source, cloned here from its descriptor
  std::vector<std::size_t> idmap_binds;  // binds whose idmapped tree is made after the clone
  bool idmapped_other = false;    // a writable root of another owner shown through an idmap
  std::vector<std::string> mask_paths;
  std::vector<GuardSpec> guards;
  // plan_confinement: rlimits, Landlock, seccomp, the connect broker.
  UniqueFd landlock;
  bool broker = false;
  // plan_cgroup: whole-tree accounting and caps.
  CgroupLimits limits;
  CgroupJoin join;                 // how init enters its group (runtime/cgroup.h)
  bool join_optional = true;       // the default bound alone: best effort
};

namespace {

// RLIMIT_FSIZE, RLIMIT_NPROC and RLIMIT_CPU (0: none) for a command under `policy`.
void plan_rlimits(const Policy& policy, std::uint64_t default_pids, std::uint64_t& fsize, std::uint64_t& nproc,
                  std::uint64_t& cpu_s) {
  fsize = policy.caps.max_file_size.value_or(0);
  nproc = policy.caps.pids.value_or(default_pids);
  cpu_s = policy.caps.cpu_time ? static_cast<std::uint64_t>((policy.caps.cpu_time->count() + 999) / 1000) + 1 : 0;
}

// The program as the child will exec it: the PATH candidates for argv[0], argv, envp, the
// working directory and where each descriptor goes.
void plan_exec(const SpawnSpec& spec, SandboxHost::LaunchParts& parts) {
  parts.candidates = exec_candidates(spec.argv[0], spec.env);
  for (const auto& c : parts.candidates) parts.exec_paths.push_back(c.c_str());
  parts.argv_store = spec.argv;
  parts.env_store = spec.env;
  auto &argv = parts.argv, &envp = parts.envp;
  for (auto& a : parts.argv_store) argv.push_back(a.data());
  argv.push_back(nullptr);
  for (auto& e : parts.env_store) envp.push_back(e.data());
  envp.push_back(nullptr);

  SandboxPlan& p = parts.plan;
  p.exec.exec_paths = parts.exec_paths.data();
  p.exec.exec_path_count = parts.exec_paths.size();
  p.exec.argv = argv.data();
  p.exec.envp = envp.data();
  p.exec.cwd = spec.cwd.empty() ? nullptr : spec.cwd.c_str();
  p.exec.fds = spec.fds.data();
  p.exec.fd_count = spec.fds.size();
  int max_target = 2;
  for (const auto& m : spec.fds) max_target = std::max(max_target, m.target);
  p.exec.first_closed_fd = max_target + 1;
  sigemptyset(&p.exec.child_sigmask);
}

}  // namespace

// The mount view: the root tree, every host path by its resolved descriptor, the binds (and
// their cloned trees), /dev and /run, the masks and the guards of --protect and --deny-read.
Status SandboxHost::plan_view(const Policy& policy, const std::string& temp_dir, LaunchParts& parts) const {
  const bool full = policy.mode == Mode::danger_full_access;
  SandboxPlan& p = parts.plan;
  // The view's root: a copy of the host's tree without the unbindable temp root (and so
  // without any scope's tmpfs), cloned here where no mount is locked (see create()).
  if (impl_->temp_tmpfs) {
    parts.root_tree.reset(::open_tree(AT_FDCWD, "/", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE));
    if (!parts.root_tree) return Status::from_errno("mount-source", errno, "cloning the host's tree for the view");
    struct mount_attr priv {};
    priv.propagation = MS_PRIVATE;
    if (::mount_setattr(parts.root_tree.get(), "", AT_EMPTY_PATH | AT_RECURSIVE, &priv, sizeof priv) < 0)
      return Status::from_errno("mount-source", errno, "making the view's root tree private");
    p.root_tree = parts.root_tree.get();
  }

  // Every host path as the descriptor normalize() resolved (a Policy built by hand, as the
  // engine's own tests do, is resolved here with the supervisor's credentials).
  const Policy* pol = &policy;
  if (!policy.resolved) {
    parts.resolved_copy = policy;
    if (Status st = normalize(parts.resolved_copy); !st.ok()) return st;
    pol = &parts.resolved_copy;
  }
  const ResolvedPaths& rp = *pol->resolved;
  if (rp.workspaces.size() != pol->workspaces.size() || rp.bind_sources.size() != pol->binds.size() ||
      rp.protect.size() != pol->protect.size() || rp.deny_read.size() != pol->deny_read.size())
    return Status::invalid("policy paths changed after they were resolved");
  if (Status st = refuse_hidden(*pol, options_.hidden_paths); !st.ok()) return st;
  HostPath& temp = parts.temp;
  {
    auto t = resolve_host_path(temp_dir, "the scope's temp dir");
    if (!t.ok()) return t.status();
    temp = std::move(*t);
  }
  // The temp dir is bounded when it is a tmpfs mount of its own (adopt_temp_dir()).
  {
    struct statfs fs {};
    struct stat up {};
    parts.temp_is_tmpfs = ::fstatfs(temp.get(), &fs) == 0 && fs.f_type == TMPFS_MAGIC &&
                    ::fstatat(temp.get(), "..", &up, 0) == 0 && up.st_dev != temp.st.st_dev;
  }

  // Binds, in order: the temp dir as /tmp, workspace roots, then --bind.
  std::vector<BindSpec>& binds = parts.binds;
  binds.push_back({temp, "/tmp", true});
  // /var/tmp is private like /tmp: the same scope temp dir.
  struct stat var_tmp {};
  if (!full && ::lstat("/var/tmp", &var_tmp) == 0 && S_ISDIR(var_tmp.st_mode)) binds.push_back({temp, "/var/tmp", true});
  // The view's private dirs (/tmp, /var/tmp, /dev, /run, /var/run) are not the host's.
  auto in_private_dir = [full](const std::string& path) {
    std::vector<const char*> own = {"/tmp"};
    if (!full) own.insert(own.end(), {"/var/tmp", "/dev", "/run", "/var/run"});
    for (const char* d : own)
      if (path == d || path.rfind(std::string(d) + "/", 0) == 0) return true;
    return false;
  };
  // Workspace roots: writable; in read-only mode the read-only host root shows them, but for
  // one beneath the private /tmp or /var/tmp (not either itself: that stays the scope's), bound
  // read-only. /run and /dev stay empty of the host's, as in every mode.
  auto beneath_temp = [](const std::string& path) { return path.rfind("/tmp/", 0) == 0 || path.rfind("/var/tmp/", 0) == 0; };
  for (const auto& w : rp.workspaces)
    if (pol->mode != Mode::read_only)
      binds.push_back({w, w.path, true});
    else if (beneath_temp(w.path))
      binds.push_back({w, w.path, false});
  for (std::size_t i = 0; i < pol->binds.size(); ++i)
    binds.push_back({rp.bind_sources[i], pol->binds[i].target, pol->binds[i].writable && pol->mode != Mode::read_only});
  // Each --allow-socket at its own path (read-only), so that it is there even where the view
  // is empty (/run) or private (/tmp). What the broker allows is the inode normalize() found.
  if (!full)
    for (const auto& a : pol->allow_sockets) {
      auto sock = resolve_host_path(a.path, "--allow-socket");
      if (!sock.ok()) return sock.status();
      binds.push_back({std::move(*sock), a.path, false});
    }
  if (binds.size() > sandbox::kMaxBinds) return Status::invalid("too many binds and workspaces (max 63)");
  for (std::size_t i = 0; i < binds.size(); ++i) {
    const struct stat& st = binds[i].source.st;
    auto& b = p.binds[p.bind_count++];
    b.source = binds[i].source.path.c_str();
    b.dev = st.st_dev;
    b.ino = st.st_ino;
    b.tree_fd = -1;
    b.target = binds[i].target.c_str();
    b.writable = binds[i].writable;
    b.is_dir = S_ISDIR(st.st_mode);
    b.parent_slot = -1;
    // Whose files the sandbox uid owns in a writable root (ResolvedPaths::peer_ids): a non-root
    // peer's own, whoever owns the root; for a root peer, the root's owner's.
    const uid_t as_uid = rp.peer_ids ? rp.peer_ids->first : st.st_uid;
    const gid_t as_gid = rp.peer_ids ? rp.peer_ids->second : st.st_gid;
    // A root-owned writable root of a root peer is shown owned by the sandbox uid through an
    // idmapped mount made with the child's own user namespace (0 -> the sandbox uid).
    if (root_ && b.writable && as_uid == 0 && binds[i].source.path != temp.path && impl_->idmap) {
      b.parent_slot = static_cast<int>(parts.idmap_binds.size());
      parts.idmap_binds.push_back(i);
    } else if (root_) {
      // The child, in its own mount namespace, could not clone a tree of ours.
      UniqueFd tree(::open_tree(binds[i].source.get(), "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE | AT_EMPTY_PATH));
      if (!tree) return Status::from_errno("mount-source", errno, binds[i].source.path);
      // A clone of a shared host mount joins its peer group: private, so that nothing mounted
      // on it inside (pins, guards) propagates back to the host, and teardown stays local.
      struct mount_attr priv {};
      priv.propagation = MS_PRIVATE;
      if (::mount_setattr(tree.get(), "", AT_EMPTY_PATH | AT_RECURSIVE, &priv, sizeof priv) < 0)
        return Status::from_errno("mount-source", errno, "making the clone of " + binds[i].source.path + " private");
      // Any other writable root (the peer could write it: policy.h): the files of `as_uid`
      // shown owned by the sandbox uid, through a user namespace mapping that uid (and gid) to
      // the sandbox's; everyone else's files keep only their "other" permission bits. A
      // filesystem that cannot idmap keeps it as it is (the sandbox uid writes where modes allow).
      if (b.writable && binds[i].source.path != temp.path && impl_->idmap && as_uid != options_.sandbox_uid) {
        auto ns = owner_userns(as_uid, as_gid);
        if (!ns.ok()) return ns.status();
        struct mount_attr attr {};
        attr.attr_set = MOUNT_ATTR_IDMAP;
        attr.userns_fd = static_cast<std::uint64_t>(*ns);
        if (::mount_setattr(tree.get(), "", AT_EMPTY_PATH | AT_RECURSIVE, &attr, sizeof attr) == 0) parts.idmapped_other = true;
      }
      b.tree_fd = tree.get();
      parts.cloned_trees.push_back(std::move(tree));
    }
  }
  if (!full) {
    for (const char* d : kDevNodes)
      if (::access(d, F_OK) == 0) p.dev_nodes[p.dev_node_count++] = d;
    p.dev_shm_source = temp_dir.c_str();
    p.empty_run = true;
    struct stat var_run {};
    if (::lstat("/var/run", &var_run) == 0 && S_ISDIR(var_run.st_mode)) p.var_run = "/var/run";
    for (const auto& k : options_.run_keep) {
      if (p.run_keep_count == std::size(p.run_keep)) break;
      if (k.rfind("/run/", 0) == 0 && ::access(k.c_str(), F_OK) == 0) p.run_keep[p.run_keep_count++] = k.c_str();
    }
  }
  std::vector<std::string>& mask_paths = parts.mask_paths;
  // A hidden path (the socket dir, the temp root, the crash records) is masked where the view
  // shows the host's file at that path. Under the view's private dirs it is not there to hide
  // (no root that contains it is bound: refuse_hidden), and a mask would cover the private dir
  // itself (a socket directly in /tmp would mask the scope's /tmp).
  for (const auto& h : options_.hidden_paths)
    if (!in_private_dir(h)) mask_paths.push_back(h);
  // The host's cgroup trees list host pids and every supervisor's corral-<pid> group.
  mask_paths.push_back("/sys/fs/cgroup");
  if (mask_paths.size() > sandbox::kMaxMasks) return Status::invalid("too many hidden paths (max 64)");
  for (const auto& m : mask_paths) {
    struct stat st {};
    bool dir = ::stat(m.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
    p.masks[p.mask_count++] = {m.c_str(), dir};
  }
  auto guards = plan_guards(binds, rp.protect, rp.deny_read, full);
  if (!guards.ok()) return guards.status();
  parts.guards = std::move(guards).value();
  if (parts.guards.size() > sandbox::kMaxGuards)
    return Status::invalid("too many --protect/--deny-read paths and ancestors to pin (max " +
                           std::to_string(sandbox::kMaxGuards) + ")");
  for (const auto& g : parts.guards) p.guards[p.guard_count++] = {g.path.c_str(), g.dev, g.ino, g.kind, g.is_dir};
  return {};
}

// What confines the command itself: rlimits, its Landlock domain, its seccomp filter, and the
// connect broker in init (with init's own Landlock domain).
Status SandboxHost::plan_confinement(const Policy& policy, LaunchParts& parts, SandboxLaunch& out) const {
  const bool full = policy.mode == Mode::danger_full_access;
  SandboxPlan& p = parts.plan;
  p.limit_core = true;
  plan_rlimits(policy, options_.default_pids, p.fsize_limit, p.nproc_limit, p.cpu_limit_s);

  if (!full) {
    LandlockPolicy lp;
    lp.read_roots = {"/"};
    for (const auto& b : parts.binds)
      if (b.writable) lp.write_root_fds.push_back(b.source.get());
    for (const char* d : kDevNodes) lp.write_files.push_back(d);
    // TCP is not Landlock's to refuse: with network denied the command's own network
    // namespace is the barrier, and servers on its own loopback must work
    // (docs/threat-model.md "Policy by mode").
    lp.deny_tcp = false;
    auto ruleset = build_landlock_ruleset(lp);
    if (!ruleset.ok()) return ruleset.status();
    parts.landlock = std::move(ruleset).value();
    p.landlock_fd = parts.landlock.get();
    out.enforced.push_back(layer_name(Layer::landlock));
  }
  const bool denied = policy.network == Network::denied;
  // check() refused the confining modes if the broker is missing; only the startup probe of
  // the mount view comes here without it.
  const bool broker = parts.broker = !full && impl_->seccomp_denied_broker.has_value();
  const SeccompProgram& filter = broker ? (denied ? *impl_->seccomp_denied_broker : *impl_->seccomp_allowed_broker)
                                 : denied ? *impl_->seccomp_denied
                                 : full   ? *impl_->seccomp_full
                                          : *impl_->seccomp_allowed;
  p.seccomp = filter.prog();
  p.init_landlock_fd = -1;
  p.broker_fd = -1;
  if (broker) {
    p.broker.enabled = true;
    p.broker.scope_by_netns = denied;
    for (const auto& a : policy.allow_sockets) {
      if (p.broker.allowed_count == sandbox::kMaxAllowedSockets) return Status::invalid("too many --allow-socket paths");
      p.broker.allowed[p.broker.allowed_count++] = {a.dev, a.ino};
    }
    p.init_landlock_fd = (denied ? impl_->init_landlock_denied : impl_->init_landlock_allowed).get();
  }
  return {};
}

// The command's cgroup, where a cap or the default memory bound asks for one.
Status SandboxHost::plan_cgroup(const Policy& policy, const std::string& name, LaunchParts& parts,
                                SandboxLaunch& out) const {
  SandboxPlan& p = parts.plan;
  // Whole-tree accounting and caps.
  CgroupLimits& limits = parts.limits;
  if (policy.caps.limits_memory()) limits.memory_bytes = policy.caps.memory_bytes;
  if (policy.caps.limits_pids()) limits.pids = policy.caps.pids;
  limits.cpus = policy.caps.cpus;
  const CgroupCapabilities& cg = impl_->cgroups->capabilities();
  // The default memory bound, for a command that named no memory cap (0 is "unlimited").
  const bool default_memory = !policy.caps.memory_bytes && options_.default_memory && cg.memory;
  if (default_memory) limits.memory_bytes = options_.default_memory;
  // Only for caps: the PID namespace already ends the whole tree, and a cgroup per command
  // costs a mkdir and rmdir in every hierarchy. A cap asked for that cannot be set refuses the
  // launch; the default bound alone does not (the result's `enforced` then lacks it).
  std::vector<UniqueFd>& join_fds = parts.join.self;
  if (policy.caps.any_cgroup() || default_memory) {
    // The default bound alone: a spare made ahead (the same limits, the same hierarchies).
    std::unique_ptr<Cgroup> spare = policy.caps.any_cgroup() ? nullptr : take_default_group();
    auto group = spare ? StatusOr<std::unique_ptr<Cgroup>>(std::move(spare))
                       : impl_->cgroups->create_group(name, limits, policy.caps.any_cgroup());
    if (group.ok()) {
      auto join = (*group)->open_join();
      if (join.ok() && join->self.size() <= std::size(p.cgroup_join_fds)) {
        parts.join = std::move(join).value();
        out.cgroup = std::move(group).value();
      } else {
        group = join.ok() ? Status::error("cgroup", E2BIG, "more cgroup v1 groups than init can join") : join.status();
      }
    }
    if (!group.ok() && policy.caps.any_cgroup()) return group.status();
  }
  p.cgroup_join_count = join_fds.size();
  // The default bound alone is best effort: a command it cannot hold runs unbounded, and its
  // result's `enforced` says so (checked once its setup is done, below).
  parts.join_optional = !policy.caps.any_cgroup();
  p.cgroup_join_optional = parts.join_optional;
  for (std::size_t i = 0; i < join_fds.size(); ++i) p.cgroup_join_fds[i] = join_fds[i].get();
  return {};
}

namespace {

// What a launch talks to its init (or a prepared sandbox's server, or a command's init there)
// over: the sync socket ("go"), the error pipe (EOF: exec'd, or ready) and, when asked for, the
// report pipe. Each as the parent's end and the child's.
struct InitChannels {
  UniqueFd sync_parent, sync_child, err_read, err_write, report_read, report_write;
};

StatusOr<InitChannels> open_init_channels(bool report) {
  InitChannels c;
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) return Status::from_errno("socketpair", errno);
  c.sync_parent.reset(sv[0]);
  c.sync_child.reset(sv[1]);
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) < 0) return Status::from_errno("pipe", errno);
  c.err_read.reset(fds[0]);
  c.err_write.reset(fds[1]);
  if (!report) return c;
  if (::pipe2(fds, O_CLOEXEC) < 0) return Status::from_errno("pipe", errno);
  c.report_read.reset(fds[0]);
  c.report_write.reset(fds[1]);
  return c;
}

}  // namespace

// A root supervisor's scope has a network namespace its network-denied commands share; a
// non-root one's sandbox makes its own.
bool SandboxHost::joins_scope_network(const Policy& policy, int netns_fd) const {
  return policy.network == Network::denied && netns_fd >= 0 && root_ && impl_->host_netns;
}

bool SandboxHost::plan_identity(const Policy& policy, int netns_fd, sandbox::SandboxPlan& p) const {
  p.inside_uid = root_ ? 0 : ::geteuid();
  p.inside_gid = root_ ? 0 : ::getegid();
  p.drop_groups = root_ || impl_->subgid.has_value();
  const bool join_net = joins_scope_network(policy, netns_fd);
  p.new_net = policy.network == Network::denied && !join_net;
  return join_net;
}

// The sandbox's init, cloned into `flags`' namespaces (and the scope's network namespace when
// `netns_fd` >= 0), born in `birth_group` where it has one (a move afterwards takes a global
// lock: 5-15 ms); `born_in_group` says whether it was.
StatusOr<Process> SandboxHost::clone_from_parent(int flags, SandboxPlan& p, int netns_fd, const UniqueFd& birth_group,
                                                 bool& born_in_group) const {
  born_in_group = false;
  void* stack = ::mmap(nullptr, kInitStackBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
  if (stack == MAP_FAILED) return Status::from_errno("mmap", errno, "init stack");
  // The scope's network namespace: the child is born in whatever namespace we are in.
  if (netns_fd >= 0 && ::setns(netns_fd, CLONE_NEWNET) < 0) {
    ::munmap(stack, kInitStackBytes);
    return Status::from_errno("netns", errno, "joining the scope's network namespace");
  }
  int pidfd = -1;
  pid_t pid = -1;
  // A kernel (or a seccomp profile around us) without clone3 says so once; later launches go
  // straight to clone and the move.
  static std::atomic<bool> no_clone3{false};
  if (birth_group && !no_clone3.load(std::memory_order_relaxed)) {
    pid = clone_into_cgroup(flags, birth_group.get(), &pidfd);
    if (pid == 0) ::_exit(sandbox::init_main(&p));  // the child, on its copy of this stack
    if (pid < 0 && (errno == ENOSYS || errno == EPERM)) no_clone3.store(true, std::memory_order_relaxed);
    born_in_group = pid > 0;
  }
  if (pid < 0) pid = ::clone(sandbox::init_main, static_cast<char*>(stack) + kInitStackBytes, flags, &p, &pidfd);
  int clone_errno = errno;
  if (netns_fd >= 0 && ::setns(impl_->host_netns.get(), CLONE_NEWNET) < 0) std::abort();
  ::munmap(stack, kInitStackBytes);  // the child has its own copy of the mapping
  if (pid < 0) return Status::from_errno("clone", clone_errno, "(user, mount, PID, IPC, UTS namespaces)");
  return Process(pid, UniqueFd(pidfd));
}

// The parent's half of a sandbox's setup, before its "go": the id maps of its user namespace.
Status SandboxHost::map_ids_from_parent(pid_t pid) const {
  const std::string proc = "/proc/" + std::to_string(pid);
  Status st;
  if (root_) {
    st = write_file(proc + "/uid_map", "0 " + std::to_string(options_.sandbox_uid) + " 1");
    if (st.ok()) st = write_file(proc + "/gid_map", "0 " + std::to_string(options_.sandbox_gid) + " 1");
  } else if (impl_->subgid) {
    st = write_file(proc + "/uid_map", std::to_string(::geteuid()) + " " + std::to_string(::geteuid()) + " 1");
    if (st.ok()) st = run_newgidmap(options_.newgidmap, pid, ::getegid(), *impl_->subgid);
  } else {
    st = write_file(proc + "/setgroups", "deny");
    if (st.ok()) st = write_file(proc + "/uid_map", std::to_string(::geteuid()) + " " + std::to_string(::geteuid()) + " 1");
    if (st.ok()) st = write_file(proc + "/gid_map", std::to_string(::getegid()) + " " + std::to_string(::getegid()) + " 1");
  }
  return st;
}

// The idmapped trees of root-owned writable roots, made through the child's user namespace and
// sent with its "go", after which the child holds them.
Status SandboxHost::go_from_parent(pid_t pid, LaunchParts& parts, int sync_fd) const {
  std::vector<UniqueFd> parent_trees;
  if (!parts.idmap_binds.empty()) {
    const std::string proc = "/proc/" + std::to_string(pid);
    UniqueFd ns(::open((proc + "/ns/user").c_str(), O_RDONLY | O_CLOEXEC));
    if (!ns) return Status::from_errno("idmap", errno, proc + "/ns/user");
    for (std::size_t k : parts.idmap_binds) {
      const std::string& src = parts.binds[k].source.path;
      UniqueFd tree(::open_tree(parts.binds[k].source.get(), "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE | AT_EMPTY_PATH));
      if (!tree) return Status::from_errno("idmap", errno, src);
      struct mount_attr attr {};
      attr.attr_set = MOUNT_ATTR_IDMAP;
      attr.userns_fd = static_cast<std::uint64_t>(ns.get());
      attr.propagation = MS_PRIVATE;  // as the other clones (plan_view)
      if (::mount_setattr(tree.get(), "", AT_EMPTY_PATH | AT_RECURSIVE, &attr, sizeof attr) < 0)
        return Status::from_errno("idmap", errno, "idmapped mount of " + src);
      parent_trees.push_back(std::move(tree));
    }
  }
  static_assert(sandbox::kMaxBinds <= fd_passing::kMaxFds, "every idmapped bind fits in the go message");
  int tree_fds[fd_passing::kMaxFds];
  for (std::size_t k = 0; k < parent_trees.size(); ++k) tree_fds[k] = parent_trees[k].get();
  if (int e = fd_passing::send_fds(sync_fd, 'g', tree_fds, parent_trees.size()))
    return Status::from_errno("sync", e, "releasing the sandbox");
  return {};
}

namespace {

// The layers every sandboxed launch has, whichever path it took.
void add_common_layers(const Policy& policy, bool drop_groups, bool idmapped, bool broker, bool temp_is_tmpfs,
                       SandboxLaunch& out) {
  for (Layer l : {Layer::user_ns, Layer::mount_ns, Layer::pid_ns, Layer::ipc_ns, Layer::uts_ns, Layer::cgroup_ns,
                  Layer::mount_view, Layer::seccomp, Layer::caps_dropped, Layer::rlimits})
    out.enforced.push_back(layer_name(l));
  if (drop_groups) out.enforced.push_back(layer_name(Layer::groups_dropped));
  if (policy.network == Network::denied) out.enforced.push_back(layer_name(Layer::net_ns));
  if (idmapped) out.enforced.push_back(layer_name(Layer::idmapped_mounts));
  if (broker) out.enforced.push_back(layer_name(Layer::host_ipc));
  if (temp_is_tmpfs) out.enforced.push_back(layer_name(Layer::temp_size));
}

void add_cgroup_layers(const Policy& policy, const CgroupLimits& limits, SandboxLaunch& out) {
  if (!out.cgroup) return;
  if (limits.memory_bytes) out.enforced.push_back(layer_name(Layer::cgroup_memory));
  if (limits.pids) out.enforced.push_back(layer_name(Layer::cgroup_pids));
  if (policy.caps.cpus) out.enforced.push_back(layer_name(Layer::cgroup_cpu));
  if (policy.caps.cpu_time) out.enforced.push_back(layer_name(Layer::cgroup_cpu_time));
  if (out.cgroup->kills_at_once()) out.enforced.push_back(layer_name(Layer::cgroup_kill));
}

// A group that should hold init but does not (a failed join of the default bound alone) goes,
// so that `enforced` does not list it. A group's member list no longer names an init that has
// exited already (a quick command on a busy host): not holding it proves a failed join only
// while init is alive, checked after.
void drop_unjoined_group(SandboxLaunch& out, bool join_optional) {
  if (out.cgroup && join_optional && !out.cgroup->holds(out.init.pid())) {
    pollfd exited{out.init.pidfd(), POLLIN, 0};
    if (::poll(&exited, 1, 0) == 0) out.cgroup.reset();
  }
}

}  // namespace

StatusOr<SandboxLaunch> SandboxHost::launch(const SpawnSpec& spec, const Policy& policy, const std::string& temp_dir,
                                            const std::string& name, bool hold, int netns_fd) const {
  if (spec.argv.empty() || spec.argv[0].empty()) return Status::invalid("empty argv");
  if (Status st = check(policy); !st.ok()) return st;
  if (!impl_->death_read)
    return Status::error("death-pipe", EBADF, "no death pipe: a sandbox could outlive the supervisor; refusing");
  const bool full = policy.mode == Mode::danger_full_access;
  SandboxLaunch out;

  // --- everything the child reads, built here ---
  auto parts = std::make_unique<LaunchParts>();
  plan_exec(spec, *parts);
  SandboxPlan& p = parts->plan;
  const bool join_net = plan_identity(policy, netns_fd, p);
  p.new_mount = true;
  p.full_access = full;
  p.exec_fd = spec.exec_fd;
  p.landlock_fd = -1;
  p.release_fd = -1;
  p.control_fd = -1;
  p.death_fd = impl_->death_read.get();
  p.root_tree = -1;
  if (Status st = plan_view(policy, temp_dir, *parts); !st.ok()) return st;
  if (Status st = plan_confinement(policy, *parts, out); !st.ok()) return st;
  if (Status st = plan_cgroup(policy, name, *parts, out); !st.ok()) return st;

  // --- pipes, clone ---
  auto channels = open_init_channels(/*report=*/true);
  if (!channels.ok()) return channels.status();
  auto& [sync_parent, sync_child, err_read, err_write, report_read, report_write] = *channels;
  int fds[2];
  UniqueFd release_read, release_write;
  if (hold) {
    if (::pipe2(fds, O_CLOEXEC) < 0) return Status::from_errno("pipe", errno);
    release_read.reset(fds[0]);
    release_write.reset(fds[1]);
    p.release_fd = release_read.get();
  }
  p.sync_fd = sync_child.get();
  p.report_fd = report_write.get();
  p.exec.error_fd = err_write.get();

  int flags = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_PIDFD | SIGCHLD;
  if (p.new_net) flags |= CLONE_NEWNET;
  bool born_in_group = false;
  auto init = clone_from_parent(flags, p, join_net ? netns_fd : -1, parts->join.clone_into, born_in_group);
  if (!init.ok()) return init.status();
  out.init = std::move(init).value();
  const pid_t pid = out.init.pid();
  parts->cloned_trees.clear();  // the child holds its own copies
  sync_child.reset();
  err_write.reset();
  report_write.reset();
  release_read.reset();

  // --- the parent's half of setup: ids, cgroup, idmapped mounts, then "go" ---
  Status st = map_ids_from_parent(pid);
  if (st.ok() && out.cgroup && !born_in_group) {
    Status moved = out.cgroup->add_after_clone(pid);  // init joins the others itself
    if (!parts->join_optional) st = moved;
  }
  if (st.ok()) st = go_from_parent(pid, *parts, sync_parent.get());
  if (!st.ok()) return st;  // `out.init` kills and reaps the child

  // EOF on the error pipe: the command has exec'd (init and the command both closed it). A
  // held launch stops at its "ready" report instead and keeps the pipe for release().
  bool ready = false;
  if (Status child = read_child_errors(err_read.get(), &spec, spec.argv[0], hold, &ready); !child.ok()) return child;
  drop_unjoined_group(out, parts->join_optional);
  if (hold) {
    if (!ready) return Status::error("ready", EPIPE, "the prepared command vanished before it could be authorized");
    out.release_fd = std::move(release_write);
    out.error_read = std::move(err_read);
    out.program = spec.argv[0];
  }

  ::fcntl(report_read.get(), F_SETFL, O_NONBLOCK);
  out.report = std::move(report_read);
  add_common_layers(policy, p.drop_groups, !parts->idmap_binds.empty() || parts->idmapped_other, parts->broker,
                    parts->temp_is_tmpfs, out);
  add_cgroup_layers(policy, parts->limits, out);
  return out;
}

// ---------------------------------------------------------------------------------------------
// Prepared sandboxes (docs/design.md "Prepared sandboxes")

void PreparedSandbox::fail_from_parent() {
  broken_ = true;
  ::shutdown(control_.get(), SHUT_RDWR);  // no late answer is ever read
  server_.signal_group(SIGKILL);          // reaped with this object
}

namespace {

// How long a prepared sandbox's server may take to answer a request (a clone): past it, it is
// stalled (stopped, or starved) and dropped.
constexpr int kPreparedAnswerMs = 2000;

// After a lost answer: the init the server cloned for it, if any, is the supervisor's own child
// (CLONE_PARENT) and names itself on the sync socket ('h', with the kernel's credentials). It is
// killed and reaped here. EOF: no init took the socket.
void reap_unanswered_init(int sync_fd) {
  pollfd p{sync_fd, POLLIN, 0};
  if (::poll(&p, 1, 1000) <= 0 || !(p.revents & POLLIN)) return;
  char byte = 0;
  struct iovec iov {&byte, 1};
  alignas(struct cmsghdr) char control[CMSG_SPACE(sizeof(struct ucred))];
  struct msghdr msg {};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  if (::recvmsg(sync_fd, &msg, MSG_DONTWAIT) != 1 || byte != 'h') return;
  for (struct cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_CREDENTIALS) continue;
    struct ucred cred {};
    std::memcpy(&cred, CMSG_DATA(c), sizeof cred);
    if (cred.pid <= 0) return;
    UniqueFd pidfd(static_cast<int>(::syscall(SYS_pidfd_open, cred.pid, 0)));
    if (!pidfd) return;
    Process orphan(cred.pid, std::move(pidfd));  // its destructor kills and reaps it
    return;
  }
}

}  // namespace

PreparedSandbox::~PreparedSandbox() {
  control_.reset();  // the server sees EOF and exits; the Process kills and reaps it regardless
  if (counter_) counter_->fetch_sub(1);
}

namespace {

bool under_proc(const std::string& path) { return under(path, "/proc"); }

}  // namespace

std::string SandboxHost::host_mounts_generation() const {
  std::lock_guard<std::mutex> lock(impl_->mounts_mutex);
  // The kernel flags /proc/self/mounts (POLLPRI) once per change of our mount table, and each
  // poll that reports it resets it: the table is read again only then. Mounts the views never
  // show are left out: our own temp root's (every scope's tmpfs), and any unbindable mount with
  // everything beneath it, which the view's recursive copy skips (another supervisor's temp
  // root: its scopes come and go all the time, and must not make every view stale).
  pollfd changed{impl_->mounts_fd.get(), POLLPRI, 0};
  if (impl_->mounts_digest.empty() || (::poll(&changed, 1, 0) > 0 && (changed.revents & (POLLPRI | POLLERR)))) {
    std::string table;
    if (UniqueFd f{::open("/proc/self/mountinfo", O_RDONLY | O_CLOEXEC)}) {
      char buf[8192];
      for (ssize_t n; (n = ::read(f.get(), buf, sizeof buf)) > 0;) table.append(buf, static_cast<std::size_t>(n));
    }
    std::string kept;
    const std::string temp_root = options_.temp_root + "/";
    // "id parent major:minor root mount-point options optional-fields... - type source ...";
    // a parent comes before its children (mounted first), so one pass finds every subtree.
    std::set<std::string> skipped;  // mount ids left out
    for (std::size_t pos = 0; pos < table.size();) {
      std::size_t end = table.find('\n', pos);
      if (end == std::string::npos) end = table.size();
      const std::string line = table.substr(pos, end - pos);
      pos = end + 1;
      const std::size_t id_end = line.find(' ');
      const std::size_t parent_end = id_end == std::string::npos ? id_end : line.find(' ', id_end + 1);
      std::size_t field_start = 0;
      for (int k = 0; k < 4 && field_start != std::string::npos; ++k) field_start = line.find(' ', field_start + 1);
      if (field_start == std::string::npos || parent_end == std::string::npos) continue;
      const std::string id = line.substr(0, id_end);
      const std::string parent = line.substr(id_end + 1, parent_end - id_end - 1);
      const std::size_t field_end = line.find(' ', field_start + 1);
      const std::string point = line.substr(field_start + 1, field_end - field_start - 1);
      const std::size_t separator = line.find(" - ");
      const bool unbindable = separator != std::string::npos && field_end != std::string::npos &&
                              line.substr(field_end, separator - field_end).find(" unbindable") != std::string::npos;
      if ((point + "/").rfind(temp_root, 0) == 0 || unbindable || skipped.count(parent)) {
        skipped.insert(id);
        continue;
      }
      kept.append(line.substr(0, field_start)).append(" ").append(point).push_back('\n');
    }
    impl_->mounts_digest = std::to_string(std::hash<std::string>{}(kept)) + "." + std::to_string(kept.size());
  }
  return impl_->mounts_digest;
}

std::optional<std::string> SandboxHost::prepared_key(const Policy& policy, int netns_fd) const {
  // The server's commands map their ids onto the server's (a root supervisor's: 0, the sandbox
  // uid on the host; a non-root one's: its own uid), and where the network is denied they share
  // one network namespace: a root supervisor's scope's own, as every command of that scope does
  // anyway, or (non-root: no scope namespace) one the server makes for its commands alone.
  if (!impl_->death_read || !policy.sandboxed || policy.mode == Mode::danger_full_access || !policy.resolved)
    return std::nullopt;
  if (root_ && policy.network == Network::denied && !joins_scope_network(policy, netns_fd)) return std::nullopt;
  // Each command mounts its own /proc over the view's: nothing may be guarded or bound there.
  for (const auto* list : {&policy.protect, &policy.deny_read, &options_.hidden_paths})
    for (const auto& path : *list)
      if (under_proc(path)) return std::nullopt;
  for (const auto& b : policy.binds)
    if (under_proc(b.target)) return std::nullopt;
  // A group with a v2 directory is joined at birth (clone3), which a server running as the
  // sandbox uid may not do; moving in afterwards takes the kernel's global lock.
  CgroupLimits limits;
  if (policy.caps.limits_memory()) limits.memory_bytes = policy.caps.memory_bytes;
  if (policy.caps.limits_pids()) limits.pids = policy.caps.pids;
  limits.cpus = policy.caps.cpus;
  const bool default_memory =
      !policy.caps.memory_bytes && options_.default_memory && impl_->cgroups->capabilities().memory;
  if (default_memory) limits.memory_bytes = options_.default_memory;
  if ((policy.caps.any_cgroup() || default_memory) && impl_->cgroups->born_into(limits, policy.caps.any_cgroup()))
    return std::nullopt;
  const ResolvedPaths& rp = *policy.resolved;
  if (rp.workspaces.size() != policy.workspaces.size() || rp.bind_sources.size() != policy.binds.size() ||
      rp.protect.size() != policy.protect.size() || rp.deny_read.size() != policy.deny_read.size())
    return std::nullopt;
  // The view's identity: every host path by the object it resolved to and that object's owner
  // and mode (which decide its idmap), so that a replaced or re-owned workspace (or guarded
  // file) is another view; and the host's mount table, which the view's root tree copied.
  // Every field length-prefixed.
  std::string key;
  auto field = [&key](const std::string& text) {
    key.append(std::to_string(text.size())).push_back(':');
    key.append(text);
  };
  auto object = [&field](const char* tag, const std::string& path, const struct stat& st) {
    field(tag);
    field(path);
    field(std::to_string(st.st_dev) + "/" + std::to_string(st.st_ino) + "/" + std::to_string(st.st_uid) + "/" +
          std::to_string(st.st_gid) + "/" + std::to_string(st.st_mode));
  };
  field(mode_name(policy.mode));
  field(network_name(policy.network));
  field(host_mounts_generation());
  // Whose files the writable roots' idmaps give the sandbox uid (plan_view).
  field(rp.peer_ids ? std::to_string(rp.peer_ids->first) + ":" + std::to_string(rp.peer_ids->second) : "owner");
  for (const auto& w : rp.workspaces) object("w", w.path, w.st);
  for (std::size_t i = 0; i < policy.binds.size(); ++i) {
    field(policy.binds[i].writable ? "rw" : "ro");
    field(policy.binds[i].target);
    object("b", rp.bind_sources[i].path, rp.bind_sources[i].st);
  }
  for (const auto& h : rp.protect) object("p", h.path, h.st);
  for (const auto& h : rp.deny_read) object("d", h.path, h.st);
  for (const auto& a : policy.allow_sockets) {
    field("s");
    field(a.path);
    field(std::to_string(a.dev) + "/" + std::to_string(a.ino));
  }
  return key;
}

StatusOr<std::unique_ptr<PreparedSandbox>> SandboxHost::prepare(const Policy& policy, const std::string& temp_dir,
                                                                 int netns_fd) const {
  auto key = prepared_key(policy, netns_fd);
  if (!key) return Status::error("prepared", ENOTSUP, "this policy is not run from a prepared sandbox on this host");
  if (Status st = check(policy); !st.ok()) return st;
  if (impl_->prepared_count.fetch_add(1) >= static_cast<int>(limits::kMaxPreparedSandboxes)) {
    impl_->prepared_count.fetch_sub(1);
    return Status::error("prepared", EBUSY, "every prepared sandbox this supervisor keeps is in use");
  }
  std::unique_ptr<PreparedSandbox> ps(new PreparedSandbox());
  ps->counter_ = &impl_->prepared_count;
  ps->key_ = *key;

  auto parts = std::make_unique<LaunchParts>();
  SandboxPlan& p = parts->plan;
  const bool join_net = plan_identity(policy, netns_fd, p);  // prepared_key: root joins the scope's
  p.new_mount = true;
  p.exec_fd = -1;
  p.landlock_fd = -1;
  p.release_fd = -1;
  p.report_fd = -1;
  p.death_fd = impl_->death_read.get();
  p.root_tree = -1;
  p.prepared = true;
  SandboxLaunch confinement;  // the layers plan_confinement adds (Landlock)
  if (Status st = plan_view(policy, temp_dir, *parts); !st.ok()) return st;
  if (Status st = plan_confinement(policy, *parts, confinement); !st.ok()) return st;

  auto channels = open_init_channels(/*report=*/false);
  if (!channels.ok()) return channels.status();
  auto& [sync_parent, sync_child, err_read, err_write, report_read, report_write] = *channels;
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) return Status::from_errno("socketpair", errno);
  ps->control_.reset(sv[0]);
  UniqueFd control_child(sv[1]);
  p.sync_fd = sync_child.get();
  p.control_fd = control_child.get();
  p.exec.error_fd = err_write.get();

  // No PID namespace: the server clones each command's init with CLONE_PARENT, which the
  // kernel refuses to a namespace's init.
  int flags = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_PIDFD | SIGCHLD;
  if (p.new_net) flags |= CLONE_NEWNET;
  bool born = false;
  auto server = clone_from_parent(flags, p, join_net ? netns_fd : -1, UniqueFd(), born);
  if (!server.ok()) return server.status();
  ps->server_ = std::move(server).value();
  parts->cloned_trees.clear();
  sync_child.reset();
  control_child.reset();
  err_write.reset();
  Status st = map_ids_from_parent(ps->server_.pid());
  // The user namespace the server makes for each command is capped at the server's own
  // RLIMIT_NPROC (the kernel's rule for namespaces made by anyone but global root), against
  // which every command of it counts together: lifted to unlimited where we may (raising a hard
  // limit takes CAP_SYS_RESOURCE), else to our hard limit, so that each command's own limit is
  // the one that holds. A root supervisor only: a non-root one's commands count together against
  // its own soft limit on the host whichever way they start (their uid is its uid), so the
  // server keeps that limit, and a command inherits what a usual launch's would.
  if (st.ok() && root_) {
    struct rlimit lifted {RLIM_INFINITY, RLIM_INFINITY};
    if (::prlimit(ps->server_.pid(), RLIMIT_NPROC, &lifted, nullptr) < 0 &&
        (::getrlimit(RLIMIT_NPROC, &lifted) < 0 || (lifted.rlim_cur = lifted.rlim_max,
                                                    ::prlimit(ps->server_.pid(), RLIMIT_NPROC, &lifted, nullptr) < 0)))
      st = Status::from_errno("prepared", errno, "lifting the server's RLIMIT_NPROC");
  }
  if (st.ok()) st = go_from_parent(ps->server_.pid(), *parts, sync_parent.get());
  if (!st.ok()) return st;
  // EOF once the view is built (the server closes the pipe and waits for requests).
  if (Status child = read_child_errors(err_read.get(), nullptr, "the prepared sandbox", false, nullptr); !child.ok())
    return child;
  pollfd exited{ps->server_.pidfd(), POLLIN, 0};
  if (::poll(&exited, 1, 0) != 0) return Status::error("prepared", ECHILD, "the prepared sandbox ended while it was built");
  ps->landlock_ = !confinement.enforced.empty();
  ps->drop_groups_ = p.drop_groups;
  ps->idmapped_ = !parts->idmap_binds.empty() || parts->idmapped_other;
  ps->broker_ = parts->broker;
  ps->temp_is_tmpfs_ = parts->temp_is_tmpfs;
  return ps;
}

StatusOr<SandboxLaunch> SandboxHost::launch_prepared(PreparedSandbox& ps, const SpawnSpec& spec, const Policy& policy,
                                                     const std::string& name) const {
  if (spec.argv.empty() || spec.argv[0].empty()) return Status::invalid("empty argv");
  if (spec.exec_fd >= 0 || spec.fds.size() > 3)
    return Status::error("prepared", ENOTSUP, "a program by descriptor, or descriptors beyond stdin, stdout and stderr");
  for (const auto& m : spec.fds)
    if (m.target < 0 || m.target > 2) return Status::error("prepared", ENOTSUP, "a descriptor beyond stderr");
  if (ps.broken()) return Status::error("prepared", EPIPE, "the prepared sandbox is gone");
  SandboxLaunch out;
  auto parts = std::make_unique<LaunchParts>();
  plan_exec(spec, *parts);
  if (ps.landlock_) out.enforced.push_back(layer_name(Layer::landlock));
  if (Status st = plan_cgroup(policy, name, *parts, out); !st.ok()) return st;
  if (parts->join.clone_into) return Status::error("prepared", ENOTSUP, "a cgroup v2 group is joined at birth");

  // The strings, in a memfd the server maps.
  std::string blob;
  for (const auto& a : parts->argv_store) blob.append(a).push_back('\0');
  for (const auto& e : parts->env_store) blob.append(e).push_back('\0');
  for (const auto& c : parts->candidates) blob.append(c).push_back('\0');
  if (!spec.cwd.empty()) blob.append(spec.cwd).push_back('\0');
  UniqueFd memfd(static_cast<int>(::syscall(SYS_memfd_create, "corral-command", MFD_CLOEXEC)));
  if (!memfd) return Status::from_errno("prepared", errno, "memfd_create");
  for (std::size_t done = 0; done < blob.size();) {
    const ssize_t n = ::write(memfd.get(), blob.data() + done, blob.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Status::from_errno("prepared", n < 0 ? errno : EIO, "writing the command's strings");
    done += static_cast<std::size_t>(n);
  }
  sandbox::PreparedRequest req {};
  req.magic = sandbox::kPreparedMagic;
  req.argc = static_cast<std::uint32_t>(parts->argv_store.size());
  req.envc = static_cast<std::uint32_t>(parts->env_store.size());
  req.pathc = static_cast<std::uint32_t>(parts->candidates.size());
  req.blob_size = blob.size();
  req.has_cwd = spec.cwd.empty() ? 0 : 1;
  req.join_count = static_cast<std::uint32_t>(parts->join.self.size());
  req.join_optional = parts->join_optional ? 1 : 0;
  req.fd_count = static_cast<std::uint32_t>(spec.fds.size());
  for (std::size_t i = 0; i < spec.fds.size(); ++i) req.fd_targets[i] = spec.fds[i].target;
  req.first_closed_fd = parts->plan.exec.first_closed_fd;
  plan_rlimits(policy, options_.default_pids, req.fsize_limit, req.nproc_limit, req.cpu_limit_s);

  auto channels = open_init_channels(/*report=*/true);
  if (!channels.ok()) return channels.status();
  auto& [sync_parent, sync_child, err_read, err_write, report_read, report_write] = *channels;
  int send[sandbox::kPreparedMaxFds];
  std::size_t count = 0;
  for (int fd : {memfd.get(), sync_child.get(), err_write.get(), report_write.get()}) send[count++] = fd;
  for (const auto& j : parts->join.self) send[count++] = j.get();
  for (const auto& m : spec.fds) send[count++] = m.source;

  // The init names itself on the sync socket first thing (PreparedRequest): asked for before it
  // can send.
  const int on = 1;
  if (::setsockopt(sync_parent.get(), SOL_SOCKET, SO_PASSCRED, &on, sizeof on) < 0)
    return Status::from_errno("socketpair", errno, "SO_PASSCRED");
  {
    // One request at a time on the control socket; the server answers each at once.
    std::lock_guard<std::mutex> lock(ps.mutex_);
    if (ps.broken()) return Status::error("prepared", EPIPE, "the prepared sandbox is gone");
    req.seq = ++ps.seq_;
    if (int e = fd_passing::send_message(ps.control_.get(), &req, sizeof req, send, count)) {
      ps.fail_from_parent();
      return Status::error("prepared", e, "sending a command to the prepared sandbox");
    }
    // The message holds its own references: ours go, so that the sync socket ends (EOF) when
    // no init took it.
    memfd.reset();
    sync_child.reset();
    err_write.reset();
    report_write.reset();
    // Anything but the answer to this request, at once: the server is no good any more. An init
    // it may have cloned is ours (CLONE_PARENT), named on the sync socket, and reaped here.
    auto lost = [&ps, &sync_parent](int err, const std::string& what) {
      ps.fail_from_parent();
      reap_unanswered_init(sync_parent.get());
      return Status::error("prepared", err, what);
    };
    pollfd answer{ps.control_.get(), POLLIN, 0};
    int ready;
    do ready = ::poll(&answer, 1, kPreparedAnswerMs);
    while (ready < 0 && errno == EINTR);
    if (ready <= 0) return lost(ready == 0 ? ETIMEDOUT : errno, "the prepared sandbox did not answer");
    sandbox::PreparedReply reply {};
    int pidfd = -1;
    std::size_t got_fds = 0;
    const ssize_t got = fd_passing::receive_message(ps.control_.get(), &reply, sizeof reply, &pidfd, 1, &got_fds);
    UniqueFd pidfd_owner(got_fds ? pidfd : -1);
    if (got != static_cast<ssize_t>(sizeof reply) || reply.seq != req.seq)
      return lost(got < 0 ? errno : EPROTO, "the prepared sandbox's answer was not to this command");
    if (reply.pid <= 0 || !pidfd_owner)
      return Status::error("prepared", reply.err ? reply.err : EPROTO, "the prepared sandbox could not start the command");
    out.init = Process(reply.pid, std::move(pidfd_owner));
  }
  if (int e = fd_passing::send_fds(sync_parent.get(), 'g', nullptr, 0)) return Status::from_errno("sync", e, "releasing the command");
  if (Status child = read_child_errors(err_read.get(), &spec, spec.argv[0], false, nullptr); !child.ok()) {
    // The command init's own steps fail alike for every command: the prepared sandbox is no good.
    if (child.step() == sandbox::step_name(static_cast<int>(sandbox::Step::own_ids)) ||
        child.step() == sandbox::step_name(static_cast<int>(sandbox::Step::mount_proc))) {
      ps.broken_ = true;
      return Status::error("prepared", child.err(), child.message());
    }
    return child;
  }
  drop_unjoined_group(out, parts->join_optional);
  ::fcntl(report_read.get(), F_SETFL, O_NONBLOCK);
  out.report = std::move(report_read);
  add_common_layers(policy, ps.drop_groups_, ps.idmapped_, ps.broker_, ps.temp_is_tmpfs_, out);
  add_cgroup_layers(policy, parts->limits, out);
  return out;
}
}  // namespace corral
