// The soak (ctest label `soak`): a real `corral serve` runs many executes, scope
// create/close cycles, worker evaluations and background start/poll cycles, and afterwards
// its fds, threads, RSS, mounts, cgroups, temp dirs and zombies are back where they started.
//
// CORRAL_SOAK_SCALE multiplies the full counts (10,000 executes; 1,000 of each cycle):
// unset it is 0.02, tools/test.sh runs 0.1, and `CORRAL_SOAK_SCALE=1` is the full soak, run
// by hand (README.md "Tests").
#include <doctest/doctest.h>

#include <cmath>
#include <map>

#include "tests/test_util.h"
#include "worker_proto/messages.h"

using namespace corral;
using namespace corral::test;
using namespace std::chrono_literals;

namespace {

const std::string kEcho = CORRAL_ECHO_WORKER;
// Allocator caches and lazily grown buffers may keep some pages after the warm-up round; a
// leak of a few hundred bytes per request over the full soak exceeds this.
constexpr long kRssSlackKib = 8 * 1024;

int scaled(int full) {
  const char* s = std::getenv("CORRAL_SOAK_SCALE");
  const double scale = s && *s ? std::atof(s) : 0.02;
  return std::max(1, static_cast<int>(std::lround(full * scale)));
}

std::size_t count_entries(const std::string& dir) {
  std::error_code ec;
  std::size_t n = 0;
  for (auto it = std::filesystem::directory_iterator(dir, ec); !ec && it != std::filesystem::directory_iterator();
       it.increment(ec))
    ++n;
  return n;
}

long rss_kib(pid_t pid) {
  std::istringstream in(read_file("/proc/" + std::to_string(pid) + "/status"));
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::atol(line.c_str() + 6);
  return -1;
}

// Directories beneath `dir`, at any depth.
std::size_t subdirs(const std::string& dir) {
  std::size_t n = 0;
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(dir, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec))
    if (it->is_directory(ec) && !it->is_symlink(ec)) ++n;
  return n;
}

// Cgroups the supervisor made beneath its corral-<pid> groups, in every hierarchy.
std::size_t leftover_cgroups(pid_t pid) {
  std::size_t n = 0;
  const std::string name = "corral-" + std::to_string(pid);
  std::error_code ec;
  auto it = std::filesystem::recursive_directory_iterator(
      "/sys/fs/cgroup", std::filesystem::directory_options::skip_permission_denied, ec);
  for (; !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    if (it->is_symlink(ec) || !it->is_directory(ec)) {
      it.disable_recursion_pending();
      continue;
    }
    if (it->path().filename() == name) {
      n += subdirs(it->path().string());
      it.disable_recursion_pending();
    }
  }
  return n;
}

// Scope temp dirs live in the supervisor's corral-<pid>-XXXXXX dir under the temp root;
// the root itself holds only that dir and the test's socket dir and logs.
std::size_t temp_entries(const Server& s) {
  std::size_t n = count_entries(s.dir());
  const std::string prefix = "corral-" + std::to_string(s.pid()) + "-";
  for (const auto& e : std::filesystem::directory_iterator(s.dir()))
    if (e.path().filename().string().rfind(prefix, 0) == 0) n += count_entries(e.path().string());
  return n;
}

std::size_t zombie_children(pid_t pid) {
  std::size_t n = 0;
  for (const auto& e : std::filesystem::directory_iterator("/proc")) {
    const std::string stat = read_file(e.path().string() + "/stat");
    auto close = stat.rfind(')');
    if (close == std::string::npos || close + 4 >= stat.size()) continue;
    std::istringstream rest(stat.substr(close + 2));
    char state = 0;
    pid_t ppid = 0;
    rest >> state >> ppid;
    if (ppid == pid && state == 'Z') ++n;
  }
  return n;
}

// Mount points in the supervisor's mount namespace beneath its temp root: its own (the root's
// bind and each scope's tmpfs). Other tests' supervisors share the namespace; their mounts are
// not this one's.
std::vector<std::string> mount_points(const Server& s) {
  std::vector<std::string> points;
  std::istringstream in(read_file("/proc/" + std::to_string(s.pid()) + "/mountinfo"));
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream f(line);
    std::string id, parent, devno, root, point;
    f >> id >> parent >> devno >> root >> point;
    if (point.rfind(s.dir() + "/", 0) == 0) points.push_back(point);
  }
  return points;
}

std::size_t own_mounts(const Server& s) { return mount_points(s).size(); }

