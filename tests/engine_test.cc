// The process engine on its own: no socket, no FlatBuffers.
#include <doctest/doctest.h>

#include <asio/steady_timer.hpp>
#include <sched.h>
#include <sys/prctl.h>

#include <filesystem>
#include <optional>
#include <set>
#include <thread>

#include "runtime/sandbox.h"
#include "runtime/spawn.h"
#include "tests/test_util.h"

using namespace corral;
using namespace corral::test;
using namespace std::chrono_literals;

namespace {
std::string pattern(std::size_t n) {
  std::string s(n, '\0');
  for (std::size_t i = 0; i < n; ++i) s[i] = static_cast<char>('a' + i % 26);
  return s;
}
}  // namespace

TEST_CASE("exit codes and signals are values") {
  auto r = run(helper_spec({"exit", "7"})).result;
  CHECK(r.status == ExitStatus::exited);
  CHECK(r.exit_code == 7);
  CHECK(cli_exit_code(r) == 7);

  r = run(helper_spec({"exit", "0"})).result;
  CHECK(r.status == ExitStatus::exited);
  CHECK(r.exit_code == 0);

  r = run(helper_spec({"signal", "11"})).result;
  CHECK(r.status == ExitStatus::signaled);
  CHECK(r.signal == 11);
  CHECK_FALSE(r.exit_code.has_value());
  CHECK(cli_exit_code(r) == 128 + 11);
}

TEST_CASE("failures before exec are structured setup errors") {
  auto spec = helper_spec({});
  spec.argv = {"corral-no-such-program"};
  auto r = run(spec).result;
  CHECK(r.status == ExitStatus::setup_error);
  CHECK(r.setup_step == "exec");
  CHECK(r.setup_errno == ENOENT);
  CHECK(cli_exit_code(r) == 127);

  TempDir d;
  std::string plain = d.path() + "/plain";
  std::ofstream(plain) << "not a program\n";
  ::chmod(plain.c_str(), 0644);
  spec.argv = {plain};  // exists, not executable
  r = run(spec).result;
  CHECK(r.status == ExitStatus::setup_error);
  CHECK(r.setup_step == "exec");
  CHECK(r.setup_errno == EACCES);
  CHECK(cli_exit_code(r) == 126);

  spec = helper_spec({"exit", "0"});
  spec.cwd = "/corral-no-such-dir";
  r = run(spec).result;
  CHECK(r.status == ExitStatus::setup_error);
  CHECK(r.setup_step == "chdir");
  CHECK(r.setup_errno == ENOENT);
  CHECK(cli_exit_code(r) == 125);
  CHECK(r.message.find("/corral-no-such-dir") != std::string::npos);
}

TEST_CASE("a program name is searched in the command's own PATH") {
  auto spec = helper_spec({});
  spec.argv = {"corral_test_helper", "exit", "5"};
  spec.env = {{"PATH", "/nonexistent:" + std::filesystem::path(kHelper).parent_path().string()}};
  auto r = run(spec).result;
  CHECK(r.status == ExitStatus::exited);
  CHECK(r.exit_code == 5);
}

TEST_CASE("the environment is exactly the spec's plus the defaults") {
  ::setenv("CORRAL_SUPERVISOR_SECRET", "leak", 1);
  auto spec = helper_spec({"env"});
  spec.env = {{"A", "1"}, {"B", "two words"}};
  spec.temp_dir = "/tmp/corral-scope-test";
  spec.cwd = "/";
  auto r = run(spec).result;
  ::unsetenv("CORRAL_SUPERVISOR_SECRET");
  REQUIRE(r.status == ExitStatus::exited);
  std::set<std::string> lines;
  std::istringstream in(r.out);
  for (std::string l; std::getline(in, l);) lines.insert(l);
  CHECK(lines == std::set<std::string>{"A=1", "B=two words", "PATH=/usr/local/bin:/usr/bin:/bin",
                                        "HOME=/tmp/corral-scope-test", "TMPDIR=/tmp/corral-scope-test"});
  CHECK(r.out.find("CORRAL_SUPERVISOR_SECRET") == std::string::npos);

  spec.env = {{"HOME", "/h"}, {"PATH", "/bin"}, {"TMPDIR", "/t"}};
  r = run(spec).result;
  CHECK(r.out.find("HOME=/h\n") != std::string::npos);
  CHECK(r.out.find("HOME=/tmp") == std::string::npos);
  CHECK(r.out.find("TMPDIR=/t\n") != std::string::npos);
}

