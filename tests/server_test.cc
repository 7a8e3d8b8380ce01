// The supervisor under a hostile or merely busy client: lifetimes (what outlives a
// connection, what a shutdown destroys in which order), connection limits and quotas, and
// what happens when the supervisor itself dies. Driven through the real binary.
#include <doctest/doctest.h>

#include <grp.h>
#include <fstream>
#include <map>
#include <sys/socket.h>

#include "runtime/fd_passing.h"
#include "supervisor/peer.h"
#include "tests/test_util.h"
#include "worker_proto/messages.h"

using namespace corral;
using namespace corral::test;
using namespace std::chrono_literals;
using proto::Body;
using proto::ErrorCode;

namespace {

bool exited_zero(int status) { return status >= 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0; }

}  // namespace

TEST_CASE("SIGTERM with background records left: a clean exit 0") {
  // Freed memory is scribbled over, so that a use after free at shutdown shows without ASan.
  Server s({}, {"GLIBC_TUNABLES=glibc.malloc.perturb=165"});
  const std::string marker = "corral-bg-shutdown-" + std::to_string(::getpid());
  // One record still running, one that ended but was never polled.
  auto running = cli({"exec", "--background", "--", kHelper, "sleep", "100", marker}, s.socket());
  REQUIRE(running.exit_code == 0);
  auto ended = cli({"exec", "--background", "--", "true"}, s.socket());
  REQUIRE(ended.exit_code == 0);
  REQUIRE(wait_until([&] { return processes_with(marker).size() == 1; }, 10s));
  std::this_thread::sleep_for(200ms);  // `true` has ended; its record waits for a poll
  const int status = s.stop();
  CAPTURE(s.log());
  CHECK(exited_zero(status));
  CHECK(s.log().find("stopped; socket removed") != std::string::npos);
  CHECK(wait_until([&] { return processes_with(marker).empty(); }, 5s));
}

TEST_CASE("background commands of exited clients hold no connection: 256 of them lock nobody out") {
  Server s;
  const std::string marker = "corral-bg-lockout-" + std::to_string(::getpid());
  // 256 clients (the default --max-connections) each leave a background command and exit.
  for (int i = 0; i < 256; ++i) {
    auto c = s.connect();
    REQUIRE(c);
    proto::ExecArgs a;
    a.argv = {kHelper, "sleep", "300", marker};
    a.background = true;
    proto::Received r = must(c->call(1, proto::make_exec(1, a)));
    REQUIRE(r.msg->body_as_BackgroundStarted());
  }
  // Every one of them is gone; the supervisor must count only open sockets.
  auto c = s.connect();
  REQUIRE(c);
  proto::Received r = must(c->call(1, proto::make_status_request(1)));
  REQUIRE(r.msg->body_as_StatusReply());
  CHECK(r.msg->body_as_StatusReply()->connections() == 1);
  // ... and the CLI that ends them is served (launches run off the loop: wait for all 256).
  CHECK(wait_until([&] { return processes_with(marker).size() == 256; }, 60s));
  auto closed = cli({"scope", "close", "default-" + std::to_string(::geteuid())}, s.socket());
  CAPTURE(closed.err);
  CHECK(closed.exit_code == 0);
  CHECK(wait_until([&] { return processes_with(marker).empty(); }, 30s));
}

namespace {

std::uint64_t rss_kb(pid_t pid) {
  std::istringstream in(read_file("/proc/" + std::to_string(pid) + "/status"));
  for (std::string line; std::getline(in, line);)
    if (line.rfind("VmRSS:", 0) == 0) return std::stoull(line.substr(6));
  return 0;
}

const std::string kEcho = CORRAL_ECHO_WORKER;

}  // namespace

