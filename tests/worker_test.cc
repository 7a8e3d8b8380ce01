// Workers and host channels, end to end through the real supervisor.
#include <doctest/doctest.h>

#include "tests/test_util.h"
#include "worker_proto/messages.h"

using namespace corral;
using namespace corral::test;
using namespace std::chrono_literals;
using proto::Body;
using proto::ErrorCode;

namespace {

const std::string kEcho = CORRAL_ECHO_WORKER;

proto::Frame start_frame(const std::string& name, std::vector<std::string> argv, bool python = false,
                         std::vector<std::string> workspaces = {}) {
  proto::WorkerStartArgs a;
  a.name = name;
  a.argv = std::move(argv);
  a.python = python;
  a.workspaces = std::move(workspaces);
  return proto::make_worker_start(1, a);
}

proto::Frame eval_frame(std::uint64_t id, const std::string& name, const std::string& request, bool serve = false,
                        bool reset = false, std::uint64_t timeout_ms = 0) {
  proto::WorkerEvalArgs a;
  a.name = name;
  a.request = request;
  a.serve_host_calls = serve;
  a.reset = reset;
  a.timeout_ms = timeout_ms;
  return proto::make_worker_eval(id, a);
}

proto::Frame host_reply(std::uint64_t id, std::uint64_t call_id, const std::string& data) {
  return proto::make_host_reply(id, call_id, data);
}

std::string bytes(const flatbuffers::Vector<std::uint8_t>* v) {
  return v ? std::string(reinterpret_cast<const char*>(v->data()), v->size()) : std::string();
}

// Evaluates and returns the reply, or "error:<code>:<message>".
std::string eval(proto::Client& c, std::uint64_t id, const std::string& name, const std::string& request,
                 bool reset = false, std::uint64_t timeout_ms = 0) {
  auto r = c.call(id, eval_frame(id, name, request, false, reset, timeout_ms));
  if (!r) return "io:" + r.error().message;
  if (const auto* e = r->msg->body_as_Error())
    return std::string("error:") + proto::EnumNameErrorCode(e->code()) + ":" + proto::str(e->message());
  return bytes(r->msg->body_as_WorkerEvalResult()->reply());
}

void start(proto::Client& c, const std::string& name, std::vector<std::string> argv, bool python = false,
           std::vector<std::string> workspaces = {}) {
  proto::Received r = must(c.call(1, start_frame(name, std::move(argv), python, std::move(workspaces))));
  if (const auto* e = r.msg->body_as_Error()) FAIL("worker start failed: " << proto::str(e->message()));
  REQUIRE(r.msg->body_as_WorkerStarted());
}

}  // namespace

TEST_CASE("state is kept across evaluations; a crash poisons with no replay; reset recovers") {
  Server s;
  TempDir d;
  auto c = s.connect();
  REQUIRE(c);
  start(*c, "w", {kEcho}, false, {d.path()});
  CHECK(eval(*c, 2, "w", "count") == "1");
  CHECK(eval(*c, 3, "w", "count") == "2");
  CHECK(eval(*c, 4, "w", "echo") == "echo:echo");
  // A side effect proves a request runs at most once, whatever happens around it.
  const std::string marker = d.path() + "/ran";
  CHECK(eval(*c, 5, "w", "side-effect:" + marker) == "done");
  auto crashed = eval(*c, 6, "w", "crash");
  CHECK(crashed.rfind("error:state_lost:", 0) == 0);
  CHECK(crashed.find("not retried") != std::string::npos);
  auto lost = eval(*c, 7, "w", "count");
  CHECK(lost.rfind("error:state_lost:", 0) == 0);
  CHECK(lost.find("--reset") != std::string::npos);
  CHECK(eval(*c, 8, "w", "count", /*reset=*/true) == "1");  // a fresh worker: state starts over
  std::this_thread::sleep_for(200ms);
  const std::string ran = read_file(marker);
  CHECK(std::count(ran.begin(), ran.end(), '\n') == 1);
}