// What the counts are made of, for a failure's message: each fd's target and each mount point.
std::string details(const Server& s) {
  const std::string proc = "/proc/" + std::to_string(s.pid());
  std::string out = "fds:";
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator(proc + "/fd", ec); !ec && it != std::filesystem::directory_iterator();
       it.increment(ec))
    out += " " + it->path().filename().string() + "->" + std::filesystem::read_symlink(it->path(), ec).string();
  out += "\nmounts:";
  for (const auto& point : mount_points(s)) out += " " + point;
  return out;
}

// What must come back: everything but RSS exactly.
std::map<std::string, long> snapshot(const Server& s) {
  const std::string proc = "/proc/" + std::to_string(s.pid());
  return {
      {"fds", static_cast<long>(count_entries(proc + "/fd"))},
      {"threads", static_cast<long>(count_entries(proc + "/task"))},
      {"mounts", static_cast<long>(own_mounts(s))},
      {"cgroups", static_cast<long>(leftover_cgroups(s.pid()))},
      {"temp dirs", static_cast<long>(temp_entries(s))},
      {"zombies", static_cast<long>(zombie_children(s.pid()))},
  };
}

// A snapshot once it holds still: the same over a second of samples (at most 20 s).
std::map<std::string, long> steady_snapshot(const Server& s) {
  auto last = snapshot(s);
  int same = 0;
  for (int i = 0; i < 100 && same < 5; ++i) {
    std::this_thread::sleep_for(200ms);
    auto now = snapshot(s);
    same = now == last ? same + 1 : 0;
    last = std::move(now);
  }
  return last;
}

std::uint64_t next_id = 1;

void execute(proto::Client& c, bool capped) {
  proto::ExecArgs a;
  a.argv = {kHelper, "write", "64"};
  if (capped) {  // through cgroups, where the host has them
    a.pids = 64;
    a.memory_bytes = 256ull << 20;
  }
  proto::ExecReply r = must(c.exec(next_id++, a, nullptr));
  if (r.error()) FAIL("execute failed: " << proto::str(r.error()->message()));
  REQUIRE(r.result());
  REQUIRE(r.out.size() == 64);
}

void scope_cycle(proto::Client& c) {
  proto::Received r;
  const auto id = next_id++;
  r = must(c.call(id, proto::make_scope_create(id, proto::ScopeArgs{})));
  if (r.msg->body_as_Error()) FAIL("scope create failed: " << proto::str(r.msg->body_as_Error()->message()));
  REQUIRE(r.msg->body_as_ScopeCreated());
  const std::string scope = proto::str(r.msg->body_as_ScopeCreated()->id());
  const auto close = next_id++;
  r = must(c.call(close, proto::make_scope_close(close, scope)));
  REQUIRE(r.msg->body_as_Ack());
}

std::string create_scope(proto::Client& c) {
  proto::Received r;
  const auto id = next_id++;
  r = must(c.call(id, proto::make_scope_create(id, proto::ScopeArgs{})));
  REQUIRE(r.msg->body_as_ScopeCreated());
  return proto::str(r.msg->body_as_ScopeCreated()->id());
}

void close_scope(proto::Client& c, const std::string& scope) {
  proto::Received r;
  const auto id = next_id++;
  r = must(c.call(id, proto::make_scope_close(id, scope)));
  REQUIRE(r.msg->body_as_Ack());
}

// A worker in its own scope: started, evaluated `n` times (reset every 100th), and ended
// with the scope.
void worker_evaluations(proto::Client& c, int n) {
  const std::string scope = create_scope(c);
  proto::WorkerStartArgs w;
  w.name = "soak";
  w.scope = scope;
  w.argv = {kEcho};
  proto::Received r;
  auto id = next_id++;
  r = must(c.call(id, proto::make_worker_start(id, w)));
  if (r.msg->body_as_Error()) FAIL("worker start failed: " << proto::str(r.msg->body_as_Error()->message()));
  REQUIRE(r.msg->body_as_WorkerStarted());
  for (int i = 0; i < n; ++i) {
    proto::WorkerEvalArgs e;
    e.name = "soak";
    e.scope = scope;
    e.request = "echo";
    e.reset = i % 100 == 99;
    id = next_id++;
    r = must(c.call(id, proto::make_worker_eval(id, e)));
    if (r.msg->body_as_Error()) FAIL("eval failed: " << proto::str(r.msg->body_as_Error()->message()));
    REQUIRE(r.msg->body_as_WorkerEvalResult());
  }
  close_scope(c, scope);
}

