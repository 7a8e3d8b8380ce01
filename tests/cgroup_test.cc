// runtime/cgroup: the layout logic against fake trees (exact files written, group paths,
// refusals naming the missing controller), then the real host: limits enforced (memory by OOM
// kill, pids by fork failing), whole-group kill, usage figures, nothing left behind.
#include "runtime/cgroup.h"

#include "tests/test_util.h"

#include <dirent.h>
#include <doctest/doctest.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

using namespace corral;
using namespace std::chrono_literals;

namespace {

constexpr std::uint64_t MiB = 1024 * 1024;

using corral::test::TempDir;

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void put(const std::string& path, const std::string& content) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path, std::ios::binary) << content;
}

bool exists(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0;
}

std::string pid_str() { return std::to_string(::getpid()); }

std::set<std::string> open_fds() {
  std::set<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd"))
    out.insert(e.path().filename().string() + " -> " + std::filesystem::read_symlink(e.path()).string());
  return out;
}

bool contains(const std::string& hay, const std::string& needle) {
  return hay.find(needle) != std::string::npos;
}

std::set<pid_t> procs_of(const std::string& dir) {
  std::set<pid_t> out;
  std::istringstream in(slurp(dir + "/cgroup.procs"));
  for (long p; in >> p;) out.insert(static_cast<pid_t>(p));
  return out;
}

// A child that waits for "go" on a pipe (so that it is in the group before it does anything),
// runs `body`, which reports on `ready` and then stays or exits. The parent side owns the pipes.
struct Child {
  pid_t pid = -1;
  int go_w = -1, ready_r = -1;

  template <class Body>
  static Child start(Body body) {
    int go[2], ready[2];
    REQUIRE(::pipe2(go, O_CLOEXEC) == 0);
    REQUIRE(::pipe2(ready, O_CLOEXEC) == 0);
    Child c;
    c.pid = ::fork();
    REQUIRE(c.pid >= 0);
    if (c.pid == 0) {
      ::close(go[1]);
      ::close(ready[0]);
      char b;
      if (::read(go[0], &b, 1) != 1) ::_exit(120);
      body(ready[1]);
      ::_exit(0);
    }
    ::close(go[0]);
    ::close(ready[1]);
    c.go_w = go[1];
    c.ready_r = ready[0];
    return c;
  }
  void go() const { REQUIRE(::write(go_w, "g", 1) == 1); }
  // Reads exactly `n` bytes the child reported; false at EOF.
  bool read_report(void* buf, std::size_t n) const {
    auto* p = static_cast<char*>(buf);
    while (n > 0) {
      ssize_t r = ::read(ready_r, p, n);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) return false;
      p += r;
      n -= static_cast<std::size_t>(r);
    }
    return true;
  }
  int wait() {
    int st = 0;
    pid_t r = ::waitpid(pid, &st, 0);
    REQUIRE(r == pid);
    pid = -1;
    return st;
  }
  ~Child() {
    if (pid > 0) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
    if (go_w >= 0) ::close(go_w);
    if (ready_r >= 0) ::close(ready_r);
  }
};

void touch_memory(std::size_t bytes) {
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) ::_exit(121);
  auto* c = static_cast<volatile char*>(p);
  for (std::size_t i = 0; i < bytes; i += 4096) c[i] = 1;
}

// Spins until this process has used `d` of CPU (not wall clock: on a loaded machine a
// wall-clock spin may get far less CPU than it lasts).
void spin_for(std::chrono::milliseconds d) {
  volatile unsigned x = 0;
  for (timespec t{};;) {
    ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    if (t.tv_sec * 1000 + t.tv_nsec / 1'000'000 >= d.count()) break;
    for (int i = 0; i < 10000; ++i) x = x + 1;
  }
}