TEST_CASE("a client that sends requests and reads no reply stops being read: forty 15 MiB reads") {
  Server s;
  // A sparse 16 MiB file beside the programs sandboxed tests run: outside /tmp, which the file
  // tools, like a command, see as the scope's temp dir (a build tree under /tmp is hidden).
  const std::string file = std::filesystem::path(kHelper).parent_path().string() + "/server-test-16m-" +
                           std::to_string(::getpid());
  {
    std::ofstream(file).close();
    std::filesystem::resize_file(file, 16u << 20);
  }
  struct Remove {
    std::string path;
    ~Remove() { std::remove(path.c_str()); }
  } remove_file{file};
  REQUIRE(std::filesystem::file_size(file) > (15u << 20));
  auto c = s.connect();
  REQUIRE(c);
  const std::uint64_t before = rss_kb(s.pid());
  for (std::uint64_t id = 1; id <= 40; ++id) {
    proto::FileArgs a;
    a.path = file;
    a.workspaces = {std::filesystem::path(file).parent_path().string()};
    a.mode = proto::Mode::read_only;
    a.binary = true;
    a.max_bytes = 15u << 20;
    REQUIRE(c->send(proto::make_read(id, a)));
  }
  std::this_thread::sleep_for(2s);
  // 600 MiB of replies asked for; one reply past the 4 MiB queue bound is all that may wait.
  CHECK(rss_kb(s.pid()) < before + 100 * 1024);
  // Reading them lets every request through, in order and whole.
  proto::Received r;
  for (std::uint64_t id = 1; id <= 40; ++id) {
    r = must(c->receive(30000));
    CHECK(r.msg->request_id() == id);
    if (auto* e = r.msg->body_as_Error()) FAIL(proto::str(e->message()));
    REQUIRE(r.msg->body_as_ReadResult());
    CHECK(r.msg->body_as_ReadResult()->data()->size() == (15u << 20));
  }
}

TEST_CASE("a reply is reserved when its request is admitted: evaluations whose replies nobody reads") {
  Server s;
  auto c = s.connect();
  REQUIRE(c);
  proto::WorkerStartArgs w;
  w.name = "big";
  w.argv = {kEcho};
  proto::Received r = must(c->call(1, proto::make_worker_start(1, w)));
  REQUIRE(r.msg->body_as_WorkerStarted());
  const std::uint64_t before = rss_kb(s.pid());
  // 24 evaluations, each answered later with 15 MiB (360 MiB in all), none of them read yet.
  for (std::uint64_t id = 2; id < 26; ++id) {
    proto::WorkerEvalArgs e;
    e.name = "big";
    e.request = "big:15728640";
    REQUIRE(c->send(proto::make_worker_eval(id, e)));
  }
  std::this_thread::sleep_for(3s);
  CHECK(rss_kb(s.pid()) < before + 100 * 1024);
  for (std::uint64_t id = 2; id < 26; ++id) {
    r = must(c->receive(30000));
    CHECK(r.msg->request_id() == id);
    REQUIRE(r.msg->body_as_WorkerEvalResult());
    CHECK(r.msg->body_as_WorkerEvalResult()->reply()->size() == 15728640u);
  }
}

TEST_CASE("a connection whose requests wait for reply room still sees its cancels and its client going away") {
  Server s;
  const std::string marker = "corral-held-" + std::to_string(::getpid());
  auto c = s.connect();
  REQUIRE(c);
  // Each foreground command reserves 1 MiB of the 4 MiB queue: four run, the rest wait unread.
  proto::ExecArgs a;
  a.argv = {kHelper, "sleep", "60", marker};
  for (std::uint64_t id = 1; id <= 7; ++id) REQUIRE(c->send(proto::make_exec(id, a)));
  REQUIRE(wait_until([&] { return processes_with(marker).size() == 4; }, 20s));
  // A cancel for a waiting request: it never starts. One for a running command: it ends.
  REQUIRE(c->send(proto::make_cancel(6, true)));
  REQUIRE(c->send(proto::make_cancel(1, true)));
  std::map<std::uint64_t, std::string> got;
  while (got.size() < 2) {
    proto::Received r = must(c->receive(20000));
    const std::uint64_t id = r.msg->request_id();
    if (const auto* e = r.msg->body_as_Error()) got[id] = "error " + std::string(proto::EnumNameErrorCode(e->code()));
    else if (r.msg->body_as_ExecResult()) got[id] = "result";
  }
  CHECK(got[6] == "error cancelled");
  CHECK(got[1] == "result");
  // Request 5 took 1's place; 6 never ran.
  REQUIRE(wait_until([&] { return processes_with(marker).size() == 4; }, 20s));
  // The client goes away with requests still waiting: everything it started ends, now.
  c.reset();
  CHECK(wait_until([&] { return processes_with(marker).empty(); }, 10s));
  auto status = s.connect();
  REQUIRE(status);
  proto::Received st = must(status->call(100, proto::make_status_request(100)));
  REQUIRE(st.msg->body_as_StatusReply());
  CHECK(st.msg->body_as_StatusReply()->connections() == 1);
}

