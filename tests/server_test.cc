// The supervisor under a hostile or merely busy client: lifetimes (what outlives a
// connection, what a shutdown destroys in which order), connection limits and quotas, and
// what happens when the supervisor itself dies. Driven through the real binary.
#include <doctest/doctest.h>

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