// Reaps every child of ours that is not `keep`; used where grandchildren were reparented to us.
void reap_others() {
  for (auto end = std::chrono::steady_clock::now() + 2s; std::chrono::steady_clock::now() < end;) {
    pid_t r = ::waitpid(-1, nullptr, WNOHANG);
    if (r < 0) return;  // ECHILD: none left
    if (r == 0) std::this_thread::sleep_for(5ms);
  }
}

std::string describe(const CgroupCapabilities& c) {
  std::ostringstream o;
  o << "cgroup version " << c.version << "\n  memory: " << c.memory << " (" << c.memory_reason
    << ")\n  pids: " << c.pids << " (" << c.pids_reason << ")\n  cpu: " << c.cpu << " (" << c.cpu_reason
    << ")\n  cpu_accounting: " << c.cpu_accounting << " (" << c.cpu_accounting_reason
    << ")\n  kill: " << c.kill << " (" << c.kill_reason << ")";
  return o.str();
}

int skipped = 0;
void skip(const std::string& what, const std::string& why) {
  ++skipped;
  MESSAGE("SKIPPED (" << skipped << "): " << what << ": " << why);
}

// A fake pure-v2 tree: the mount's cgroup.controllers marks it v2; the supervisor sits in
// /user.slice/x, whose cgroup.controllers offers `controllers`.
struct FakeV2 {
  TempDir tmp;
  std::string root = tmp.path() + "/cgroup";
  std::string own = root + "/user.slice/x";
  std::string self = tmp.path() + "/self-cgroup";
  std::string parent = own + "/corral-" + pid_str();

  explicit FakeV2(const std::string& controllers) {
    put(root + "/cgroup.controllers", controllers + "\n");
    put(own + "/cgroup.controllers", controllers + "\n");
    put(own + "/cgroup.subtree_control", "");
    put(own + "/cgroup.procs", "");
    put(self, "0::/user.slice/x\n");
  }
};

}  // namespace

TEST_CASE("v2 with controllers, against a fake tree: files written, paths, cleanup of fds") {
  MESSAGE(
      "cgroup v2 with controllers (subtree_control delegation, memory.max, pids.max, cpu.max) is "
      "tested against a fake tree: this host's v2 mount (/sys/fs/cgroup/unified) has no controllers");
  FakeV2 fake("memory pids cpu");
  const auto fds_before = open_fds();
  {
    auto m = CgroupManager::create(fake.root, fake.self);
    const auto& caps = m->capabilities();
    INFO(describe(caps));
    CHECK(caps.version == "v2");
    CHECK(caps.memory);
    CHECK(caps.pids);
    CHECK(caps.cpu);
    CHECK(caps.kill);  // the probe's write to cgroup.kill succeeds on a plain file
    CHECK(contains(caps.memory_reason, "memory.max"));
    CHECK(contains(caps.memory_reason, fake.parent));
    // The fake has no cpu.stat: a reason, not a pretence.
    CHECK_FALSE(caps.cpu_accounting);
    CHECK(contains(caps.cpu_accounting_reason, "cpu.stat"));

    // Delegation: enabled for the supervisor's children, then for the groups beneath corral-<pid>.
    CHECK(slurp(fake.own + "/cgroup.subtree_control") == "+memory +pids +cpu");
    CHECK(slurp(fake.parent + "/cgroup.subtree_control") == "+memory +pids +cpu");

    auto g = m->create_group("job1", CgroupLimits{64 * MiB, 16, 0.5});
    REQUIRE_MESSAGE(g.ok(), g.status().message());
    CHECK((*g)->paths() == std::vector<std::string>{fake.parent + "/job1"});
    CHECK(slurp(fake.parent + "/job1/memory.max") == "67108864");
    CHECK(slurp(fake.parent + "/job1/pids.max") == "16");
    CHECK(slurp(fake.parent + "/job1/cpu.max") == "50000 100000");
    CHECK_FALSE(exists(fake.parent + "/job1/memory.swap.max"));  // only "where present"
    CHECK((*g)->empty());

    // v2 is joined at birth (clone3 CLONE_INTO_CGROUP): the group's directory, no self-join
    // file; a process that could not be born there is moved through cgroup.procs.
    auto join = (*g)->open_join();
    REQUIRE_MESSAGE(join.ok(), join.status().message());
    CHECK(join->self.empty());
    REQUIRE(join->clone_into.valid());
    struct stat by_fd {}, by_path {};
    REQUIRE(::fstat(join->clone_into.get(), &by_fd) == 0);
    REQUIRE(::stat((fake.parent + "/job1").c_str(), &by_path) == 0);
    CHECK(by_fd.st_ino == by_path.st_ino);
    REQUIRE((*g)->add_after_clone(4242).ok());
    CHECK(slurp(fake.parent + "/job1/cgroup.procs") == "4242");
    put(fake.parent + "/job1/cgroup.procs", "");

    // Only what was asked is written; the group is the same single directory.
    auto g2 = m->create_group("job2", CgroupLimits{std::nullopt, std::nullopt, 1.5});
    REQUIRE_MESSAGE(g2.ok(), g2.status().message());
    CHECK(slurp(fake.parent + "/job2/cpu.max") == "150000 100000");
    CHECK_FALSE(exists(fake.parent + "/job2/memory.max"));
    CHECK_FALSE(exists(fake.parent + "/job2/pids.max"));

    auto dup = m->create_group("job1", {});
    REQUIRE_FALSE(dup.ok());
    CHECK(dup.status().step() == "mkdir");
    CHECK(dup.status().err() == EEXIST);
  }
  // The manager undid its delegation in the supervisor's group.
  CHECK(slurp(fake.own + "/cgroup.subtree_control") == "-memory -pids -cpu");
  CHECK(open_fds() == fds_before);
}

