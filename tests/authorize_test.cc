// execute_authorized: prepared up to exec, run only on a grant, at most once.
#include <doctest/doctest.h>

#include <signal.h>

#include <filesystem>
#include <map>
#include <sstream>

#include "tests/test_util.h"
#include "worker_proto/messages.h"

using namespace corral;
using namespace corral::test;
using namespace std::chrono_literals;
using proto::Body;

namespace {

std::string count_lines(const std::string& path) {
  std::string s = read_file(path);
  return std::to_string(std::count(s.begin(), s.end(), '\n'));
}

proto::ExecArgs marker_args(const TempDir& d, const std::string& marker) {
  proto::ExecArgs a;
  a.shell = "echo ran >> " + marker;
  a.workspaces = {d.path()};
  a.authorize = true;
  return a;
}

}  // namespace

TEST_CASE("granted: runs exactly once; denied: nothing ran, exit 77") {
  Server s;
  TempDir d;
  const std::string marker = d.path() + "/marker";
  auto granted = cli({"exec", "--workspace", d.path(), "--authorize-cmd", "cat > " + d.path() + "/description",
                      "--json", "--sh", "echo ran >> " + marker},
                     s.socket());
  CHECK(granted.exit_code == 0);
  CHECK(granted.out.find("\"launched\":true") != std::string::npos);
  CHECK(count_lines(marker) == "1");
  const std::string description = read_file(d.path() + "/description");
  CHECK(description.find("\"sh\":\"echo ran >> " + marker + "\"") != std::string::npos);
  CHECK(description.find("\"mode\":\"workspace-write\"") != std::string::npos);
  CHECK(description.find("\"network\":\"denied\"") != std::string::npos);
  CHECK(description.find("\"workspaces\":[\"" + d.path() + "\"]") != std::string::npos);

  auto denied = cli({"exec", "--workspace", d.path(), "--authorize-cmd", "exit 1", "--sh", "echo ran >> " + marker}, s.socket());
  CHECK(denied.exit_code == 77);
  CHECK(denied.err.find("not launched") != std::string::npos);
  CHECK(count_lines(marker) == "1");
}

TEST_CASE("a grant launches at most once; a late answer is refused") {
  Server s;
  TempDir d;
  const std::string marker = d.path() + "/marker";
  auto c = s.connect();
  REQUIRE(c);
  REQUIRE(c->send(proto::make_exec(5, marker_args(d, marker))));
  proto::Received r = must(c->receive(10000));
  REQUIRE(r.msg->body_as_AuthorizationRequest());
  auto grant = [] { return proto::make_authorization(5, true); };
  REQUIRE(c->send(grant()));
  REQUIRE(c->send(grant()));  // the second grant changes nothing
  bool result = false, refused = false;
  while (!(result && refused)) {
    r = must(c->receive(10000));
    if (r.msg->body_as_ExecResult()) {
      CHECK(*r.msg->body_as_ExecResult()->launched());
      result = true;
    }
    if (const auto* e = r.msg->body_as_Error()) {
      CHECK(e->code() == proto::ErrorCode::unknown_request_id);
      refused = true;
    }
  }
  std::this_thread::sleep_for(200ms);
  CHECK(count_lines(marker) == "1");
}

TEST_CASE("the authorization deadline and the client's disconnect mean not launched") {
  Server s({"--authorization-deadline", "300ms"});
  TempDir d;
  const std::string marker = d.path() + "/marker";
  {
    auto c = s.connect();
    REQUIRE(c);
    proto::ExecReply reply;
    // No authorizer: the client never answers (exec() denies only when asked with one).
    REQUIRE(c->send(proto::make_exec(1, marker_args(d, marker))));
    proto::Received r = must(c->receive(10000));
    REQUIRE(r.msg->body_as_AuthorizationRequest());
    CHECK(r.msg->body_as_AuthorizationRequest()->deadline_ms() == 300);
    r = must(c->receive(10000));  // the deadline passes
    const auto* res = r.msg->body_as_ExecResult();
    REQUIRE(res);
    CHECK_FALSE(*res->launched());
    CHECK(proto::str(res->message()).find("deadline") != std::string::npos);
  }
  {
    auto c = s.connect();
    REQUIRE(c);
    REQUIRE(c->send(proto::make_exec(1, marker_args(d, marker))));
    proto::Received r = must(c->receive(10000));
    REQUIRE(r.msg->body_as_AuthorizationRequest());
  }  // gone before answering
  std::this_thread::sleep_for(500ms);
  CHECK_FALSE(std::filesystem::exists(marker));
  CHECK(processes_with(marker).empty());  // the prepared command is gone too
}

TEST_CASE("a held command whose init a host process stopped holds up neither the supervisor nor a thread for good") {
  // A root supervisor's init runs as the sandbox uid, which any host process of that uid may
  // SIGSTOP (here: the test, as root). The release after a grant waits for the exec: off the
  // loop, and at most limits::kSetupDeadline (10 s); then the init is killed.
  Server s;
  TempDir d;
  const std::string marker = d.path() + "/marker";
  auto c = s.connect();
  REQUIRE(c);
  REQUIRE(c->send(proto::make_exec(7, marker_args(d, marker))));
  proto::Received r = must(c->receive(10000));
  REQUIRE(r.msg->body_as_AuthorizationRequest());
  // The held sandbox: the supervisor's child named corral-init and the command it forked,
  // which waits for the release under the same name.
  std::map<pid_t, pid_t> parent_of;
  for (const auto& e : std::filesystem::directory_iterator("/proc")) {
    const std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    const std::string stat = read_file(e.path().string() + "/stat");
    const auto close = stat.rfind(')');
    if (close == std::string::npos || stat.find("(corral-init)") == std::string::npos) continue;
    std::istringstream rest(stat.substr(close + 2));
    char state = 0;
    pid_t ppid = 0;
    rest >> state >> ppid;
    parent_of[std::stoi(name)] = ppid;
  }
  std::vector<pid_t> inits;
  for (const auto& [pid, ppid] : parent_of)
    if (ppid == s.pid() || (parent_of.count(ppid) && parent_of[ppid] == s.pid())) inits.push_back(pid);
  REQUIRE(inits.size() == 2);
  for (pid_t p : inits) REQUIRE(::kill(p, SIGSTOP) == 0);
  REQUIRE(c->send(proto::make_authorization(7, true)));
  // The supervisor keeps serving meanwhile: a new client is admitted and answered.
  std::this_thread::sleep_for(200ms);
  auto other = s.connect();
  REQUIRE(other);
  REQUIRE(other->send(proto::make_status_request(1)));
  proto::Received st = must(other->receive(5000));
  CHECK(st.msg->body_as_StatusReply());
  // The release gives up at the deadline: a setup error, the init killed, nothing ran.
  auto got = c->receive(20000);
  REQUIRE_MESSAGE(got, s.log());
  r = std::move(*got);
  const auto* res = r.msg->body_as_ExecResult();
  REQUIRE(res);
  CHECK(res->status() == proto::ExitStatus::setup_error);
  CHECK(proto::str(res->setup_step()) == "setup");
  CHECK(proto::str(res->message()).find("did not finish within 10 s") != std::string::npos);
  CHECK(wait_until([&] { return ::kill(inits[0], 0) != 0 && ::kill(inits[1], 0) != 0; }, 5s));
  CHECK_FALSE(std::filesystem::exists(marker));
}
