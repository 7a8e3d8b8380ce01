// The supervisor under a hostile or merely busy client: lifetimes (what outlives a
// connection, what a shutdown destroys in which order), connection limits and quotas, and
// what happens when the supervisor itself dies. Driven through the real binary.
#include <doctest/doctest.h>

#include <grp.h>
#include <sys/socket.h>

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
    proto::Received r;
    REQUIRE(c->call(1, proto::make_exec(1, a), r));
    REQUIRE(r.msg->body_as_BackgroundStarted());
  }
  // Every one of them is gone; the supervisor must count only open sockets.
  auto c = s.connect();
  REQUIRE(c);
  proto::Received r;
  REQUIRE(c->call(1, proto::make_status_request(1), r));
  REQUIRE(r.msg->body_as_StatusReply());
  CHECK(r.msg->body_as_StatusReply()->connections() == 1);
  // ... and the CLI that ends them is served.
  CHECK(processes_with(marker).size() == 256);
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
  const std::string file = kCorral;  // any readable file of more than 15 MiB
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
    REQUIRE(c->receive(r, 30000));
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
  proto::Received r;
  REQUIRE(c->call(1, proto::make_worker_start(1, w), r));
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
    REQUIRE(c->receive(r, 30000));
    CHECK(r.msg->request_id() == id);
    REQUIRE(r.msg->body_as_WorkerEvalResult());
    CHECK(r.msg->body_as_WorkerEvalResult()->reply()->size() == 15728640u);
  }
}

TEST_CASE("a connection that never says hello is closed at the hello deadline") {
  Server s({"--hello-timeout", "500ms"});
  std::string err;
  auto silent = proto::Client::connect_raw(s.socket(), err);
  REQUIRE(silent);
  auto polite = s.connect();
  REQUIRE(polite);
  proto::Received r;
  REQUIRE(silent->receive(r, 10000));
  REQUIRE(r.msg->body_as_Error());
  CHECK(r.msg->body_as_Error()->code() == ErrorCode::hello_required);
  CHECK(proto::str(r.msg->body_as_Error()->message()).find("no hello within 500ms") != std::string::npos);
  CHECK_FALSE(silent->receive(r, 10000));  // closed
  // A client that said hello is not affected.
  REQUIRE(polite->call(1, proto::make_status_request(1), r));
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
  std::string err;
  for (int i = 0; i < 3; ++i) {
    held.push_back(proto::Client::connect_raw(s.socket(), err));  // idle, no hello
    REQUIRE(held.back());
  }
  auto fourth = proto::Client::connect(s.socket(), err);
  CHECK(fourth == nullptr);
  CHECK(err.find("--max-connections-per-uid") != std::string::npos);
  pid_t child = ::fork();
  if (child == 0) {
    if (::setgroups(0, nullptr) != 0 || ::setgid(65534) != 0 || ::setuid(65534) != 0) ::_exit(10);
    std::string e;
    auto c = proto::Client::connect(s.socket(), e);
    ::_exit(c ? 0 : 1);
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  CHECK(exited_zero(status));
  // A held connection that goes away gives its slot back at once.
  held.pop_back();
  CHECK(wait_until([&] { return proto::Client::connect(s.socket(), err) != nullptr; }, 5s));
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
    std::vector<std::string> argv = {kCorral, "serve", "--socket", sock, "--temp-root", d.path()};
    std::vector<char*> args;
    for (auto& a : argv) args.push_back(a.data());
    args.push_back(nullptr);
    ::execv(args[0], args.data());
    return 91;
  });
  REQUIRE(wait_until([&] { std::string e; return proto::Client::connect_raw(sock, e) != nullptr; }, 20s));
  // One launch in ten used to fail with "open /proc/PID/setgroups: Permission denied".
  pid_t client = as_nobody([&] {
    std::string err;
    auto c = proto::Client::connect(sock, err);
    if (!c) return 100;
    int failed = 0;
    for (std::uint64_t id = 1; id <= 60; ++id) {
      proto::ExecArgs a;
      a.argv = {"true"};
      proto::ExecReply r;
      if (!c->exec(id, a, nullptr, r) || !r.result() || r.result()->status() != proto::ExitStatus::exited) ++failed;
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