TEST_CASE("missing v2 controllers: capabilities say why, create_group refuses naming the controller") {
  FakeV2 fake("memory");
  auto m = CgroupManager::create(fake.root, fake.self);
  const auto& caps = m->capabilities();
  INFO(describe(caps));
  CHECK(caps.memory);
  CHECK_FALSE(caps.pids);
  CHECK_FALSE(caps.cpu);
  CHECK(contains(caps.pids_reason, "does not offer pids"));
  CHECK(contains(caps.cpu_reason, "does not offer cpu"));
  CHECK(contains(caps.pids_reason, "cgroup.controllers"));
  CHECK(slurp(fake.own + "/cgroup.subtree_control") == "+memory");

  auto no_pids = m->create_group("j", CgroupLimits{8 * MiB, 8, std::nullopt});
  REQUIRE_FALSE(no_pids.ok());
  CHECK(no_pids.status().step() == "cgroup");
  CHECK(contains(no_pids.status().message(), "pids limit requested but the pids controller is unavailable"));
  CHECK(contains(no_pids.status().message(), "does not offer pids"));

  auto no_cpu = m->create_group("j", CgroupLimits{std::nullopt, std::nullopt, 1.0});
  REQUIRE_FALSE(no_cpu.ok());
  CHECK(contains(no_cpu.status().message(), "cpu limit requested but the cpu controller is unavailable"));
  CHECK_FALSE(exists(fake.parent + "/j"));  // refused before anything was created

  auto ok = m->create_group("j", CgroupLimits{8 * MiB, std::nullopt, std::nullopt});
  REQUIRE_MESSAGE(ok.ok(), ok.status().message());
  CHECK(slurp(fake.parent + "/j/memory.max") == "8388608");
}