TEST_CASE("a deadline poisons the worker and kills it; reset recovers") {
  Server s;
  auto c = s.connect();
  REQUIRE(c);
  start(*c, "slow", {kEcho});
  auto r = eval(*c, 2, "slow", "sleep:30", false, 300);
  CHECK(r.rfind("error:eval_timeout:", 0) == 0);
  CHECK(wait_until([] { return processes_with(kEcho).empty(); }, 5s));  // killed (SIGKILL is asynchronous)
  CHECK(eval(*c, 3, "slow", "echo").rfind("error:state_lost:", 0) == 0);
  CHECK(eval(*c, 4, "slow", "count", true) == "1");
}

TEST_CASE("host channel: round trip, several calls in flight, none without a serving client, stale replies refused") {
  Server s;
  auto c = s.connect();
  REQUIRE(c);
  start(*c, "h", {kEcho});
  // Served: three calls in flight, answered out of order.
  REQUIRE(c->send(eval_frame(2, "h", "hostcalls:3", /*serve=*/true)));
  std::vector<std::pair<std::uint64_t, std::string>> calls;
  proto::Received r;
  while (calls.size() < 3) {
    r = must(c->receive(10000));
    REQUIRE(r.msg->request_id() == 2);
    const auto* call = r.msg->body_as_HostCall();
    REQUIRE(call);
    calls.emplace_back(call->call_id(), bytes(call->data()));
  }
  for (auto it = calls.rbegin(); it != calls.rend(); ++it) REQUIRE(c->send(host_reply(2, it->first, "re-" + it->second)));
  r = must(c->receive(10000));
  REQUIRE(r.msg->body_as_WorkerEvalResult());
  CHECK(bytes(r.msg->body_as_WorkerEvalResult()->reply()) == "re-call-1re-call-2re-call-3");
  CHECK(r.msg->body_as_WorkerEvalResult()->host_calls() == 3);
  // The evaluation is over: a late reply on its channel is refused and never delivered.
  REQUIRE(c->send(host_reply(2, calls[0].first, "late")));
  r = must(c->receive(10000));
  REQUIRE(r.msg->body_as_Error());
  CHECK(r.msg->body_as_Error()->code() == ErrorCode::channel_closed);
  CHECK(eval(*c, 3, "h", "echo") == "echo:echo");  // the worker never saw it
  // Not served: the worker gets an error for its call and the evaluation goes on.
  CHECK(eval(*c, 4, "h", "host:ping") == "host-error:no host channel: the evaluating client serves no host calls");
  CHECK(eval(*c, 5, "h", "count") == "1");
}

TEST_CASE("the evaluating client's disconnect kills the worker; its request is not replayed") {
  Server s;
  TempDir d;
  const std::string marker = d.path() + "/ran";
  {
    auto c = s.connect();
    REQUIRE(c);
    proto::ScopeArgs a;
    a.detach = true;
    proto::Received r = must(c->call(1, proto::make_scope_create(1, a)));
  }
  auto owner = s.connect();
  REQUIRE(owner);
  start(*owner, "d", {kEcho}, false, {d.path()});
  {
    auto c = s.connect();
    REQUIRE(c);
    REQUIRE(c->send(eval_frame(2, "d", "sleep:30")));
    REQUIRE(wait_until([&] { return !processes_with(kEcho).empty(); }, 5s));
    std::this_thread::sleep_for(200ms);
  }  // disconnect mid-evaluation
  CHECK(wait_until([&] { return processes_with(kEcho).empty(); }, 10s));
  auto r = eval(*owner, 3, "d", "count");
  CHECK(r.rfind("error:state_lost:", 0) == 0);
  CHECK(r.find("disconnected") != std::string::npos);
}

