// Prepared sandboxes (runtime/prepared.h, docs/design.md "Prepared sandboxes"): a command started
// from one gets what a usual launch gives it (its result, its layers, its own PID namespace and
// /proc), commands of one prepared sandbox cannot see each other, a replaced workspace is another
// view, and a prepared sandbox that dies is replaced while the command still runs.
#include <doctest/doctest.h>

#include <signal.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <sstream>
#include <thread>

#include "runtime/prepared.h"
#include "runtime/sandbox.h"
#include "tests/test_util.h"

using namespace corral;
using namespace corral::test;

namespace {

// A root sandbox host with a scope's resources: its temp dir and its network namespace.
struct Scope {
  Scope() {
    if (::geteuid() != 0) return;
    host = SandboxHost::create(HostOptions{});
    if (!host->check(Policy{}).ok()) return;
    REQUIRE(host->adopt_temp_dir(temp.path()).ok());
    auto ns = host->make_network_namespace();
    REQUIRE_MESSAGE(ns.ok(), ns.status().message());
    netns = std::move(ns).value();
    prepared = std::make_shared<PreparedSandboxes>(host.get(), /*prepare_after=*/1);
  }
  ~Scope() {
    prepared.reset();
    if (host) release_temp_dir(temp.path());
  }
  bool usable() const { return prepared != nullptr; }

  ExecSpec spec(std::vector<std::string> argv, const Policy& policy, bool from_prepared = true) {
    ExecSpec s;
    s.argv = std::move(argv);
    s.temp_dir = temp.path();
    s.policy = policy;
    s.host = host.get();
    s.netns_fd = netns.get();
    s.cgroup_name = "prepared-test-" + std::to_string(++launches);
    if (from_prepared) s.prepared = prepared;
    return s;
  }

  std::unique_ptr<SandboxHost> host;
  TempDir temp;
  UniqueFd netns;
  std::shared_ptr<PreparedSandboxes> prepared;
  int launches = 0;
};

Policy normalized(Policy p = {}) {
  Status st = normalize(p);
  REQUIRE_MESSAGE(st.ok(), st.message());
  return p;
}

// A policy with one new workspace, `path`.
Policy with_workspace(const std::string& path) {
  REQUIRE(::mkdir(path.c_str(), 0755) == 0);
  Policy p;
  p.workspaces = {path};
  return p;
}

bool skip(const Scope& s) {
  if (s.usable()) return false;
  MESSAGE("skipped: prepared sandboxes need a root supervisor that can sandbox (uid " << ::geteuid() << ")");
  return true;
}

}  // namespace

TEST_CASE("a command from a prepared sandbox: the same result and layers, its own PID namespace and /proc") {
  Scope s;
  if (skip(s)) return;
  const Policy policy = normalized();
  REQUIRE(s.host->prepared_key(policy, s.netns.get()).has_value());
  {
    auto made = s.host->prepare(policy, s.temp.path(), s.netns.get());
    REQUIRE_MESSAGE(made.ok(), made.status().message());
    CHECK_FALSE((*made)->broken());
  }
  const std::string probe = "echo pid=$$; cat /proc/1/comm; ls /proc | grep -c '^[0-9][0-9]*$'; id -u; hostname";
  Result usual = run(s.spec({"/bin/sh", "-c", probe}, policy, false)).result;
  REQUIRE(s.prepared->server_pids().empty());
  Result first = run(s.spec({"/bin/sh", "-c", probe}, policy)).result;
  REQUIRE(s.prepared->server_pids().size() == 1);  // prepared at the first (prepare_after 1)
  Result second = run(s.spec({"/bin/sh", "-c", probe}, policy)).result;
  CHECK(s.prepared->server_pids().size() == 1);  // and used again
  for (const Result* r : {&usual, &first, &second}) {
    INFO(r->message);
    CHECK(r->status == ExitStatus::exited);
    CHECK(r->exit_code == 0);
    // PID 1 is the command's own init, the shell its child; /proc lists its namespace alone
    // (init, the shell, ls, grep).
    CHECK(r->out == "pid=2\ncorral-init\n4\n0\ncorral\n");
  }
  CHECK(first.enforced == usual.enforced);
  CHECK(second.enforced == usual.enforced);
  // A command that fails to start fails as it would have.
  Result missing = run(s.spec({"/nonexistent/program"}, policy)).result;
  INFO("exit " << missing.exit_code.value_or(-1) << ": " << missing.message << " / " << missing.err);
  CHECK(missing.status == ExitStatus::setup_error);
  CHECK(missing.setup_step == "exec");
  Result exit3 = run(s.spec({"/bin/sh", "-c", "exit 3"}, policy)).result;
  CHECK(exit3.exit_code == 3);
}