namespace {

std::uint32_t running_commands(Server& s) {
  auto c = s.connect();
  REQUIRE(c);
  proto::Received st = must(c->call(1, proto::make_status_request(1)));
  REQUIRE(st.msg->body_as_StatusReply());
  return st.msg->body_as_StatusReply()->running_commands();
}

}  // namespace

TEST_CASE("a command whose output nobody reads ends with its client: paused after it exited, nothing is kept") {
  Server s;
  const std::string marker = "corral-unread-" + std::to_string(::getpid());
  auto scope_dirs = [&] {  // the connections' scope temp dirs under the supervisor's temp root
    std::size_t n = 0;
    for (const auto& root : std::filesystem::directory_iterator(s.dir()))
      if (root.is_directory() && root.path().filename().string().rfind("corral-", 0) == 0)
        for (const auto& e : std::filesystem::directory_iterator(root.path()))
          n += e.path().filename().string().rfind("corral-scope-", 0) == 0;
    return n;
  };
  // 20 MiB: blocked on its full pipe when its client goes. 4.5 MiB: the queue (4 MiB) and its
  // pipe hold all of it, so it has exited, paused, when its client goes.
  for (long bytes : {20l << 20, (9l << 20) / 2, 20l << 20, (9l << 20) / 2}) {
    CAPTURE(bytes);
    auto c = s.connect();
    REQUIRE(c);
    proto::ExecArgs a;
    a.argv = {kHelper, "write", std::to_string(bytes), "out", marker};
    a.max_output_bytes = 64u << 20;
    REQUIRE(c->send(proto::make_exec(1, a)));
    REQUIRE(wait_until([&] { return !processes_with(marker).empty(); }, 20s));
    CHECK(scope_dirs() > 0);  // what is counted below exists while it runs
    if (bytes < (5l << 20)) REQUIRE(wait_until([&] { return processes_with(marker).empty(); }, 20s));
    else std::this_thread::sleep_for(1s);
    c.reset();  // never read a byte
  }
  // Each ends with its connection: counted out, and its scope's temp dir (a tmpfs) gone.
  CHECK(wait_until([&] { return running_commands(s) == 0; }, 10s));
  CHECK(wait_until([&] { return scope_dirs() == 0; }, 10s));
}

TEST_CASE("a paused connection's answered frames (unknown cancels, malformed frames) are bounded too") {
  Server s;
  auto c = s.connect();
  REQUIRE(c);
  proto::ExecArgs a;
  a.argv = {kHelper, "sleep", "60", "corral-paused-flood"};
  for (std::uint64_t id = 1; id <= 5; ++id) REQUIRE(c->send(proto::make_exec(id, a)));  // 5 MiB reserved: paused
  std::this_thread::sleep_for(500ms);
  const std::uint64_t before = rss_kb(s.pid());
  // Cancels for ids nobody started, as fast as the socket takes them, for three seconds; the
  // client reads nothing. Each would queue an answer: the supervisor must stop reading.
  std::size_t sent = 0;
  const auto end = std::chrono::steady_clock::now() + 3s;
  std::vector<std::uint8_t> batch;
  for (std::uint64_t id = 1000; batch.size() < (256u << 10); ++id) {
    proto::Frame f = proto::make_cancel(id, true);
    batch.insert(batch.end(), f.begin(), f.end());
  }
  while (std::chrono::steady_clock::now() < end) {
    const ssize_t n = ::send(c->fd(), batch.data(), batch.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n > 0) sent += static_cast<std::size_t>(n);
    else std::this_thread::sleep_for(10ms);
  }
  CAPTURE(sent);
  CHECK(sent < (64u << 20));  // it stopped taking them
  CHECK(rss_kb(s.pid()) < before + 48 * 1024);
  c.reset();
  CHECK(wait_until([&] { return processes_with("corral-paused-flood").empty(); }, 10s));
}