TEST_CASE("workers: the program must be trusted; names are unique; list, logs and stop work") {
  Server s;
  TempDir d;
  auto c = s.connect();
  REQUIRE(c);
  proto::Received r = must(c->call(1, start_frame("rel", {"echo_worker"})));
  CHECK(proto::str(r.msg->body_as_Error()->message()).find("absolute path") != std::string::npos);
  // A program inside a writable root could have been written by the sandbox.
  const std::string copy = d.path() + "/worker";
  std::filesystem::copy_file(kEcho, copy);
  ::chmod(copy.c_str(), 0755);
  r = must(c->call(1, start_frame("inside", {copy}, false, {d.path()})));
  CHECK(proto::str(r.msg->body_as_Error()->message()).find("writable root") != std::string::npos);
  start(*c, "ok", {kEcho});
  r = must(c->call(1, start_frame("ok", {kEcho})));
  CHECK(proto::str(r.msg->body_as_Error()->message()).find("already has a worker named 'ok'") != std::string::npos);
  CHECK(eval(*c, 2, "ok", "print") == "printed");
  auto logs = cli({"worker", "logs", "ok"}, s.socket());
  CHECK(logs.out.find("a line on stdout") != std::string::npos);
  CHECK(logs.out.find("a line on stderr") != std::string::npos);
  auto list = cli({"worker", "list", "--json"}, s.socket());
  CHECK(list.out.find("\"name\":\"ok\"") != std::string::npos);
  CHECK(list.out.find("\"evaluations\":1") != std::string::npos);
  CHECK(cli({"worker", "stop", "ok"}, s.socket()).exit_code == 0);
  CHECK(wait_until([&] { return processes_with(kEcho).empty(); }, 10s));
  CHECK(cli({"worker", "list", "--json"}, s.socket()).out.find("\"name\":\"ok\"") == std::string::npos);
  CHECK(eval(*c, 3, "ok", "echo").rfind("error:not_found:", 0) == 0);
}

TEST_CASE("the Python worker through the CLI: state, captured output, host calls, deadline and reset") {
  Server s;
  REQUIRE(cli({"worker", "start", "py", "--python"}, s.socket()).exit_code == 0);
  auto first = cli({"worker", "eval", "py", "--request", R"j({"code": "x = 41\nprint('hi')"})j"}, s.socket());
  CHECK(first.exit_code == 0);
  CHECK(first.out == R"j({"ok": true, "stdout": "hi\n", "stderr": "", "result": null, "error": null})j");
  CHECK(cli({"worker", "eval", "py", "--request", R"j({"code": "x + 1"})j"}, s.socket()).out.find(R"j("result": "42")j") != std::string::npos);
  auto host = cli({"worker", "eval", "py", "--host-cmd", "tr a-z A-Z", "--request", R"j({"code": "host_call(b'ping')"})j"}, s.socket());
  CHECK(host.out.find(R"j("result": "b'PING'")j") != std::string::npos);
  auto slow = cli({"worker", "eval", "py", "--timeout", "300ms", "--request", R"j({"code": "import time; time.sleep(30)"})j"}, s.socket());
  CHECK(slow.exit_code == 1);
  CHECK(slow.err.find("deadline") != std::string::npos);
  auto lost = cli({"worker", "eval", "py", "--request", R"j({"code": "x"})j"}, s.socket());
  CHECK(lost.exit_code == 1);
  CHECK(lost.err.find("lost its state") != std::string::npos);
  auto fresh = cli({"worker", "eval", "py", "--reset", "--request", R"j({"code": "1 + 1"})j"}, s.socket());
  CHECK(fresh.out.find(R"j("result": "2")j") != std::string::npos);
}

TEST_CASE("a scope holds at most 16 workers; the limit is checked before launch") {
  Server s;
  auto c = s.connect();
  REQUIRE(c);
  // Marked: other tests running at the same time start echo workers of their own.
  const std::string marker = "corral-worker-limit-" + std::to_string(::getpid());
  for (int i = 0; i < 16; ++i) start(*c, "w" + std::to_string(i), {kEcho, marker});
  proto::Received r = must(c->call(1, start_frame("one-too-many", {kEcho, marker})));
  REQUIRE(r.msg->body_as_Error());
  CHECK(r.msg->body_as_Error()->code() == ErrorCode::too_many_requests);
  CHECK(proto::str(r.msg->body_as_Error()->message()).find("the limit is 16") != std::string::npos);
  CHECK(processes_with(marker).size() == 16);
}

TEST_CASE("a worker idle past its idle timeout is stopped") {
  Server s;
  REQUIRE(cli({"worker", "start", "idle", "--idle-timeout", "300ms", "--", kEcho}, s.socket()).exit_code == 0);
  CHECK(cli({"worker", "eval", "idle", "--request", "count"}, s.socket()).out == "1");
  CHECK(wait_until([&] { return cli({"worker", "list", "--json"}, s.socket()).out == "[]\n"; }, 10s));
  CHECK(wait_until([&] { return processes_with(kEcho).empty(); }, 10s));
  CHECK(s.log().find("idle for 300ms: stopping it") != std::string::npos);
}