TEST_CASE("commands of one prepared sandbox cannot see each other, nor its server") {
  Scope s;
  if (skip(s)) return;
  const Policy policy = normalized();
  REQUIRE(run(s.spec({"/bin/true"}, policy)).result.exit_code == 0);
  REQUIRE(s.prepared->server_pids().size() == 1);
  const pid_t server = s.prepared->server_pids()[0];
  // A long command, started on a loop of its own.
  const std::string marker = "prepared-test-marker-" + std::to_string(::getpid());
  asio::io_context io;
  bool done = false;
  auto sleeper = Execution::start(io, s.spec({kHelper, "sleep", "30", marker}, policy),
                                  nullptr, [&](Result) { done = true; });
  // Until it runs: the host sees its sleep.
  REQUIRE(wait_until([&] {
    io.restart();
    io.run_for(std::chrono::milliseconds(10));
    return !processes_with(marker).empty();
  }, std::chrono::seconds(10)));
  // Another command lists every process it can see.
  Result look = run(s.spec({"/bin/sh", "-c", "for f in /proc/[0-9]*/cmdline; do tr '\\0' ' ' < $f; echo; done"}, policy)).result;
  CHECK(look.exit_code == 0);
  CHECK(look.out.find(marker) == std::string::npos);
  CHECK(look.out.find("for f in") != std::string::npos);  // it did list itself
  // Nor can it name the server or the other command by host pid: neither is in its namespace.
  Result signal = run(s.spec({"/bin/sh", "-c", "kill -0 " + std::to_string(server) + " 2>/dev/null && echo reached"}, policy)).result;
  CHECK(signal.out.find("reached") == std::string::npos);
  sleeper.terminate();
  while (!done) {
    io.restart();
    io.run_for(std::chrono::milliseconds(10));
  }
}

TEST_CASE("a replaced workspace is another view; a view under /proc is never prepared") {
  Scope s;
  if (skip(s)) return;
  TempDir parent;
  const std::string ws = parent.path() + "/ws";
  const Policy p = with_workspace(ws);
  const auto before = s.host->prepared_key(normalized(p), s.netns.get());
  REQUIRE(before.has_value());
  CHECK(s.host->prepared_key(normalized(p), s.netns.get()) == before);  // the same object, the same view
  REQUIRE(::rename(ws.c_str(), (parent.path() + "/old").c_str()) == 0);
  REQUIRE(::mkdir(ws.c_str(), 0755) == 0);
  const auto after = s.host->prepared_key(normalized(p), s.netns.get());
  REQUIRE(after.has_value());
  CHECK(*after != *before);
  Policy under_proc;
  under_proc.deny_read = {"/proc/sys"};
  CHECK_FALSE(s.host->prepared_key(normalized(under_proc), s.netns.get()).has_value());
  Policy full;
  full.mode = Mode::danger_full_access;
  CHECK_FALSE(s.host->prepared_key(normalized(full), s.netns.get()).has_value());
  // Without the scope's network namespace, a network-denied command gets its own: not prepared.
  CHECK_FALSE(s.host->prepared_key(normalized(), -1).has_value());
}

TEST_CASE("a prepared sandbox that dies is replaced, and the command still runs") {
  Scope s;
  if (skip(s)) return;
  const Policy policy = normalized();
  REQUIRE(run(s.spec({"/bin/true"}, policy)).result.exit_code == 0);
  REQUIRE(s.prepared->server_pids().size() == 1);
  const pid_t server = s.prepared->server_pids()[0];
  REQUIRE(::kill(server, SIGKILL) == 0);
  Result r = run(s.spec({"/bin/sh", "-c", "echo still"}, policy)).result;
  CHECK(r.status == ExitStatus::exited);
  CHECK(r.out == "still\n");
  // The dead one is gone; the next command prepares the view again.
  Result again = run(s.spec({"/bin/true"}, policy)).result;
  CHECK(again.exit_code == 0);
  const auto servers = s.prepared->server_pids();
  REQUIRE(servers.size() == 1);
  CHECK(servers[0] != server);
}