TEST_CASE("absurd limits and bad names are refused as invalid") {
  FakeV2 fake("memory pids cpu");
  auto m = CgroupManager::create(fake.root, fake.self);
  auto refused = [&](const std::string& name, CgroupLimits l, const std::string& words) {
    auto g = m->create_group(name, l);
    REQUIRE_FALSE(g.ok());
    CHECK(g.status().step() == "validate");
    CHECK_MESSAGE(contains(g.status().message(), words), g.status().message());
  };
  // The bounds are the caps' own (runtime/limits.h cap_limits): the CLI and normalize() agree.
  refused("a", {4 * MiB - 1, std::nullopt, std::nullopt}, "memory limit 4194303 bytes is outside 4194304..");
  refused("a", {(1ULL << 40) + 1, std::nullopt, std::nullopt}, "memory limit");
  refused("a", {std::nullopt, 0, std::nullopt}, "pids limit 0");
  refused("a", {std::nullopt, 1'000'001, std::nullopt}, "pids limit 1000001 is outside 1..1000000");
  refused("a", {std::nullopt, std::nullopt, 0.0}, "cpu limit");
  refused("a", {std::nullopt, std::nullopt, -1.0}, "cpu limit");
  refused("a", {std::nullopt, std::nullopt, 0.009}, "cpu limit 0.009000 CPUs is outside 0.01..1024");
  refused("a", {std::nullopt, std::nullopt, 1025.0}, "cpu limit");
  refused("a", {std::nullopt, std::nullopt, std::nan("")}, "cpu limit");
  for (const char* name : {"", ".", "..", "a/b", "corral-1", "a b"}) refused(name, {}, "cgroup name");
  CHECK(m->create_group("ok.name_1-x", {4 * MiB, 1'000'000, 0.01}).ok());
}

TEST_CASE("v1 layout, against a fake tree: own sub-group, co-mounted cpu,cpuacct, no kill") {
  TempDir tmp;
  const std::string root = tmp.path() + "/cgroup", self = tmp.path() + "/self-cgroup";
  const std::string parent_name = "corral-" + pid_str();
  put(root + "/memory/svc/a/cgroup.procs", "");
  put(root + "/pids/cgroup.procs", "");
  put(root + "/cpu,cpuacct/cgroup.procs", "");
  std::filesystem::create_directory_symlink("cpu,cpuacct", root + "/cpu");
  put(self, "7:pids:/\n4:memory:/svc/a\n2:cpu,cpuacct:/\n1:name=systemd:/\n0::/\n");

  auto m = CgroupManager::create(root, self);
  const auto& caps = m->capabilities();
  INFO(describe(caps));
  CHECK(caps.version == "v1");
  CHECK(caps.memory);
  CHECK(caps.pids);
  CHECK(caps.cpu);
  CHECK_FALSE(caps.kill);
  CHECK(contains(caps.kill_reason, root + "/unified"));
  CHECK(contains(caps.kill_reason, "falls back to SIGKILL"));
  // Beneath the supervisor's own memory group, never at that hierarchy's root.
  CHECK(exists(root + "/memory/svc/a/" + parent_name));
  CHECK_FALSE(exists(root + "/memory/" + parent_name));

  auto g = m->create_group("job", CgroupLimits{64 * MiB, 16, 0.5});
  REQUIRE_MESSAGE(g.ok(), g.status().message());
  auto paths = (*g)->paths();
  std::sort(paths.begin(), paths.end());
  CHECK(paths == std::vector<std::string>{root + "/cpu,cpuacct/" + parent_name + "/job",
                                          root + "/memory/svc/a/" + parent_name + "/job",
                                          root + "/pids/" + parent_name + "/job"});
  const std::string mem = root + "/memory/svc/a/" + parent_name + "/job";
  CHECK(slurp(mem + "/memory.limit_in_bytes") == "67108864");
  CHECK(slurp(mem + "/memory.oom_control") == "0");
  CHECK_FALSE(exists(mem + "/memory.memsw.limit_in_bytes"));  // only if the kernel offers it
  CHECK(slurp(root + "/pids/" + parent_name + "/job/pids.max") == "16");
  CHECK(slurp(root + "/cpu,cpuacct/" + parent_name + "/job/cpu.cfs_period_us") == "100000");
  CHECK(slurp(root + "/cpu,cpuacct/" + parent_name + "/job/cpu.cfs_quota_us") == "50000");

  // v1 is joined by the process itself, through each group's `tasks` file; nothing is born in
  // a group, and nothing is moved after the clone.
  for (const auto& p : paths) put(p + "/tasks", "");
  auto join = (*g)->open_join();
  REQUIRE_MESSAGE(join.ok(), join.status().message());
  CHECK(join->self.size() == 3);
  CHECK_FALSE(join->clone_into.valid());
  for (const auto& fd : join->self) REQUIRE(::write(fd.get(), "0", 1) == 1);
  for (const auto& p : paths) CHECK(slurp(p + "/tasks") == "0");
  REQUIRE((*g)->add_after_clone(4242).ok());
  for (const auto& p : paths) CHECK_FALSE(exists(p + "/cgroup.procs"));
  for (const auto& p : paths) std::filesystem::remove(p + "/tasks");
}