namespace {

std::uint64_t rss_kb(pid_t pid) {
  std::istringstream in(read_file("/proc/" + std::to_string(pid) + "/status"));
  for (std::string line; std::getline(in, line);)
    if (line.rfind("VmRSS:", 0) == 0) return std::stoull(line.substr(6));
  return 0;
}

}  // namespace

TEST_CASE("a worker is poisoned for a host call outside an evaluation") {
  Server s;
  auto c = s.connect();
  REQUIRE(c);
  start(*c, "w", {kEcho});
  CHECK(eval(*c, 2, "w", "stray") == "stray");
  // The call that followed the end of its evaluation is a protocol violation.
  REQUIRE(wait_until([&] { return s.log().find("unexpected HostCall for evaluation 1") != std::string::npos; }, 10s));
  auto lost = eval(*c, 3, "w", "echo");
  CHECK(lost.rfind("error:state_lost:", 0) == 0);
  CHECK(lost.find("unexpected HostCall") != std::string::npos);
}

TEST_CASE("a worker is poisoned past 64 outstanding host calls") {
  Server s;
  auto c = s.connect();
  REQUIRE(c);
  start(*c, "w", {kEcho});
  // 64 calls in flight are allowed, and answered.
  REQUIRE(c->send(eval_frame(2, "w", "hostcalls:64", /*serve=*/true)));
  proto::Received r;
  for (int i = 0; i < 64; ++i) {
    r = must(c->receive(10000));
    const auto* call = r.msg->body_as_HostCall();
    REQUIRE(call);
    REQUIRE(c->send(host_reply(2, call->call_id(), "")));
  }
  r = must(c->receive(10000));
  REQUIRE(r.msg->body_as_WorkerEvalResult());
  // The 65th is one too many: the worker is killed, the evaluation fails, nothing replays.
  REQUIRE(c->send(eval_frame(3, "w", "hostcalls:65", /*serve=*/true)));
  for (;;) {
    r = must(c->receive(10000));
    if (!r.msg->body_as_HostCall()) break;
  }
  REQUIRE(r.msg->body_as_Error());
  CHECK(r.msg->request_id() == 3);
  CHECK(r.msg->body_as_Error()->code() == ErrorCode::state_lost);
  CHECK(proto::str(r.msg->body_as_Error()->message()).find("more than 64 host calls outstanding") != std::string::npos);
}

TEST_CASE("a worker flooding host calls without reading the replies is poisoned, and memory stays bounded") {
  Server s;
  auto c = s.connect();
  REQUIRE(c);
  start(*c, "w", {kEcho});
  const std::uint64_t before = rss_kb(s.pid());
  // No serving client: every call gets an error reply the worker never reads.
  auto flooded = eval(*c, 2, "w", "flood:2000000", false, 60000);
  CHECK(flooded.rfind("error:state_lost:", 0) == 0);
  CHECK(flooded.find("more than 64 host calls outstanding") != std::string::npos);
  CHECK(rss_kb(s.pid()) < before + 32 * 1024);
}

TEST_CASE("host calls relayed to a client that does not read stop the worker being read") {
  Server s;
  auto c = s.connect();
  REQUIRE(c);
  start(*c, "w", {kEcho});
  const std::uint64_t before = rss_kb(s.pid());
  // 40 calls of 15 MiB (600 MiB in all) for a client that reads none of them yet.
  REQUIRE(c->send(eval_frame(2, "w", "bigcalls:40:15728640", /*serve=*/true)));
  std::this_thread::sleep_for(3s);
  // The client queue's bound (4 MiB) plus a frame or two in flight, far below 600 MiB.
  CHECK(rss_kb(s.pid()) < before + 120 * 1024);
  // The client reads and answers every call: nothing was lost meanwhile.
  proto::Received r;
  for (int i = 0; i < 40; ++i) {
    r = must(c->receive(30000));
    const auto* call = r.msg->body_as_HostCall();
    REQUIRE(call);
    CHECK(call->data()->size() == 15728640u);
    REQUIRE(c->send(host_reply(2, call->call_id(), "k")));
  }
  r = must(c->receive(30000));
  REQUIRE(r.msg->body_as_WorkerEvalResult());
  CHECK(bytes(r.msg->body_as_WorkerEvalResult()->reply()) == std::string(40, 'k'));
}