TEST_CASE("a stalled prepared sandbox is dropped within seconds, and its command runs as usual") {
  Scope s;
  if (skip(s)) return;
  const Policy policy = normalized();
  REQUIRE(run(s.spec({"/bin/true"}, policy)).result.exit_code == 0);
  REQUIRE(s.prepared->server_pids().size() == 1);
  const pid_t server = s.prepared->server_pids()[0];
  REQUIRE(::kill(server, SIGSTOP) == 0);  // as any process of the sandbox uid on the host could
  const auto t0 = std::chrono::steady_clock::now();
  Result r = run(s.spec({"/bin/cat", "/proc/self/uid_map"}, policy)).result;
  const auto waited = std::chrono::steady_clock::now() - t0;
  CHECK(r.status == ExitStatus::exited);
  std::istringstream map(r.out);
  std::string inside, outside;
  map >> inside >> outside;
  CHECK(outside != "0");  // launched as usual: mapped onto the host's sandbox uid
  CHECK(waited < std::chrono::seconds(5));
  CHECK(s.prepared->server_pids().empty());
  // The stalled server was killed; nothing of it (nor any init it might have cloned) is left
  // as our child once the cache goes.
  s.prepared.reset();
  CHECK(::kill(server, 0) < 0);
  std::string children = read_file("/proc/self/task/" + std::to_string(::getpid()) + "/children");
  CHECK(children.empty());
}

TEST_CASE("a view is another when a workspace changes owner, or the host's mounts change") {
  Scope s;
  if (skip(s)) return;
  TempDir parent;
  const std::string ws = parent.path() + "/ws";
  const Policy p = with_workspace(ws);
  const auto before = s.host->prepared_key(normalized(p), s.netns.get());
  REQUIRE(before.has_value());
  REQUIRE(::chown(ws.c_str(), 1000, 1000) == 0);  // its idmap is another now
  const auto owned = s.host->prepared_key(normalized(p), s.netns.get());
  REQUIRE(owned.has_value());
  CHECK(*owned != *before);
  // A mount on the host (the view's root tree copied the host's) makes prepared views stale.
  // (Not under /tmp: this host's temp root, whose mounts are the scopes' and do not count.)
  std::string mnt = "/var/tmp/corral-prepared-test-XXXXXX";
  REQUIRE(::mkdtemp(mnt.data()) != nullptr);
  REQUIRE(::mount("tmpfs", mnt.c_str(), "tmpfs", 0, "size=64k") == 0);
  const auto mounted = s.host->prepared_key(normalized(p), s.netns.get());
  ::umount2(mnt.c_str(), MNT_DETACH);
  ::rmdir(mnt.c_str());
  REQUIRE(mounted.has_value());
  CHECK(*mounted != *owned);
  const auto unmounted = s.host->prepared_key(normalized(p), s.netns.get());
  CHECK(unmounted == owned);

  // Mounts beneath an unbindable mount (another supervisor's temp root, whose scopes come and
  // go) never reach a view's recursive copy, so they leave the view as it is.
  std::string other = "/var/tmp/corral-other-root-XXXXXX";
  REQUIRE(::mkdtemp(other.data()) != nullptr);
  REQUIRE(::mount(other.c_str(), other.c_str(), nullptr, MS_BIND, nullptr) == 0);
  REQUIRE(::mount(nullptr, other.c_str(), nullptr, MS_UNBINDABLE, nullptr) == 0);
  const auto other_root = s.host->prepared_key(normalized(p), s.netns.get());
  const std::string scope_dir = other + "/scope";
  REQUIRE(::mkdir(scope_dir.c_str(), 0700) == 0);
  REQUIRE(::mount("tmpfs", scope_dir.c_str(), "tmpfs", 0, "size=64k") == 0);
  const auto other_scope = s.host->prepared_key(normalized(p), s.netns.get());
  ::umount2(scope_dir.c_str(), MNT_DETACH);
  ::umount2(other.c_str(), MNT_DETACH);
  ::rmdir(scope_dir.c_str());
  ::rmdir(other.c_str());
  CHECK(other_root == owned);
  CHECK(other_scope == owned);
}

TEST_CASE("the server's RLIMIT_NPROC does not cap its commands together") {
  Scope s;
  if (skip(s)) return;
  struct rlimit was {};
  REQUIRE(::getrlimit(RLIMIT_NPROC, &was) == 0);
  if (was.rlim_max != RLIM_INFINITY && was.rlim_max < 600) {
    MESSAGE("skipped: this host's hard RLIMIT_NPROC is " << was.rlim_max);
    return;
  }
  struct rlimit low = was;
  low.rlim_cur = 300;  // a supervisor started under `ulimit -S -u 300`
  REQUIRE(::setrlimit(RLIMIT_NPROC, &low) == 0);
  auto made = s.host->prepare(normalized(), s.temp.path(), s.netns.get());
  REQUIRE(::setrlimit(RLIMIT_NPROC, &was) == 0);
  REQUIRE_MESSAGE(made.ok(), made.status().message());
  const std::string limits = read_file("/proc/" + std::to_string((*made)->server_pid()) + "/limits");
  const auto at = limits.find("Max processes");
  REQUIRE(at != std::string::npos);
  std::istringstream line(limits.substr(at + std::strlen("Max processes")));
  std::string soft;
  line >> soft;
  CHECK(soft != "300");
}