TEST_CASE("a supervisor group missing from its hierarchy is reported, not replaced by the root") {
  TempDir tmp;
  const std::string root = tmp.path() + "/cgroup", self = tmp.path() + "/self-cgroup";
  put(root + "/memory/cgroup.procs", "");
  put(self, "4:memory:/gone\n");
  auto m = CgroupManager::create(root, self);
  const auto& caps = m->capabilities();
  CHECK(caps.version == "none");
  CHECK_FALSE(caps.memory);
  CHECK(contains(caps.memory_reason, "/gone"));
  CHECK_FALSE(exists(root + "/memory/corral-" + pid_str()));
  auto g = m->create_group("j", CgroupLimits{8 * MiB, std::nullopt, std::nullopt});
  REQUIRE_FALSE(g.ok());
  CHECK(contains(g.status().message(), "memory"));
  auto plain = m->create_group("j", {});
  REQUIRE_FALSE(plain.ok());
  CHECK(contains(plain.status().message(), "no usable cgroup hierarchy"));
}

// ---------------------------------------------------------------------------------------------
// The real host (root in CI).

namespace {

// What the host offers, found independently of the code under test: the v1 mount, or the
// supervisor's v2 group's cgroup.controllers.
bool host_offers(const std::string& controller) {
  if (!exists("/sys/fs/cgroup/cgroup.controllers")) return exists("/sys/fs/cgroup/" + controller + "/tasks");
  std::istringstream self(slurp("/proc/self/cgroup"));
  for (std::string line; std::getline(self, line);)
    if (line.rfind("0::", 0) == 0) {
      std::istringstream ctl(slurp("/sys/fs/cgroup" + line.substr(3) + "/cgroup.controllers"));
      for (std::string c; ctl >> c;)
        if (c == controller) return true;
    }
  return false;
}

bool kernel_at_least(int major, int minor) {
  struct utsname u;
  ::uname(&u);
  int ma = 0, mi = 0;
  std::sscanf(u.release, "%d.%d", &ma, &mi);
  return ma > major || (ma == major && mi >= minor);
}

bool host_has_v2() {
  return exists("/sys/fs/cgroup/cgroup.controllers") || exists("/sys/fs/cgroup/unified/cgroup.controllers");
}

bool root_user() { return ::geteuid() == 0; }

}  // namespace