TEST_CASE("no fd leaks into the child, and none is left behind in the parent") {
  int leaky = ::open("/dev/null", O_RDONLY);  // deliberately not O_CLOEXEC
  REQUIRE(leaky >= 0);
  auto before = open_fds();
  auto r = run(helper_spec({"fds"})).result;
  CHECK(r.out == "0 1 2\n");
  for (int i = 0; i < 5; ++i) (void)run(helper_spec({"exit", "0"}));
  (void)run(helper_spec({"corral-unknown-action"}));
  auto spec = helper_spec({"exit", "0"});
  spec.cwd = "/nonexistent";
  (void)run(spec);
  CHECK(open_fds() == before);
  ::close(leaky);
}

TEST_CASE("the working directory defaults to the temp dir") {
  TempDir d;
  auto spec = helper_spec({"pwd"});
  spec.temp_dir = d.path();
  CHECK(run(spec).result.out == d.path() + "\n");
  spec.cwd = "/";
  CHECK(run(spec).result.out == "/\n");
}

TEST_CASE("stdin: /dev/null by default, the request's bytes otherwise") {
  auto r = run(helper_spec({"cat"})).result;
  CHECK(r.status == ExitStatus::exited);
  CHECK(r.out.empty());

  auto spec = helper_spec({"cat"});
  spec.stdin_data = pattern(3 << 20);  // larger than any pipe buffer
  spec.max_output = 4 << 20;
  r = run(spec).result;
  CHECK(r.status == ExitStatus::exited);
  CHECK(r.out == *spec.stdin_data);
}

TEST_CASE("deadline: SIGTERM, and timed_out") {
  auto spec = helper_spec({"sleep", "30"});
  spec.timeout = 200ms;
  auto r = run(spec).result;
  CHECK(r.status == ExitStatus::timed_out);
  CHECK(r.timed_out);
  CHECK(r.signal == SIGTERM);
  CHECK_FALSE(r.exit_code.has_value());
  CHECK(r.wall_ms >= 190);
  CHECK(r.wall_ms < 10000);  // generous: catches a hang, not a slow machine
  CHECK(cli_exit_code(r) == 124);
}

TEST_CASE("deadline: a command ignoring SIGTERM is killed after the grace period") {
  auto spec = helper_spec({"ignore-term", "30"});
  spec.timeout = 200ms;
  spec.grace = 300ms;
  auto r = run(spec).result;
  CHECK(r.status == ExitStatus::timed_out);
  CHECK(r.signal == SIGKILL);
  CHECK(r.wall_ms >= 450);
  CHECK(r.wall_ms < 10000);
}

TEST_CASE("output cap: exactly the first cap bytes are kept, then the command dies") {
  auto spec = helper_spec({"write", "100000"});
  spec.max_output = 1234;
  auto ran = run(spec);
  auto& r = ran.result;
  CHECK(r.status == ExitStatus::output_limit);
  CHECK(r.output_truncated);
  CHECK(r.out == pattern(1234));
  CHECK(r.out_bytes == 1234);
  std::string streamed;
  for (auto& [s, d] : ran.chunks) streamed += d;
  CHECK(streamed == r.out);
  CHECK(cli_exit_code(r) == 137);
}

TEST_CASE("output cap: both streams count together, in the order read") {
  auto spec = helper_spec({"write", "200000", "both"});
  spec.max_output = 5000;
  auto ran = run(spec);
  auto& r = ran.result;
  CHECK(r.status == ExitStatus::output_limit);
  CHECK(r.out.size() + r.err.size() == 5000);
  CHECK(r.out_bytes + r.err_bytes == 5000);
  std::string out, err;
  for (auto& [s, d] : ran.chunks) (s == StreamId::out ? out : err) += d;
  CHECK(out == r.out);
  CHECK(err == r.err);
}

TEST_CASE("output cap: output of exactly the cap is not truncated") {
  auto spec = helper_spec({"write", "4096"});
  spec.max_output = 4096;
  auto r = run(spec).result;
  CHECK(r.status == ExitStatus::exited);
  CHECK_FALSE(r.output_truncated);
  CHECK(r.out == pattern(4096));
}