TEST_CASE("a root supervisor's event loop runs at a higher priority than its pools and sandboxes") {
  if (::geteuid() != 0) {
    MESSAGE("skipped: raising a thread's priority needs CAP_SYS_NICE (this test runs as uid " << ::geteuid() << ")");
    return;
  }
  Server s;
  auto c = must(proto::Client::connect(s.socket()));
  proto::ExecArgs a;
  const std::string marker = "corral-nice-test-" + std::to_string(::getpid());
  a.argv = {kHelper, "sleep", "30", marker};
  REQUIRE(c->send(proto::make_exec(1, a)));
  REQUIRE(wait_until([&] { return !processes_with(marker).empty(); }, 10s));
  // Field 19 of /proc/PID/task/TID/stat is the nice value; the loop is the main thread.
  auto nice_of = [](const std::string& stat_path) {
    std::string stat = read_file(stat_path);
    std::istringstream fields(stat.substr(stat.rfind(')') + 2));
    std::string f;
    for (int i = 3; i <= 19; ++i) fields >> f;
    return std::stoi(f);
  };
  const std::string task = "/proc/" + std::to_string(s.pid()) + "/task/";
  CHECK(nice_of(task + std::to_string(s.pid()) + "/stat") == -5);
  int other_threads = 0;
  for (const auto& t : std::filesystem::directory_iterator(task)) {
    if (t.path().filename() == std::to_string(s.pid())) continue;
    ++other_threads;
    CHECK(nice_of(t.path().string() + "/stat") >= 0);  // pools: 0, the teardown pool 10
  }
  CHECK(other_threads > 0);
  for (pid_t sandboxed : processes_with(marker)) CHECK(nice_of("/proc/" + std::to_string(sandboxed) + "/stat") == 0);
  REQUIRE(c->send(proto::make_cancel(1, true)));
}

TEST_CASE("a frame's header alone commits nothing: forty connections that claim 16 MiB and stall") {
  Server s;
  auto probe = s.connect();
  REQUIRE(probe);
  const std::uint64_t before = rss_kb(s.pid());
  std::vector<std::unique_ptr<proto::Client>> stalled;
  for (int i = 0; i < 40; ++i) {
    auto c = s.connect();
    REQUIRE(c);
    // A header (little-endian length) just under the 16 MiB frame bound, and one byte of payload.
    const std::uint32_t length = (16u << 20) - 8;
    const std::uint8_t bytes[5] = {static_cast<std::uint8_t>(length), static_cast<std::uint8_t>(length >> 8),
                                   static_cast<std::uint8_t>(length >> 16), static_cast<std::uint8_t>(length >> 24), 1};
    REQUIRE(::write(c->fd(), bytes, sizeof bytes) == static_cast<ssize_t>(sizeof bytes));
    stalled.push_back(std::move(c));
  }
  std::this_thread::sleep_for(1s);
  // 640 MiB claimed; a buffer grows only with what arrives (about 64 KiB each here).
  CHECK(rss_kb(s.pid()) < before + 32 * 1024);
  proto::Received r = must(probe->call(1, proto::make_status_request(1)));
  CHECK(r.msg->body_as_StatusReply());
}

TEST_CASE("a connection that never says hello is closed at the hello deadline") {
  Server s({"--hello-timeout", "500ms"});
  auto silent = must(proto::Client::connect_raw(s.socket()));
  auto polite = s.connect();
  REQUIRE(polite);
  proto::Received r = must(silent->receive(10000));
  REQUIRE(r.msg->body_as_Error());
  CHECK(r.msg->body_as_Error()->code() == ErrorCode::hello_required);
  CHECK(proto::str(r.msg->body_as_Error()->message()).find("no hello within 500ms") != std::string::npos);
  auto after = silent->receive(10000);
  REQUIRE_FALSE(after);
  CHECK(after.error().kind == proto::Failure::Kind::closed);
  // A client that said hello is not affected.
  r = must(polite->call(1, proto::make_status_request(1)));
  CHECK(r.msg->body_as_StatusReply());
}