TEST_CASE("real host: capabilities, limits written, add, usage, kill, removal") {
  if (!root_user()) return skip("real-host cgroup tests", "not root");
  const auto fds_before = open_fds();
  std::vector<std::string> paths;
  {
    auto m = CgroupManager::create();
    const auto caps = m->capabilities();
    MESSAGE("this host: " << describe(caps));
    CHECK(caps.memory == host_offers("memory"));
    CHECK(caps.pids == host_offers("pids"));
    CHECK(caps.cpu == host_offers("cpu"));
    CHECK(caps.kill == (host_has_v2() && kernel_at_least(5, 14)));
    CHECK(caps.cpu_accounting == (host_has_v2() || host_offers("cpuacct")));
    CHECK(caps.version != "none");

    CgroupLimits limits;
    if (caps.memory)
      limits.memory_bytes = 64 * MiB;
    else
      skip("memory limit", caps.memory_reason);
    if (caps.pids)
      limits.pids = 16;
    else
      skip("pids limit", caps.pids_reason);
    if (caps.cpu)
      limits.cpus = 0.5;
    else
      skip("cpu limit", caps.cpu_reason);
    auto made = m->create_group("basic", limits);
    REQUIRE_MESSAGE(made.ok(), made.status().message());
    auto g = std::move(made).value();
    paths = g->paths();
    for (const auto& p : paths) {
      INFO(p);
      CHECK(std::filesystem::is_directory(p));
      CHECK(contains(p, "/corral-" + pid_str() + "/basic"));
      if (exists(p + "/memory.limit_in_bytes")) CHECK(slurp(p + "/memory.limit_in_bytes") == "67108864\n");
      if (exists(p + "/memory.max")) CHECK(slurp(p + "/memory.max") == "67108864\n");
      if (exists(p + "/pids.max")) CHECK(slurp(p + "/pids.max") == "16\n");
      if (exists(p + "/cpu.cfs_quota_us")) CHECK(slurp(p + "/cpu.cfs_quota_us") == "50000\n");
      if (exists(p + "/cpu.max")) CHECK(slurp(p + "/cpu.max") == "50000 100000\n");
    }
    CHECK(g->empty());

    Child c = Child::start([](int ready) {
      touch_memory(4 * MiB);
      spin_for(20ms);
      (void)!::write(ready, "r", 1);
      ::pause();
    });
    CHECK_FALSE(g->holds(c.pid));
    REQUIRE(g->add(c.pid).ok());
    c.go();
    char r;
    REQUIRE(c.read_report(&r, 1));
    for (const auto& p : paths) CHECK_MESSAGE(procs_of(p).count(c.pid) == 1, p);
    CHECK_FALSE(g->empty());
    CHECK(g->holds(c.pid));
    CHECK_FALSE(g->holds(::getpid()));

    const auto u = g->usage();
    if (caps.memory) {
      REQUIRE(u.memory_peak_bytes.has_value());
      CHECK(*u.memory_peak_bytes >= 4 * MiB);
      CHECK_FALSE(u.oom_killed);
    }
    if (caps.cpu_accounting) {
      REQUIRE(u.cpu_usage_ns.has_value());
      CHECK(*u.cpu_usage_ns >= 10'000'000);  // the 20 ms spin, at 0.5 CPU at least 10 ms
    } else {
      skip("cpu usage", caps.cpu_accounting_reason);
    }

    CHECK(g->kill());
    const int st = c.wait();
    CHECK(WIFSIGNALED(st));
    CHECK(WTERMSIG(st) == SIGKILL);
    CHECK(g->empty());
    CHECK(g->kill());  // idempotent on an empty group

    g.reset();
    for (const auto& p : paths) CHECK_MESSAGE(!exists(p), p);
    for (const auto& p : paths) CHECK(exists(std::filesystem::path(p).parent_path()));
  }
  for (const auto& p : paths) CHECK_MESSAGE(!exists(std::filesystem::path(p).parent_path()), p);
  CHECK(open_fds() == fds_before);
}