TEST_CASE("a large output streams through intact") {
  auto spec = helper_spec({"write", std::to_string(8 << 20)});
  spec.max_output = 8 << 20;
  auto r = run(spec).result;
  CHECK(r.status == ExitStatus::exited);
  CHECK(r.out.size() == std::size_t(8 << 20));
  CHECK(r.out == pattern(8 << 20));
}

TEST_CASE("stop and terminate: cancelled, the whole group killed") {
  TempDir d;
  std::string pidfile = d.path() + "/pids";
  asio::io_context io;
  Result result;
  auto e = Execution::start(io, helper_spec({"tree", pidfile, "3"}), nullptr, [&](Result r) { result = std::move(r); });
  asio::steady_timer poll(io);
  std::function<void()> check = [&] {
    if (std::filesystem::exists(pidfile)) {
      e.terminate();
      e.terminate();  // idempotent
      return;
    }
    poll.expires_after(10ms);
    poll.async_wait([&](std::error_code) { check(); });
  };
  check();
  io.run();
  CHECK(result.status == ExitStatus::cancelled);
  CHECK(result.signal == SIGKILL);
  auto pids = read_pids(pidfile);
  REQUIRE(pids.size() == 4);
  for (pid_t p : pids) {
    CAPTURE(p);
    CHECK(wait_until([&] { return !running(p); }, 5s));
  }
}

TEST_CASE("stop: SIGTERM, grace, then SIGKILL for a command that ignores SIGTERM") {
  asio::io_context io;
  Result result;
  auto spec = helper_spec({"ignore-term", "30"});
  spec.grace = 200ms;
  auto e = Execution::start(io, spec, nullptr, [&](Result r) { result = std::move(r); });
  asio::steady_timer t(io);
  t.expires_after(200ms);
  t.async_wait([&](std::error_code) { e.stop(); });
  io.run();
  CHECK(result.status == ExitStatus::cancelled);
  CHECK(result.signal == SIGKILL);
  CHECK(result.wall_ms >= 380);
}

TEST_CASE("dropping the handle kills the command and the done handler still runs once") {
  TempDir d;
  std::string pidfile = d.path() + "/pids";
  asio::io_context io;
  int calls = 0;
  Result result;
  {
    auto e = Execution::start(io, helper_spec({"tree", pidfile, "1"}), nullptr, [&](Result r) {
      ++calls;
      result = std::move(r);
    });
    io.run_for(std::chrono::milliseconds(10));
    REQUIRE(wait_until([&] { return std::filesystem::exists(pidfile); }, 10s));
  }
  io.run();
  CHECK(calls == 1);
  CHECK(result.status == ExitStatus::cancelled);
  for (pid_t p : read_pids(pidfile)) CHECK(wait_until([&] { return !running(p); }, 5s));
}

TEST_CASE("what a command leaves running in its group dies when it exits") {
  auto spec = helper_spec({});
  spec.argv.clear();
  spec.shell = "sleep 30 & echo $!";
  auto r = run(spec).result;
  CHECK(r.status == ExitStatus::exited);
  CHECK(r.wall_ms < 10000);
  pid_t bg = std::atoi(r.out.c_str());
  REQUIRE(bg > 0);
  CHECK(wait_until([&] { return !running(bg); }, 5s));
}

TEST_CASE("back-pressure: a paused execution stops reading; resuming drains it") {
  asio::io_context io;
  std::size_t got = 0;
  Result result;
  auto spec = helper_spec({"write", std::to_string(16 << 20)});
  spec.max_output = 16 << 20;
  spec.retain_output = false;
  Execution e;
  e = Execution::start(
      io, spec, [&](StreamId, std::string_view d) { got += d.size(); },
      [&](Result r) { result = std::move(r); });
  e.pause_output();
  io.run_for(500ms);
  // Paused from the start: at most what one read could take before the pause applied.
  CHECK(got <= limits::kReadChunk);
  CHECK_FALSE(e.finished());
  e.resume_output();
  io.run();
  CHECK(result.status == ExitStatus::exited);
  CHECK(got == std::size_t(16 << 20));
  CHECK(result.out.empty());  // not retained
  CHECK(result.out_bytes == std::size_t(16 << 20));
}