TEST_CASE("one uid's connections are capped below the total: the others still get in") {
  if (::geteuid() != 0) {
    MESSAGE("skipped: connecting as another uid needs root (this test runs as uid " << ::geteuid() << ")");
    return;
  }
  Server s({"--max-connections-per-uid", "3", "--allow-uid", "65534"});
  ::chmod(s.dir().c_str(), 0711);
  std::vector<std::unique_ptr<proto::Client>> held;
  for (int i = 0; i < 3; ++i) held.push_back(must(proto::Client::connect_raw(s.socket())));  // idle, no hello
  auto fourth = proto::Client::connect(s.socket());
  REQUIRE_FALSE(fourth);
  CHECK(fourth.error().message.find("--max-connections-per-uid") != std::string::npos);
  pid_t child = ::fork();
  if (child == 0) {
    if (::setgroups(0, nullptr) != 0 || ::setgid(65534) != 0 || ::setuid(65534) != 0) ::_exit(10);
    ::_exit(proto::Client::connect(s.socket()) ? 0 : 1);
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  CHECK(exited_zero(status));
  // A held connection that goes away gives its slot back at once.
  held.pop_back();
  CHECK(wait_until([&] { return proto::Client::connect(s.socket()).ok(); }, 5s));
}

TEST_CASE("a connect flood is logged at most ten lines a second, and the rest are counted") {
  Server s({"--max-connections-per-uid", "2"});
  std::vector<std::unique_ptr<proto::Client>> held;
  for (int i = 0; i < 2; ++i) held.push_back(s.connect());  // past the hello deadline too
  REQUIRE(held.back());
  auto count = [&](const std::string& what) {
    const std::string log = s.log();
    std::size_t n = 0;
    for (auto at = log.find(what); at != std::string::npos; at = log.find(what, at + 1)) ++n;
    return n;
  };
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 300; ++i) CHECK_FALSE(proto::Client::connect(s.socket()));
  const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - start).count();
  // The count is logged when its second ends, with no later refusal to carry it.
  CHECK(wait_until([&] { return count("more connections (not logged one by one") >= 1; }, 5s));
  CAPTURE(seconds);
  CHECK(count("refused a connection from uid") <= 10 * static_cast<std::size_t>(seconds + 2));
  CHECK(count("refused a connection from uid") >= 10);
}

TEST_CASE("a non-root supervisor launches every command (init turns non-dumpable only after its id maps)") {
  if (::geteuid() != 0) {
    MESSAGE("skipped: starting a supervisor as another uid needs root (this test runs as uid " << ::geteuid() << ")");
    return;
  }
  TempDir d;
  ::chmod(d.path().c_str(), 0777);
  const std::string sock = d.path() + "/nobody/corral.sock";
  auto as_nobody = [&](const std::function<int()>& body) {
    pid_t pid = ::fork();
    if (pid == 0) {
      if (::setgroups(0, nullptr) != 0 || ::setgid(65534) != 0 || ::setuid(65534) != 0) ::_exit(90);
      ::_exit(body());
    }
    return pid;
  };
  pid_t server = as_nobody([&] {
    int e = ::open((d.path() + "/serve.log").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0666);
    ::dup2(e, 2);
    // No /etc/subgid range for nobody: accept that groups are kept (escape_test 26 covers it).
    std::vector<std::string> argv = {kCorral, "serve", "--socket", sock, "--temp-root", d.path(),
                                     "--allow-supplementary-groups"};
    std::vector<char*> args;
    for (auto& a : argv) args.push_back(a.data());
    args.push_back(nullptr);
    ::execv(args[0], args.data());
    return 91;
  });
  REQUIRE(wait_until([&] { return proto::Client::connect_raw(sock).ok(); }, 20s));
  // One launch in ten used to fail with "open /proc/PID/setgroups: Permission denied".
  pid_t client = as_nobody([&] {
    auto c = proto::Client::connect(sock);
    if (!c) return 100;
    int failed = 0;
    for (std::uint64_t id = 1; id <= 60; ++id) {
      proto::ExecArgs a;
      a.argv = {"true"};
      auto r = (*c)->exec(id, a, nullptr);
      if (!r || !r->result() || r->result()->status() != proto::ExitStatus::exited) ++failed;
    }
    return failed;
  });
  const int status = wait_process(client, 120s);
  CAPTURE(read_file(d.path() + "/serve.log"));
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);  // the number of launches that failed
  ::kill(server, SIGTERM);
  CHECK(exited_zero(wait_process(server)));
}

namespace {

// Directories named `name` anywhere under /sys/fs/cgroup (a few hundred directories here).
std::vector<std::string> cgroup_dirs_named(const std::string& name) {
  std::vector<std::string> found;
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(
           "/sys/fs/cgroup", std::filesystem::directory_options::skip_permission_denied, ec);
       it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    if (ec) break;
    if (it->path().filename() == name) found.push_back(it->path().string());
    if (it.depth() > 8) it.disable_recursion_pending();
  }
  return found;
}