TEST_CASE("real host: 0.5 CPU is enforced") {
  if (!root_user()) return skip("cpu enforcement", "not root");
  auto m = CgroupManager::create();
  const auto& caps = m->capabilities();
  if (!caps.cpu || !caps.cpu_accounting)
    return skip("cpu enforcement", caps.cpu_reason + " / " + caps.cpu_accounting_reason);
  auto made = m->create_group("cpu", CgroupLimits{std::nullopt, std::nullopt, 0.5});
  REQUIRE_MESSAGE(made.ok(), made.status().message());
  auto& g = *made;
  Child c = Child::start([](int ready) {
    // 300 ms of CPU, however long that takes.
    for (timespec t{};;) {
      ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
      if (t.tv_sec * 1000 + t.tv_nsec / 1'000'000 >= 300) break;
    }
    (void)!::write(ready, "r", 1);
    ::pause();
  });
  REQUIRE(g->add(c.pid).ok());
  const auto start = std::chrono::steady_clock::now();
  c.go();
  char r;
  REQUIRE(c.read_report(&r, 1));
  const double wall_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  const double cpu_ms = static_cast<double>(g->usage().cpu_usage_ns.value_or(0)) / 1e6;
  MESSAGE("300 ms of CPU at 0.5 CPU took " << wall_ms << " ms wall; the group counted " << cpu_ms
                                           << " ms CPU");
  // 50 ms per 100 ms period: 600 ms, less at most one period's burst at the start.
  CHECK(wall_ms >= 480);
  CHECK(cpu_ms >= 295);
  CHECK(cpu_ms <= 400);
  CHECK(g->kill());
  CHECK(WTERMSIG(c.wait()) == SIGKILL);
}

TEST_CASE("real host: past a 32 MiB limit the child is OOM-killed and usage says so") {
  if (!root_user()) return skip("memory limit", "not root");
  auto m = CgroupManager::create();
  const auto& caps = m->capabilities();
  if (!caps.memory) return skip("memory limit", caps.memory_reason);
  auto made = m->create_group("oom", CgroupLimits{32 * MiB, std::nullopt, std::nullopt});
  REQUIRE_MESSAGE(made.ok(), made.status().message());
  auto& g = *made;
  Child c = Child::start([](int) {
    touch_memory(128 * MiB);
    ::_exit(0);  // not reached if the limit holds
  });
  REQUIRE(g->add(c.pid).ok());
  c.go();
  const int st = c.wait();
  CHECK(WIFSIGNALED(st));
  CHECK(WTERMSIG(st) == SIGKILL);
  const auto u = g->usage();
  CHECK(u.oom_killed);
  REQUIRE(u.memory_peak_bytes.has_value());
  MESSAGE("memory peak " << *u.memory_peak_bytes / 1024 << " KiB under a 32 MiB limit");
  CHECK(*u.memory_peak_bytes >= 30 * MiB);
  CHECK(*u.memory_peak_bytes <= 32 * MiB);
  CHECK(g->empty());
}

TEST_CASE("real host: with pids 5, fork fails with EAGAIN past the limit") {
  if (!root_user()) return skip("pids limit", "not root");
  auto m = CgroupManager::create();
  const auto& caps = m->capabilities();
  if (!caps.pids) return skip("pids limit", caps.pids_reason);
  auto made = m->create_group("pids", CgroupLimits{std::nullopt, 5, std::nullopt});
  REQUIRE_MESSAGE(made.ok(), made.status().message());
  auto& g = *made;
  // Grandchildren are reparented to us when killed, so that we can reap them.
  REQUIRE(::prctl(PR_SET_CHILD_SUBREAPER, 1) == 0);
  {
    Child c = Child::start([](int ready) {
      int counts[2] = {0, 0};  // forks that succeeded, forks that failed with EAGAIN
      for (int i = 0; i < 20; ++i) {
        pid_t p = ::fork();
        if (p == 0) {
          ::pause();
          ::_exit(0);
        }
        if (p > 0)
          ++counts[0];
        else if (errno == EAGAIN)
          ++counts[1];
      }
      (void)!::write(ready, counts, sizeof counts);
      ::pause();
    });
    REQUIRE(g->add(c.pid).ok());
    c.go();
    int counts[2];
    REQUIRE(c.read_report(counts, sizeof counts));
    MESSAGE("pids.max 5: " << counts[0] << " forks succeeded, " << counts[1] << " failed with EAGAIN");
    CHECK(counts[0] <= 5);
    CHECK(counts[0] == 4);  // the child itself is the fifth
    CHECK(counts[0] + counts[1] == 20);
    CHECK(g->kill());
    CHECK(WTERMSIG(c.wait()) == SIGKILL);
  }
  reap_others();
  REQUIRE(::prctl(PR_SET_CHILD_SUBREAPER, 0) == 0);
  CHECK(g->empty());
}