TEST_CASE("absurd specs are refused by name") {
  ExecSpec s;
  CHECK(validate(s).message().find("argv is empty") != std::string::npos);
  s.argv = {"x"};
  s.shell = "y";
  CHECK_FALSE(validate(s).ok());
  s.shell.reset();
  s.max_output = 0;
  CHECK(validate(s).message().find("max output") != std::string::npos);
  s.max_output = limits::kMaxOutput + 1;
  CHECK_FALSE(validate(s).ok());
  s.max_output = 10;
  s.timeout = limits::kMaxTimeout + 1ms;
  CHECK(validate(s).message().find("timeout") != std::string::npos);
  s.timeout = 1s;
  s.argv = {std::string("a\0b", 3)};
  CHECK(validate(s).message().find("NUL") != std::string::npos);
  s.argv = {"x"};
  s.env = {{"A=B", "c"}};
  CHECK_FALSE(validate(s).ok());
}

TEST_CASE("spawn() directly: the pidfd reports exit, rusage is filled") {
  SpawnSpec s;
  s.argv = {kHelper, "exit", "3"};
  auto p = spawn(s);
  REQUIRE(p.ok());
  ExitInfo info;
  REQUIRE(p->reap(info, true));
  CHECK(info.exited);
  CHECK(info.exit_code == 3);
  CHECK(info.max_rss_kb > 0);
}

TEST_CASE("a sandboxed launch off the loop: its outcome comes back on the loop; a cancel that came first wins") {
  if (::geteuid() != 0) {
    MESSAGE("skipped: a sandbox host in this process needs root (this test runs as uid " << ::geteuid() << ")");
    return;
  }
  auto host = SandboxHost::create(HostOptions{});
  if (Status st = host->check(Policy{}); !st.ok()) {
    MESSAGE("skipped: this host cannot sandbox: " << st.message());
    return;
  }
  TempDir temp;
  REQUIRE(host->adopt_temp_dir(temp.path()).ok());
  auto sandboxed = [&](std::vector<std::string> args) {
    ExecSpec spec = helper_spec(std::move(args));
    spec.temp_dir = temp.path();
    spec.policy = Policy{};
    spec.host = host.get();
    return spec;
  };

  // Launched on another thread; output, the done handler and the result are on the loop's.
  {
    asio::io_context io;
    const auto loop = std::this_thread::get_id();
    std::vector<std::thread> launchers;
    std::thread::id launched_on, sink_on, done_on, prepared_on;
    ExecSpec spec = sandboxed({"pwd"});
    // The scope's resources (the supervisor's temp dir and network namespace) are filled in on
    // the launch's thread, not the loop's.
    spec.temp_dir.clear();
    spec.before_launch = [&](ExecSpec& s) -> Status {
      prepared_on = std::this_thread::get_id();
      s.temp_dir = temp.path();
      return {};
    };
    spec.offload = [&](std::function<void()> job) {
      launchers.emplace_back([&launched_on, job] {
        launched_on = std::this_thread::get_id();
        job();
      });
    };
    Result result;
    auto e = Execution::start(
        io, std::move(spec), [&](StreamId, std::string_view) { sink_on = std::this_thread::get_id(); },
        [&](Result r) {
          done_on = std::this_thread::get_id();
          result = std::move(r);
        });
    io.run();  // returns only once the command is done: the launch held it open
    for (auto& t : launchers) t.join();
    REQUIRE(launchers.size() == 1);
    CHECK(launched_on != loop);
    CHECK(prepared_on == launched_on);
    CHECK(sink_on == loop);
    CHECK(done_on == loop);
    CHECK(result.status == ExitStatus::exited);
    CHECK(result.out == "/tmp\n");
    CHECK(result.temp_dir == temp.path());
  }

  // A before_launch that fails is the command's setup error: nothing is launched.
  {
    asio::io_context io;
    ExecSpec spec = sandboxed({"pwd"});
    spec.before_launch = [](ExecSpec&) { return Status::error("temp dir", ENOSPC, "no room for the temp dir"); };
    std::thread launcher;
    spec.offload = [&](std::function<void()> job) { launcher = std::thread(std::move(job)); };
    Result result;
    auto e = Execution::start(io, std::move(spec), nullptr, [&](Result r) { result = std::move(r); });
    io.run();
    launcher.join();
    CHECK(result.status == ExitStatus::setup_error);
    CHECK(result.setup_step == "temp dir");
    CHECK(result.message.find("no room") != std::string::npos);
    CHECK(!result.exit_code);
  }

  // A cancel that comes while the launch runs elsewhere: the launched command is killed at
  // once, the result is cancelled, and nothing is left running.
  {
    asio::io_context io;
    const std::string marker = "corral-engine-cancel-" + std::to_string(::getpid());
    std::function<void()> held;
    ExecSpec spec = sandboxed({"sleep", "30", marker});
    spec.offload = [&](std::function<void()> job) { held = std::move(job); };
    Result result;
    bool done = false;
    auto e = Execution::start(io, std::move(spec), nullptr, [&](Result r) {
      result = std::move(r);
      done = true;
    });
    io.poll();  // run(): the launch is handed over, not started
    REQUIRE(held);
    e.terminate();
    const auto t0 = std::chrono::steady_clock::now();
    std::thread launcher(std::move(held));  // it holds the loop open until it is done
    io.run();
    launcher.join();
    CHECK(std::chrono::steady_clock::now() - t0 < 10s);  // killed once launched, not after 30 s
    CHECK(done);
    CHECK(result.status == ExitStatus::cancelled);
    CHECK(processes_with(marker).empty());
  }
}