std::vector<std::string> entries_starting(const std::string& dir, const std::string& prefix) {
  std::vector<std::string> found;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec))
    if (e.path().filename().string().rfind(prefix, 0) == 0) found.push_back(e.path().string());
  return found;
}

}  // namespace

TEST_CASE("kill -9 of a root supervisor ends every sandbox within a second; the next supervisor cleans up") {
  if (::geteuid() != 0) {
    MESSAGE("skipped: a root supervisor needs root (this test runs as uid " << ::geteuid() << ")");
    return;
  }
  TempDir d;
  const std::string sock = d.path() + "/run/corral.sock";
  pid_t first = spawn_process({kCorral, "serve", "--socket", sock, "--temp-root", d.path()}, "", d.path() + "/first.log");
  REQUIRE(wait_until([&] { return proto::Client::connect_raw(sock).ok(); }, 20s));
  const std::string marker = "corral-orphan-" + std::to_string(::getpid());
  // A foreground command of a client that is still connected, one with a cgroup (a cap), a
  // background command and a worker: whatever runs as the sandbox uid.
  auto c = must(proto::Client::connect(sock));
  proto::ExecArgs fg;
  fg.argv = {kHelper, "sleep", "300", marker};
  REQUIRE(c->send(proto::make_exec(1, fg)));
  proto::ExecArgs capped = fg;
  capped.memory_bytes = 256u << 20;
  REQUIRE(c->send(proto::make_exec(2, capped)));
  REQUIRE(cli({"exec", "--background", "--", kHelper, "sleep", "300", marker}, sock).exit_code == 0);
  REQUIRE(cli({"worker", "start", "w", "--", kEcho}, sock).exit_code == 0);
  REQUIRE(wait_until([&] { return processes_with(marker).size() == 3 && !processes_with(kEcho).empty(); }, 20s));
  const auto temps = entries_starting(d.path(), "corral-" + std::to_string(first) + "-");
  REQUIRE(temps.size() == 1);
  const auto groups = cgroup_dirs_named("corral-" + std::to_string(first));
  const auto caps = read_file(d.path() + "/first.log");
  CAPTURE(caps);

  ::kill(first, SIGKILL);
  wait_process(first);
  const auto killed = std::chrono::steady_clock::now();
  CHECK(wait_until([&] { return processes_with(marker).empty() && processes_with(kEcho).empty(); }, 10s));
  const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - killed);
  MESSAGE("every sandbox ended " << took.count() << " ms after the supervisor died");
  CHECK(took < 1s);
  // What it left: its temp dir, its cgroups (when this host has them) and its socket.
  CHECK(std::filesystem::exists(temps[0]));

  // The next supervisor finds them by its record, and removes them.
  pid_t second = spawn_process({kCorral, "serve", "--socket", sock, "--temp-root", d.path()}, "", d.path() + "/second.log");
  REQUIRE(wait_until([&] { return proto::Client::connect_raw(sock).ok(); }, 20s));
  const std::string log = read_file(d.path() + "/second.log");
  CAPTURE(log);
  CHECK_FALSE(std::filesystem::exists(temps[0]));
  CHECK(log.find("crash cleanup: removed temp dir " + temps[0]) != std::string::npos);
  for (const auto& g : groups) {
    CHECK_FALSE(std::filesystem::exists(g));
    CHECK(log.find("crash cleanup: removed cgroup " + g) != std::string::npos);
  }
  CHECK(cli({"exec", "--", "true"}, sock).exit_code == 0);
  ::kill(second, SIGTERM);
  CHECK(exited_zero(wait_process(second)));
  // A clean exit leaves nothing either.
  CHECK(entries_starting(d.path(), "corral-").empty());
  CHECK(cgroup_dirs_named("corral-" + std::to_string(second)).empty());
}