TEST_CASE("real host, v1 without cgroup.kill: kill() signals every listed pid until none is left") {
  if (!root_user()) return skip("v1 kill fallback", "not root");
  if (exists("/sys/fs/cgroup/cgroup.controllers"))
    return skip("v1 kill fallback", "this host is pure cgroup v2, there is no v1 hierarchy to try it on");
  // The host's own v1 mounts, minus the v2 one, so that only the signal fallback can kill.
  TempDir tmp;
  int linked = 0;
  for (const char* c : {"memory", "pids", "cpu", "cpuacct"})
    if (exists(std::string("/sys/fs/cgroup/") + c + "/tasks")) {
      std::filesystem::create_directory_symlink(std::string("/sys/fs/cgroup/") + c, tmp.path() + "/" + c);
      ++linked;
    }
  if (linked == 0) return skip("v1 kill fallback", "no v1 memory, pids or cpu hierarchy here");
  std::vector<std::string> paths;
  REQUIRE(::prctl(PR_SET_CHILD_SUBREAPER, 1) == 0);
  {
    auto m = CgroupManager::create(tmp.path(), "/proc/self/cgroup");
    const auto& caps = m->capabilities();
    INFO(describe(caps));
    CHECK(caps.version == "v1");
    CHECK_FALSE(caps.kill);
    auto made = m->create_group("fallback", {});
    REQUIRE_MESSAGE(made.ok(), made.status().message());
    auto& g = *made;
    paths = g->paths();
    Child c = Child::start([](int ready) {
      // A tree that scatters: its own session, grandchildren that fork again.
      ::setsid();
      for (int i = 0; i < 3; ++i)
        if (::fork() == 0) {
          if (::fork() == 0) ::pause();
          ::pause();
        }
      (void)!::write(ready, "r", 1);
      ::pause();
    });
    REQUIRE(g->add(c.pid).ok());
    c.go();
    char r;
    REQUIRE(c.read_report(&r, 1));
    std::this_thread::sleep_for(20ms);
    CHECK(procs_of(paths.front()).size() >= 4);
    CHECK(g->kill());
    CHECK(WTERMSIG(c.wait()) == SIGKILL);
    CHECK(g->empty());
  }
  reap_others();
  REQUIRE(::prctl(PR_SET_CHILD_SUBREAPER, 0) == 0);
  for (const auto& p : paths) CHECK_MESSAGE(!exists(p), p);
}

TEST_CASE("real host: the destructor kills what is left, and a refused limit leaves nothing") {
  if (!root_user()) return skip("destructor kill", "not root");
  auto m = CgroupManager::create();
  auto made = m->create_group("left", {});
  REQUIRE_MESSAGE(made.ok(), made.status().message());
  auto paths = (*made)->paths();
  Child c = Child::start([](int) { ::pause(); });
  REQUIRE((*made)->add(c.pid).ok());
  c.go();
  made.value().reset();
  CHECK(WTERMSIG(c.wait()) == SIGKILL);
  for (const auto& p : paths) CHECK_MESSAGE(!exists(p), p);

  // A pid that cannot exist: the kernel's ESRCH comes back as the write's Status.
  auto g = m->create_group("again", {});
  REQUIRE(g.ok());
  Status s = (*g)->add(999'999'999);
  CHECK_FALSE(s.ok());
  CHECK(s.step() == "write");
}

TEST_CASE("skipped parts") { MESSAGE(skipped << " part(s) skipped on this host"); }