TEST_CASE("network namespaces from the spares are fresh, distinct and never the host's") {
  if (::geteuid() != 0) {
    MESSAGE("skipped: shared network namespaces need a root supervisor (this test runs as uid " << ::geteuid() << ")");
    return;
  }
  auto host = SandboxHost::create(HostOptions{});
  auto ino = [](int fd) {
    struct stat st {};
    REQUIRE(::fstat(fd, &st) == 0);
    return st.st_ino;
  };
  struct stat own {};
  REQUIRE(::stat("/proc/self/ns/net", &own) == 0);
  host->refill_network_namespaces(2);
  std::set<ino_t> seen{own.st_ino};
  std::vector<UniqueFd> taken;
  for (int i = 0; i < 4; ++i) {  // two spares, then two made on the spot
    auto ns = host->take_network_namespace();
    REQUIRE(ns.ok());
    CHECK(seen.insert(ino(ns->get())).second);  // never handed out twice, never ours
    taken.push_back(std::move(ns).value());
  }
  // The thread that made them is back in its own namespace.
  struct stat after {};
  REQUIRE(::stat("/proc/thread-self/ns/net", &after) == 0);
  CHECK(after.st_ino == own.st_ino);
}

TEST_CASE("the default memory bound's cgroups come from spares made ahead, each used once") {
  if (::geteuid() != 0) {
    MESSAGE("skipped: a sandbox host in this process needs root (this test runs as uid " << ::geteuid() << ")");
    return;
  }
  HostOptions options;
  options.default_memory = 64ull << 20;
  auto host = SandboxHost::create(options);
  if (Status st = host->check(Policy{}); !st.ok()) {
    MESSAGE("skipped: this host cannot sandbox: " << st.message());
    return;
  }
  std::string parent;  // our memory hierarchy's corral-<pid>
  for (const auto& d : host->cgroup_dirs())
    if (std::filesystem::exists(d + "/memory.limit_in_bytes") || std::filesystem::exists(d + "/memory.max")) parent = d;
  if (parent.empty()) {
    MESSAGE("skipped: this host has no memory cgroup for the supervisor");
    return;
  }
  auto groups = [&] {
    std::set<std::string> names;
    for (const auto& e : std::filesystem::directory_iterator(parent))
      if (e.is_directory()) names.insert(e.path().filename().string());
    return names;
  };
  auto limit = [&](const std::string& name) {
    std::string v = read_file(parent + "/" + name + "/memory.limit_in_bytes");
    if (v.empty()) v = read_file(parent + "/" + name + "/memory.max");
    return v.substr(0, v.find('\n'));
  };
  host->refill_default_groups(2);
  REQUIRE(groups() == std::set<std::string>{"spare-1", "spare-2"});
  CHECK(limit("spare-1") == std::to_string(64ull << 20));
  CHECK(limit("spare-2") == std::to_string(64ull << 20));

  TempDir temp;
  REQUIRE(host->adopt_temp_dir(temp.path()).ok());
  asio::io_context io;
  ExecSpec spec = helper_spec({"write", "3"});
  spec.temp_dir = temp.path();
  spec.policy = Policy{};
  spec.host = host.get();
  spec.cgroup_name = "cmd-1";
  spec.hold_for_authorization = true;
  // The group goes, and a spare takes its place (the supervisor runs this on its teardown pool).
  spec.teardown = [](std::function<void()> job) { job(); };
  std::set<std::string> held_in;
  std::string procs;
  std::optional<Execution> e;
  spec.on_prepared = [&] {
    held_in = groups();
    procs = read_file(parent + "/spare-2/cgroup.procs");
    e->authorize(true);
  };
  Result result;
  e.emplace(Execution::start(io, std::move(spec), nullptr, [&](Result r) { result = std::move(r); }));
  io.run();
  CHECK(result.status == ExitStatus::exited);
  CHECK(std::find(result.enforced.begin(), result.enforced.end(), "cgroup-memory") != result.enforced.end());
  // Held before exec, the command's init was in the spare it took; no group was made for it.
  CHECK(held_in == std::set<std::string>{"spare-1", "spare-2"});
  CHECK(!procs.empty());
  // Used once: that spare is gone with the command, and a new one waits.
  CHECK(groups() == std::set<std::string>{"spare-1", "spare-3"});
  CHECK(limit("spare-3") == std::to_string(64ull << 20));

  // A launch that fails after taking a spare (its program is missing) is replaced as well.
  ExecSpec missing;
  missing.argv = {"/corral-no-such-program"};
  missing.temp_dir = temp.path();
  missing.policy = Policy{};
  missing.host = host.get();
  missing.cgroup_name = "cmd-2";
  missing.teardown = [](std::function<void()> job) { job(); };
  Result failed;
  auto f = Execution::start(io, std::move(missing), nullptr, [&](Result r) { failed = std::move(r); });
  io.restart();
  io.run();
  CHECK(failed.status == ExitStatus::setup_error);
  CHECK(groups() == std::set<std::string>{"spare-1", "spare-4"});
}