TEST_CASE("a supervisor killed while it starts (probing its host) leaves nothing behind its record") {
  if (::geteuid() != 0) {
    MESSAGE("skipped: cgroups need a root supervisor (this test runs as uid " << ::geteuid() << ")");
    return;
  }
  TempDir d;
  // Its socket listens before it probes: killing it as soon as it listens lands in the probes.
  std::vector<pid_t> killed;
  for (int i = 0; i < 8; ++i) {
    const std::string sock = d.path() + "/s" + std::to_string(i) + "/corral.sock";
    pid_t pid = spawn_process({kCorral, "serve", "--socket", sock, "--temp-root", d.path()}, "", d.path() + "/log" + std::to_string(i));
    REQUIRE(wait_until([&] { return std::filesystem::exists(sock) || !running(pid); }, 20s));
    std::this_thread::sleep_for(std::chrono::milliseconds(i * 5));
    ::kill(pid, SIGKILL);
    wait_process(pid);
    killed.push_back(pid);
  }
  // The next supervisor removes what their records list; nothing of theirs runs on.
  Server next;  // the records are per host (/run/corral/instances): any next supervisor cleans
  REQUIRE(running(next.pid()));
  for (pid_t pid : killed) {
    CAPTURE(pid);
    CHECK(cgroup_dirs_named("corral-" + std::to_string(pid)).empty());
    CHECK(entries_starting(d.path(), "corral-" + std::to_string(pid) + "-").empty());
  }
  CHECK(wait_until([&] { return processes_with(d.path() + "/s").empty(); }, 5s));
}

TEST_CASE("a live supervisor's leftovers are never taken for a dead one's") {
  Server live;
  TempDir d;
  const auto before = entries_starting(live.dir(), "corral-" + std::to_string(live.pid()) + "-");
  REQUIRE(before.size() == 1);
  // Another supervisor starting meanwhile cleans only what dead ones left.
  Server next;
  CHECK(std::filesystem::exists(before[0]));
  CHECK(cli({"exec", "--", "true"}, live.socket()).exit_code == 0);
  CHECK(next.log().find(before[0]) == std::string::npos);
}

// The harness itself (tests/test_util.h): each of these must fail.
TEST_CASE("harness: a test whose supervisor crashes fails" * doctest::should_fail()) {
  Server s;
  ::kill(s.pid(), SIGSEGV);
  std::this_thread::sleep_for(200ms);
}

TEST_CASE("harness: a test whose supervisor exits non-zero fails" * doctest::should_fail()) {
  Server s({"--max-in-flight", "0"});  // refused: exit 2
}

TEST_CASE("harness: a test whose supervisor reports a sanitizer error fails" * doctest::should_fail()) {
  Server s;
  // The audit line quotes the command: the supervisor's log then holds what a report holds.
  cli({"exec", "--", "echo", "ERROR: AddressSanitizer: heap-use-after-free"}, s.socket());
}

namespace {
// One byte with `fd` attached (SCM_RIGHTS): 0 or the errno.
int send_with_fd(int sock, int fd) { return fd_passing::send_fds(sock, 0, &fd, 1); }
}  // namespace

TEST_CASE("clients and workers cannot hand the supervisor descriptors, before or after accept") {
  // A descriptor that arrived would be closed by the supervisor's read, and a file's last close
  // can block (a TCP socket with SO_LINGER): the kernel refuses them at the sender instead.
  int probe[2];
  REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, probe) == 0);
  UniqueFd a(probe[0]), b(probe[1]);
  if (const int err = supervisor::refuse_descriptors(a.get()); err == ENOPROTOOPT) {
    MESSAGE("skipped: this kernel has no SO_PASSRIGHTS (Linux 6.16)");
    return;
  } else {
    REQUIRE(err == 0);
  }
  // The helper a worker's channel uses: the worker's end can no longer send one.
  CHECK(send_with_fd(b.get(), 0) == EPERM);
  CHECK(send_with_fd(a.get(), 0) == 0);  // the other way is untouched

  Server s;
  for (const bool hello_first : {false, true}) {
    CAPTURE(hello_first);
    auto c = must(proto::Client::connect_raw(s.socket()));
    if (hello_first) REQUIRE(c->send(proto::make_hello("fd-sender")));
    CHECK(send_with_fd(c->fd(), 0) == EPERM);
  }
  // The supervisor serves on.
  auto ok = s.connect();
  REQUIRE(ok);
  REQUIRE(ok->send(proto::make_status_request(1)));
  CHECK(must(ok->receive(5000)).msg->body_as_StatusReply());
}