void background_cycle(proto::Client& c) {
  proto::ExecArgs a;
  a.argv = {kHelper, "write", "16"};
  a.background = true;
  proto::Received r;
  auto id = next_id++;
  r = must(c.call(id, proto::make_exec(id, a)));
  if (r.msg->body_as_Error()) FAIL("background start failed: " << proto::str(r.msg->body_as_Error()->message()));
  REQUIRE(r.msg->body_as_BackgroundStarted());
  const std::string bg = proto::str(r.msg->body_as_BackgroundStarted()->id());
  for (int polls = 0;; ++polls) {
    REQUIRE(polls < 2000);  // 20 s
    id = next_id++;
    r = must(c.call(id, proto::make_poll(id, bg)));
    REQUIRE(r.msg->body_as_PollReply());
    if (proto::str(r.msg->body_as_PollReply()->state()) != "running") break;
    std::this_thread::sleep_for(10ms);
  }
}

// One round of everything; `n` counts the executes, a tenth of it each cycle.
void soak_round(Server& s, int executes, int scopes, int evals, int backgrounds) {
  {
    auto c = s.connect();
    REQUIRE(c);
    for (int i = 0; i < executes; ++i) {
      if (i % 500 == 499) {  // connections come and go too
        c = s.connect();
        REQUIRE(c);
      }
      execute(*c, i % 10 == 0);
    }
  }
  auto c = s.connect();
  REQUIRE(c);
  for (int i = 0; i < scopes; ++i) scope_cycle(*c);
  worker_evaluations(*c, evals);
  for (int i = 0; i < backgrounds; ++i) background_cycle(*c);
}

}  // namespace

TEST_CASE("soak: after many requests the supervisor holds what it held before") {
  Server s({}, {kSmallAsanQuarantine});
  REQUIRE(running(s.pid()));
  const int executes = scaled(10000), scopes = scaled(1000), evals = scaled(1000), backgrounds = scaled(1000);
  MESSAGE("soak: " << executes << " executes, " << scopes << " scope cycles, " << evals << " worker evaluations, "
                   << backgrounds << " background cycles");
  // Warm-up rounds first: what the first requests create once (thread pools, the default
  // scope and its prepared sandboxes, spare namespaces and cgroups, allocator arenas) is the
  // baseline, not a leak. Under load a prepared sandbox may fail to start (it is made again a
  // few commands later) and teardown lags, so rounds repeat until two in a row leave the same
  // steady snapshot.
  std::map<std::string, long> before;
  for (int round = 0; round < 10; ++round) {
    soak_round(s, 20, 5, 5, 5);
    const auto previous = before;
    before = steady_snapshot(s);
    if (before == previous) break;
    MESSAGE("soak: warm-up round " << round + 1 << " changed the baseline; another round");
  }
  const std::string before_details = details(s);
  const long rss_before = rss_kib(s.pid());
  for (const auto& [what, n] : before) MESSAGE("soak: baseline " << what << " " << n);

  // The probes see what they count: a scope with a capped command in it shows up as a temp
  // dir and (where the host has cgroups) a cgroup, and both go with the scope. The command's
  // record stays for a poll that never comes; it must hold no descriptor (it held five).
  {
    auto c = s.connect();
    REQUIRE(c);
    const std::string scope = create_scope(*c);
    proto::ExecArgs a;
    a.argv = {kHelper, "sleep", "60"};
    a.background = true;
    a.scope = scope;
    a.pids = 64;
    proto::Received r;
    const auto id = next_id++;
    r = must(c->call(id, proto::make_exec(id, a)));
    if (r.msg->body_as_BackgroundStarted()) {
      // The launch (which makes the cgroup) runs off the loop: it may follow the reply.
      CHECK(wait_until([&] { return leftover_cgroups(s.pid()) > static_cast<std::size_t>(before.at("cgroups")); }, 10s));
    } else {
      REQUIRE(r.msg->body_as_Error());
      MESSAGE("soak: no cgroup probe check, the host refused a pids cap: " << proto::str(r.msg->body_as_Error()->message()));
    }
    CHECK(temp_entries(s) > static_cast<std::size_t>(before.at("temp dirs")));
    // A root supervisor's temp root is a mount of its own, and each scope's /tmp a tmpfs in it.
    if (before.at("mounts") > 0) CHECK(own_mounts(s) > static_cast<std::size_t>(before.at("mounts")));
    close_scope(*c, scope);
  }

  soak_round(s, executes, scopes, evals, backgrounds);

  // Teardown that follows a reply (reaping, cgroup removal) may still be under way.
  std::map<std::string, long> after;
  wait_until([&] { return (after = snapshot(s)) == before; }, 20s);
  const long rss_after = rss_kib(s.pid());
  if (after != before) MESSAGE("soak: before\n" << before_details << "\nafter\n" << details(s));
  for (const auto& [what, n] : before) {
    CAPTURE(what);
    CHECK(after[what] == n);
  }
  MESSAGE("soak: RSS " << rss_before << " KiB before, " << rss_after << " KiB after");
  CHECK(rss_after <= rss_before + kRssSlackKib);
  CHECK(running(s.pid()));
}