TEST_CASE("a user-namespace helper child ends with its parent, even one killed before it ends the child") {
  // The parent clones the helper (as SandboxHost does for id maps and idmapped mounts), tells
  // us its pid, and dies without killing it. The helper is reparented to us (a subreaper) and
  // must exit on its own: EOF on its pipe once its parent's write end is gone.
  REQUIRE(::prctl(PR_SET_CHILD_SUBREAPER, 1) == 0);
  int report[2];
  REQUIRE(::pipe2(report, O_CLOEXEC) == 0);
  pid_t parent = ::fork();
  REQUIRE(parent >= 0);
  if (parent == 0) {
    int p[2];
    if (::pipe2(p, O_CLOEXEC) != 0) ::_exit(1);
    corral::detail::WaitArgs args{p[0], p[1], nullptr};
    static char stack[64 * 1024];
    pid_t helper = ::clone(corral::detail::wait_for_parent_in_child, stack + sizeof stack, CLONE_NEWUSER | SIGCHLD, &args);
    if (helper < 0) ::_exit(2);
    if (::write(report[1], &helper, sizeof helper) != sizeof helper) ::_exit(3);
    ::_exit(0);  // killed, as far as the helper can tell: its write end goes with us
  }
  ::close(report[1]);
  pid_t helper = -1;
  REQUIRE(::read(report[0], &helper, sizeof helper) == sizeof helper);
  ::close(report[0]);
  int status = 0;
  REQUIRE(::waitpid(parent, &status, 0) == parent);
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 0);
  bool ended = false;
  for (int i = 0; i < 200 && !ended; ++i) {
    const pid_t r = ::waitpid(helper, &status, WNOHANG);
    if (r == helper) ended = true;
    else std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (!ended) {
    ::kill(helper, SIGKILL);
    ::waitpid(helper, &status, 0);
  }
  ::prctl(PR_SET_CHILD_SUBREAPER, 0);
  CHECK_MESSAGE(ended, "the helper outlived its parent");
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == EPIPE);
}