TEST_CASE("a worker that exits before it is ready is a start failure, with its status and its log") {
  Server s;
  auto r = cli({"worker", "start", "f", "--", "/bin/false"}, s.socket());
  CHECK(r.exit_code == 1);
  CHECK(r.out.find("started") == std::string::npos);
  CHECK(r.err.find("worker f exited with status 1 before it was ready") != std::string::npos);
  auto c = s.connect();
  REQUIRE(c);
  proto::Received got = must(c->call(1, start_frame("sh", {"/bin/sh", "-c", "echo boom >&2; exit 3"})));
  REQUIRE(got.msg->body_as_Error());
  CHECK(proto::str(got.msg->body_as_Error()->message()) ==
        "worker sh exited with status 3 before it was ready; its log ends with:\nboom");
  // A failed start leaves nothing behind: the names are free again.
  auto listed = cli({"worker", "list", "--json"}, s.socket());
  CHECK(listed.out.find("\"f\"") == std::string::npos);
  start(*c, "f", {kEcho});
  CHECK(eval(*c, 2, "f", "echo") == "echo:echo");
}

TEST_CASE("resets while frames are in flight both ways leave a worker that serves correctly") {
  Server s;
  auto c = s.connect();
  REQUIRE(c);
  start(*c, "r", {kEcho});
  std::uint64_t id = 2;
  // A reset landing between a frame's header and its payload is a narrow window: at 100 rounds
  // a reader left on the replaced socket crashed about half the runs.
  constexpr int kRounds = 100;
  for (int round = 0; round < kRounds; ++round) {
    CAPTURE(round);
    const std::uint64_t first = id++, second = id++;
    if (round % 3 == 0) {
      // A 4 MiB reply is being read from the worker when the reset comes.
      REQUIRE(c->send(eval_frame(first, "r", "big:4194304")));
      std::this_thread::sleep_for(std::chrono::milliseconds(round % 7));
      REQUIRE(c->send(eval_frame(second, "r", "count", /*serve=*/false, /*reset=*/true)));
    } else {
      // 50 host calls stream from the worker while the answers to the first few stream to it.
      REQUIRE(c->send(eval_frame(first, "r", "hostcalls:50", /*serve=*/true)));
      const int answered = round % 5 + 1;
      for (int i = 0; i < answered; ++i) {
        proto::Received r = must(c->receive(10000));
        const auto* call = r.msg->body_as_HostCall();
        REQUIRE(call);
        REQUIRE(c->send(host_reply(first, call->call_id(), std::string(32 << 10, 'a'))));
      }
      REQUIRE(c->send(eval_frame(second, "r", "count", /*serve=*/false, /*reset=*/true)));
    }
    // The interrupted evaluation ends once (finished before the reset, or cancelled by it), then
    // the fresh worker answers: nothing of the old process reaches the new one's channel.
    proto::Received r;
    do r = must(c->receive(30000));
    while (r.msg->body_as_HostCall());
    CHECK(r.msg->request_id() == first);
    if (const auto* e = r.msg->body_as_Error()) {
      CHECK(e->code() == ErrorCode::cancelled);
      CHECK(proto::str(e->message()).find("the worker was reset") != std::string::npos);
    } else {
      REQUIRE(r.msg->body_as_WorkerEvalResult());
      CHECK(bytes(r.msg->body_as_WorkerEvalResult()->reply()) == std::string(4194304, 'b'));
    }
    r = must(c->receive(30000));
    CHECK(r.msg->request_id() == second);
    REQUIRE(r.msg->body_as_WorkerEvalResult());
    CHECK(bytes(r.msg->body_as_WorkerEvalResult()->reply()) == "1");
  }
  CHECK(eval(*c, id++, "r", "count") == "2");
  CHECK(wait_until([] { return processes_with(kEcho).size() == 1; }, 10s));
  // The only state the worker lost is the one each reset throws away.
  const std::string log = s.log();
  auto count = [&](const std::string& what) {
    std::size_t n = 0;
    for (auto at = log.find(what); at != std::string::npos; at = log.find(what, at + 1)) ++n;
    return n;
  };
  CHECK(count("state lost") == count("the worker was reset; state lost"));
  CHECK(log.find("protocol violation") == std::string::npos);
}
