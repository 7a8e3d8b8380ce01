// End to end: the real `corral serve` on a private socket, driven through the CLI and the
// client library as a user would.
#include <doctest/doctest.h>

#include <grp.h>
#include <sys/socket.h>

#include <map>

#include <nlohmann/json.hpp>

#include "tests/test_util.h"
#include "worker_proto/messages.h"

using namespace corral;
using namespace corral::test;
using namespace std::chrono_literals;
using proto::Body;
using proto::ErrorCode;

namespace {

proto::ExecArgs helper_args(std::vector<std::string> args) {
  proto::ExecArgs a;
  a.argv = {kHelper};
  a.argv.insert(a.argv.end(), args.begin(), args.end());
  return a;
}

// Receives frames until one for `id` that is final (not an OutputChunk).
proto::Result<proto::Received> final_for(proto::Client& c, std::uint64_t id, int timeout_ms = 30000) {
  for (;;) {
    auto r = c.receive(timeout_ms);
    if (!r || (r->msg->request_id() == id && r->msg->body_type() != Body::OutputChunk)) return r;
  }
}

std::uint64_t rss_kb(pid_t pid) {
  std::istringstream in(read_file("/proc/" + std::to_string(pid) + "/status"));
  for (std::string line; std::getline(in, line);)
    if (line.rfind("VmRSS:", 0) == 0) return std::stoull(line.substr(6));
  return 0;
}

}  // namespace

TEST_CASE("corral exec -- echo hi, through the real binary") {
  Server s;
  auto r = cli({"exec", "--", "echo", "hi"}, s.socket());
  CHECK(r.exit_code == 0);
  CHECK(r.out == "hi\n");
  CHECK(r.err.empty());
}

TEST_CASE("CLI exit statuses follow docs/design.md") {
  Server s;
  CHECK(cli({"exec", "--", kHelper, "exit", "7"}, s.socket()).exit_code == 7);
  CHECK(cli({"exec", "--", "corral-no-such-program"}, s.socket()).exit_code == 127);
  CHECK(cli({"exec", "--", "/etc/passwd"}, s.socket()).exit_code == 126);
  CHECK(cli({"exec", "--cwd", "/corral-no-such-dir", "--", "true"}, s.socket()).exit_code == 125);
  CHECK(cli({"exec", "--timeout", "200ms", "--", kHelper, "sleep", "30"}, s.socket()).exit_code == 124);
  CHECK(cli({"exec", "--max-output", "10", "--", kHelper, "write", "1000"}, s.socket()).exit_code == 137);
  CHECK(cli({"exec", "--", kHelper, "signal", "15"}, s.socket()).exit_code == 128 + 15);
  auto sh = cli({"exec", "--sh", "echo out; echo err >&2; exit 4"}, s.socket());
  CHECK(sh.exit_code == 4);
  CHECK(sh.out == "out\n");
  CHECK(sh.err == "err\n");
}

TEST_CASE("CLI usage errors: absurd values are refused with exit 125 (exec: corral failed) and a message") {
  Server s;
  for (std::vector<std::string> bad : std::vector<std::vector<std::string>>{
           {"exec", "--timeout", "0", "--", "true"},
           {"exec", "--timeout", "-1", "--", "true"},
           {"exec", "--timeout", "10years", "--", "true"},
           {"exec", "--timeout", "25h", "--", "true"},
           {"exec", "--max-output", "65M", "--", "true"},
           {"exec", "--max-output", "0", "--", "true"},
           {"exec", "--env", "NOEQUALS", "--", "true"},
           {"exec"},
           {"exec", "--sh", "true", "--", "true"}}) {
    CAPTURE(bad);
    auto r = cli(bad, s.socket());
    CHECK(r.exit_code == 125);  // exec: a usage error is "corral failed"
    CHECK(r.err.find("corral: ") == 0);
  }
  // The server is still serving.
  CHECK(cli({"exec", "--", "true"}, s.socket()).exit_code == 0);
}

TEST_CASE("CLI --json prints the result record") {
  Server s;
  auto r = cli({"exec", "--json", "--max-output", "10", "--", kHelper, "write", "100"}, s.socket());
  CHECK(r.exit_code == 137);
  CHECK(r.out.find("\"status\":\"output_limit\"") != std::string::npos);
  CHECK(r.out.find("\"output_truncated\":true") != std::string::npos);
  CHECK(r.out.find("\"stdout\":\"abcdefghij\"") != std::string::npos);
  for (const char* key : {"\"exit_code\":", "\"signal\":", "\"timed_out\":false", "\"stderr\":\"\"", "\"wall_ms\":",
                          "\"user_cpu_ms\":", "\"sys_cpu_ms\":", "\"max_rss_kb\":", "\"memory_peak_kb\":", "\"enforced\":[",
                          "\"temp_dir\":\""}) {
    CAPTURE(key);
    CHECK(r.out.find(key) != std::string::npos);
  }
  // max_rss_kb is the command's own peak: what a small command inherits from its init (a copy
  // of the supervisor) is not reported as its own, and a big one's is.
  auto small = cli({"exec", "--json", "--", "/bin/true"}, s.socket());
  CHECK(small.out.find("\"max_rss_kb\":null") != std::string::npos);
  auto big = cli({"exec", "--json", "--memory", "512M", "--", kHelper, "alloc", "200"}, s.socket());
  CAPTURE(big.out);
  const auto at = big.out.find("\"max_rss_kb\":");
  REQUIRE(at != std::string::npos);
  const long kb = std::atol(big.out.c_str() + at + 13);
  CHECK(kb >= 200 * 1024);
  CHECK(kb < 400 * 1024);
  r = cli({"exec", "--json", "--", "corral-no-such-program"}, s.socket());
  CHECK(r.exit_code == 127);
  CHECK(r.out.find("\"status\":\"setup_error\"") != std::string::npos);
  CHECK(r.out.find("\"setup_step\":\"exec\"") != std::string::npos);
  CHECK(r.out.find("\"setup_errno\":2") != std::string::npos);
  CHECK(r.out.find("\"exit_code\":null") != std::string::npos);
  // Invalid UTF-8 output still prints as valid JSON.
  r = cli({"exec", "--json", "--sh", "printf 'a\\377b'"}, s.socket());
  CHECK(r.out.find("\"stdout\":\"a\xEF\xBF\xBD" "b\"") != std::string::npos);
}

TEST_CASE("CLI output streams as it arrives, also into a file") {
  Server s;
  TempDir d;
  std::string out = d.path() + "/out";
  pid_t pid = spawn_process({kCorral, "exec", "--socket", s.socket(), "--sh", "echo first; sleep 3; echo second"},
                            out, d.path() + "/err");
  CHECK(wait_until([&] { return read_file(out) == "first\n"; }, 2500ms));
  CHECK(running(pid));  // still waiting for "second"
  int status = wait_process(pid);
  CHECK(WIFEXITED(status));
  CHECK(read_file(out) == "first\nsecond\n");
}

TEST_CASE("the supervisor's environment does not leak; the audit log records each launch") {
  Server s({}, {"CORRAL_SUPERVISOR_SECRET=leak"});
  auto r = cli({"exec", "--env", "MINE=1", "--", kHelper, "env"}, s.socket());
  CHECK(r.exit_code == 0);
  CHECK(r.out.find("MINE=1\n") != std::string::npos);
  CHECK(r.out.find("CORRAL_SUPERVISOR_SECRET") == std::string::npos);
  // One JSON object per launch, after "launch ", valid whatever bytes the command line held.
  CHECK(cli({"exec", "--", kHelper, "exit", "3", "\xff"}, s.socket()).exit_code == 3);
  std::string log = s.log();
  std::vector<nlohmann::json> launches;
  std::istringstream lines(log);
  for (std::string line; std::getline(lines, line);)
    if (auto at = line.find(" info launch "); at != std::string::npos)
      launches.push_back(nlohmann::json::parse(line.substr(at + 13)));  // throws (fails) if not JSON
  REQUIRE(launches.size() == 2);
  const auto& first = launches[0];
  CHECK(first["peer_uid"] == ::geteuid());
  CHECK(first["argv"] == nlohmann::json::array({kHelper, "env"}));
  CHECK(first["status"] == "exited");
  CHECK(first["exit_code"] == 0);
  CHECK(first["mode"] == "workspace-write");
  CHECK(first["network"] == "denied");
  CHECK(first["truncated"] == false);
  CHECK(launches[1]["argv"] == nlohmann::json::array({kHelper, "exit", "3", "\xEF\xBF\xBD"}));
  CHECK(launches[1]["exit_code"] == 3);
}

TEST_CASE("--log-level cannot silence the audit lines; --audit-log sends them to a file") {
  for (const char* level : {"error", "off"}) {
    CAPTURE(level);
    Server s({"--log-level", level});
    CHECK(cli({"exec", "--", kHelper, "exit", "0"}, s.socket()).exit_code == 0);
    CHECK(wait_until([&] { return s.log().find(" info launch {") != std::string::npos; }, 5s));
    CHECK(s.log().find(" serving ") == std::string::npos);  // the ordinary log obeys the level
  }
  TempDir d;
  const std::string audit = d.path() + "/audit.log";
  {
    Server s({"--log-level", "off", "--audit-log", audit});
    CHECK(cli({"exec", "--", kHelper, "exit", "0"}, s.socket()).exit_code == 0);
    CHECK(wait_until([&] { return read_file(audit).find(" info launch {") != std::string::npos; }, 5s));
    CHECK(s.log().find("launch") == std::string::npos);
  }
  struct stat st {};
  REQUIRE(::stat(audit.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);  // command lines and paths are in it
  // Appended to, never truncated, by the next supervisor.
  Server s({"--audit-log", audit});
  CHECK(cli({"exec", "--", kHelper, "exit", "0"}, s.socket()).exit_code == 0);
  CHECK(wait_until([&] { const auto a = read_file(audit); return std::count(a.begin(), a.end(), '\n') == 2; }, 5s));
  // A file that cannot be opened is a usage error, before serving.
  auto bad = cli({"serve", "--socket", d.path() + "/x.sock", "--audit-log", d.path() + "/no/such/dir/audit.log"});
  CHECK(bad.exit_code != 0);
  CHECK(bad.err.find("audit log") != std::string::npos);
  // Never through a symlink (a planted link would make root append to its target).
  const std::string link = d.path() + "/link.log";
  REQUIRE(::symlink((d.path() + "/target").c_str(), link.c_str()) == 0);
  auto linked = cli({"serve", "--socket", d.path() + "/y.sock", "--audit-log", link});
  CHECK(linked.exit_code != 0);
  CHECK(linked.err.find("the audit log " + link) != std::string::npos);
  CHECK(!std::filesystem::exists(d.path() + "/target"));
}

TEST_CASE("many requests in flight on one connection, each with exactly one final reply") {
  Server s;
  auto c = s.connect();
  REQUIRE(c);
  for (std::uint64_t id : {11, 12, 13}) REQUIRE(c->send(proto::make_exec(id, helper_args({"sleep", "0.3"}))));
  REQUIRE(c->send(proto::make_status_request(14)));
  std::map<std::uint64_t, int> finals;
  while (finals.size() < 4) {
    proto::Received r = must(c->receive(30000));
    REQUIRE(r.msg->body_type() != Body::Error);
    finals[r.msg->request_id()]++;
    if (auto* e = r.msg->body_as_ExecResult()) CHECK(e->status() == proto::ExitStatus::exited);
  }
  CHECK(finals == std::map<std::uint64_t, int>{{11, 1}, {12, 1}, {13, 1}, {14, 1}});
  // Nothing more arrives, and the connection stays open.
  auto extra = c->receive(300);
  REQUIRE_FALSE(extra);
  CHECK(extra.error().kind == proto::Failure::Kind::timeout);
}

TEST_CASE("pipelined file requests run off the loop, in order: each read sees the write before it") {
  Server s;
  auto c = s.connect();
  REQUIRE(c);
  // Write, read, write, read, ... of one file without waiting; a status request in between is
  // answered too (the loop is free while the pool works).
  constexpr std::uint64_t kRounds = 40;
  for (std::uint64_t i = 0; i < kRounds; ++i) {
    proto::FileArgs w;
    w.path = "/tmp/order";
    w.data = "round " + std::to_string(i);
    REQUIRE(c->send(proto::make_write(1000 + i, w)));
    proto::FileArgs r;
    r.path = "/tmp/order";
    REQUIRE(c->send(proto::make_read(2000 + i, r)));
  }
  REQUIRE(c->send(proto::make_status_request(3000)));
  std::map<std::uint64_t, std::string> reads;
  int writes = 0, statuses = 0;
  while (reads.size() + writes + statuses < 2 * kRounds + 1) {
    proto::Received got = must(c->receive(30000));
    const std::uint64_t id = got.msg->request_id();
    CAPTURE(id);
    REQUIRE(got.msg->body_type() != Body::Error);
    if (auto* rr = got.msg->body_as_ReadResult())
      reads[id] = rr->data() ? std::string(reinterpret_cast<const char*>(rr->data()->data()), rr->data()->size()) : "";
    else if (got.msg->body_as_WriteResult()) ++writes;
    else if (got.msg->body_as_StatusReply()) ++statuses;
  }
  CHECK(writes == static_cast<int>(kRounds));
  CHECK(statuses == 1);
  for (std::uint64_t i = 0; i < kRounds; ++i) CHECK(reads[2000 + i] == "round " + std::to_string(i));
}

TEST_CASE("a reused in-flight id is refused; the first request is unaffected") {
  Server s;
  auto c = s.connect();
  REQUIRE(c);
  REQUIRE(c->send(proto::make_exec(7, helper_args({"sleep", "0.5"}))));
  REQUIRE(c->send(proto::make_exec(7, helper_args({"exit", "3"}))));
  proto::Received r = must(c->receive(30000));
  REQUIRE(r.msg->body_type() == Body::Error);
  CHECK(r.msg->request_id() == 7);
  CHECK(r.msg->body_as_Error()->code() == ErrorCode::duplicate_request_id);
  r = must(final_for(*c, 7));
  REQUIRE(r.msg->body_type() == Body::ExecResult);
  CHECK(r.msg->body_as_ExecResult()->status() == proto::ExitStatus::exited);
  CHECK(*r.msg->body_as_ExecResult()->exit_code() == 0);
}

TEST_CASE("cancel: terminate now, stop gracefully, unknown ids refused") {
  Server s;
  auto c = s.connect();
  REQUIRE(c);
  // Cancelled once it runs (its first byte says so): a cancel that wins the race with the
  // launch ends it unlaunched, with no signal to report.
  REQUIRE(c->send(proto::make_exec(1, helper_args({"flood-then-sleep", "1", "30"}))));
  proto::Received r = must(c->receive(10000));
  REQUIRE(r.msg->body_as_OutputChunk());
  REQUIRE(c->send(proto::make_cancel(1, /*force=*/true)));
  r = must(final_for(*c, 1, 10000));
  auto* res = r.msg->body_as_ExecResult();
  REQUIRE(res);
  CHECK(res->status() == proto::ExitStatus::cancelled);
  CHECK(res->signal() == SIGKILL);

  auto a = helper_args({"ignore-term", "30"});
  a.grace_ms = 200;
  REQUIRE(c->send(proto::make_exec(2, a)));
  std::this_thread::sleep_for(100ms);
  REQUIRE(c->send(proto::make_cancel(2, /*force=*/false)));
  r = must(final_for(*c, 2, 10000));
  res = r.msg->body_as_ExecResult();
  REQUIRE(res);
  CHECK(res->status() == proto::ExitStatus::cancelled);
  CHECK(res->signal() == SIGKILL);
  CHECK(res->wall_ms() >= 250);

  REQUIRE(c->send(proto::make_cancel(99, true)));
  r = must(c->receive(10000));
  CHECK(r.msg->request_id() == 99);
  REQUIRE(r.msg->body_type() == Body::Error);
  CHECK(r.msg->body_as_Error()->code() == ErrorCode::unknown_request_id);
}

TEST_CASE("requests before the hello are refused") {
  Server s;
  auto c = must(proto::Client::connect_raw(s.socket()));
  REQUIRE(c->send(proto::make_status_request(5)));
  proto::Received r = must(c->receive(10000));
  REQUIRE(r.msg->body_type() == Body::Error);
  CHECK(r.msg->body_as_Error()->code() == ErrorCode::hello_required);
  CHECK(r.msg->request_id() == 5);
}

TEST_CASE("a malformed frame gets an error frame; that connection and others keep working") {
  Server s;
  auto c = s.connect();
  auto other = s.connect();
  REQUIRE(c);
  REQUIRE(other);
  std::vector<std::uint8_t> garbage = {16, 0, 0, 0, 1, 2, 3, 4, 'C', 'R', 'L', '1', 9, 9, 9, 9, 9, 9, 9, 9};
  REQUIRE(c->send_bytes(garbage.data(), garbage.size()));
  proto::Received r = must(c->receive(10000));
  REQUIRE(r.msg->body_type() == Body::Error);
  CHECK(r.msg->body_as_Error()->code() == ErrorCode::malformed);
  CHECK(r.msg->request_id() == 0);

  // A well-formed message the client must not send.
  REQUIRE(c->send(proto::make_error(3, ErrorCode::internal, "hi")));
  r = must(c->receive(10000));
  CHECK(r.msg->body_as_Error()->code() == ErrorCode::malformed);

  proto::ExecReply reply = must(c->exec(2, helper_args({"exit", "0"}), nullptr));
  REQUIRE(reply.result());
  CHECK(reply.result()->status() == proto::ExitStatus::exited);
  reply = must(other->exec(3, helper_args({"exit", "0"}), nullptr));
  CHECK(reply.result()->status() == proto::ExitStatus::exited);
}

TEST_CASE("an oversized length prefix is refused at once and the connection closed") {
  Server s({"--max-frame", "1M"});
  auto c = s.connect();
  auto other = s.connect();
  REQUIRE(c);
  std::uint8_t header[4] = {0xff, 0xff, 0xff, 0x7f};  // ~2 GiB announced, nothing sent
  REQUIRE(c->send_bytes(header, 4));
  proto::Received r = must(c->receive(5000));
  REQUIRE(r.msg->body_type() == Body::Error);
  CHECK(r.msg->body_as_Error()->code() == ErrorCode::frame_too_large);
  auto after = c->receive(5000);
  REQUIRE_FALSE(after);
  CHECK(after.error().kind == proto::Failure::Kind::closed);
  proto::ExecReply reply = must(other->exec(1, helper_args({"exit", "0"}), nullptr));
  CHECK(reply.result()->status() == proto::ExitStatus::exited);
  CHECK(rss_kb(s.pid()) < 200 * 1024);  // nothing of that size was allocated
}

TEST_CASE("invalid requests are refused with a message naming the limit") {
  Server s({"--max-timeout", "1m"});
  auto c = s.connect();
  REQUIRE(c);
  auto a = helper_args({"exit", "0"});
  a.timeout_ms = 120'000;
  proto::ExecReply reply = must(c->exec(1, a, nullptr));
  REQUIRE(reply.error());
  CHECK(reply.error()->code() == ErrorCode::invalid_request);
  CHECK(proto::str(reply.error()->message()).find("1m") != std::string::npos);

  a = helper_args({"exit", "0"});
  a.max_output_bytes = 65 << 20;
  reply = must(c->exec(2, a, nullptr));
  REQUIRE(reply.error());
  CHECK(proto::str(reply.error()->message()).find("64M") != std::string::npos);

  a = {};
  reply = must(c->exec(3, a, nullptr));
  REQUIRE(reply.error());
  CHECK(reply.error()->code() == ErrorCode::invalid_request);

  a = helper_args({"exit", "0"});
  a.cwd = "relative/dir";
  reply = must(c->exec(4, a, nullptr));
  REQUIRE(reply.error());

  reply = must(c->exec(0, helper_args({"exit", "0"}), nullptr));
  REQUIRE(reply.error());
  CHECK(reply.error()->code() == ErrorCode::invalid_request);
}

TEST_CASE("a client killed mid-command: the command's whole tree dies, no zombie") {
  Server s;
  TempDir d;
  std::string pidfile = d.path() + "/pids";
  pid_t cli_pid = spawn_process({kCorral, "exec", "--socket", s.socket(), "--workspace", d.path(), "--", kHelper, "tree",
                                 pidfile, "2"},
                                d.path() + "/out", d.path() + "/err");
  REQUIRE(wait_until([&] { return std::filesystem::exists(pidfile); }, 10s));
  CHECK(read_pids(pidfile).size() == 3);
  // The helper and its two children, seen from the host (plus the CLI, whose argv names them).
  auto found = processes_with(pidfile);
  CHECK(std::count_if(found.begin(), found.end(), [&](pid_t p) { return p != cli_pid; }) == 3);
  ::kill(cli_pid, SIGKILL);
  wait_process(cli_pid);
  // Gone entirely: not running and not a zombie the supervisor forgot to reap.
  CHECK(wait_until([&] { return processes_with(pidfile).empty(); }, 5s));
  CHECK(cli({"exec", "--", "true"}, s.socket()).exit_code == 0);
}

TEST_CASE("the scope's temp dir is private and removed when the connection closes") {
  Server s;
  std::string dir;
  {
    auto c = s.connect();
    REQUIRE(c);
    proto::ExecReply reply = must(c->exec(1, helper_args({"pwd"}), nullptr));
    CHECK(reply.out == "/tmp\n");  // the scope's temp dir, as the command sees it
    dir = proto::str(reply.result()->temp_dir());
    struct stat st {};
    REQUIRE(::stat(dir.c_str(), &st) == 0);
    CHECK((st.st_mode & 0777) == 0700);
    proto::ExecArgs touch;
    touch.shell = "echo x > f";
    reply = must(c->exec(2, touch, nullptr));
    CHECK(std::filesystem::exists(dir + "/f"));
  }
  CHECK(wait_until([&] { return !std::filesystem::exists(dir); }, 5s));
}

TEST_CASE("a client that does not read slows its command instead of growing the supervisor") {
  Server s({}, {kSmallAsanQuarantine});
  auto c = s.connect();
  REQUIRE(c);
  const std::uint64_t before = rss_kb(s.pid());
  const std::size_t total = 48u << 20;
  auto a = helper_args({"write", std::to_string(total)});
  a.max_output_bytes = 64u << 20;
  REQUIRE(c->send(proto::make_exec(1, a)));
  std::this_thread::sleep_for(1500ms);
  // Queue limit 4 MiB + socket buffers + pipe: far below the 48 MiB the command wants to write.
  CHECK(rss_kb(s.pid()) < before + 24 * 1024);
  std::size_t got = 0;
  proto::Received r;
  for (;;) {
    r = must(c->receive(30000));
    if (auto* chunk = r.msg->body_as_OutputChunk()) {
      got += chunk->data()->size();
      continue;
    }
    break;
  }
  REQUIRE(r.msg->body_type() == Body::ExecResult);
  CHECK(r.msg->body_as_ExecResult()->status() == proto::ExitStatus::exited);
  CHECK(got == total);
}

TEST_CASE("limits: connections and requests in flight") {
  Server s({"--max-connections", "2", "--max-in-flight", "1"});
  auto a = s.connect();
  auto b = s.connect();
  REQUIRE(a);
  REQUIRE(b);
  auto third = proto::Client::connect(s.socket());
  REQUIRE_FALSE(third);
  CHECK(third.error().message.find("--max-connections") != std::string::npos);

  REQUIRE(a->send(proto::make_exec(1, helper_args({"sleep", "0.5"}))));
  REQUIRE(a->send(proto::make_exec(2, helper_args({"exit", "0"}))));
  proto::Received r = must(a->receive(10000));
  CHECK(r.msg->request_id() == 2);
  REQUIRE(r.msg->body_type() == Body::Error);
  CHECK(r.msg->body_as_Error()->code() == ErrorCode::too_many_requests);
  r = must(final_for(*a, 1));
  CHECK(r.msg->body_type() == Body::ExecResult);
}

TEST_CASE("socket: 0700 directory, 0600 socket, one supervisor per path, stale file replaced") {
  TempDir d;
  std::string sock = d.path() + "/run/corral.sock";
  pid_t first = spawn_process({kCorral, "serve", "--socket", sock}, "", d.path() + "/first.log");
  REQUIRE(wait_until([&] { return proto::Client::connect_raw(sock).ok(); }, 20s));
  struct stat st {};
  REQUIRE(::stat((d.path() + "/run").c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0700);
  REQUIRE(::lstat(sock.c_str(), &st) == 0);
  CHECK(S_ISSOCK(st.st_mode));
  CHECK((st.st_mode & 0777) == 0600);

  auto second = cli({"serve", "--socket", sock});
  CHECK(second.exit_code == 1);
  CHECK(second.err.find("already serving") != std::string::npos);

  // SIGKILL leaves a stale socket file behind; the next supervisor replaces it.
  ::kill(first, SIGKILL);
  wait_process(first);
  REQUIRE(std::filesystem::exists(sock));
  pid_t third = spawn_process({kCorral, "serve", "--socket", sock}, "", d.path() + "/third.log");
  REQUIRE(wait_until([&] { return proto::Client::connect_raw(sock).ok(); }, 20s));
  CHECK(cli({"exec", "--", "true"}, sock).exit_code == 0);
  ::kill(third, SIGTERM);
  int status = wait_process(third);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  CHECK_FALSE(std::filesystem::exists(sock));
}

TEST_CASE("SIGTERM: the supervisor terminates its commands, removes the socket and exits 0") {
  Server s;
  TempDir d;
  std::string pidfile = d.path() + "/pids";
  auto c = s.connect();
  REQUIRE(c);
  auto a = helper_args({"tree", pidfile, "1"});
  a.workspaces = {d.path()};
  REQUIRE(c->send(proto::make_exec(1, a)));
  REQUIRE(wait_until([&] { return std::filesystem::exists(pidfile); }, 10s));
  CHECK(processes_with(pidfile).size() == 2);
  int status = s.stop();
  REQUIRE(status >= 0);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  CHECK_FALSE(std::filesystem::exists(s.socket()));
  CHECK(wait_until([&] { return processes_with(pidfile).empty(); }, 5s));
}

TEST_CASE("peers with another uid are refused unless --allow-uid") {
  if (::geteuid() != 0) {
    MESSAGE("skipped: switching to another uid needs root (this test runs as uid " << ::geteuid() << ")");
    return;
  }
  auto try_as_nobody = [](const std::string& sock) {
    pid_t child = ::fork();
    if (child == 0) {
      if (::setgid(65534) != 0 || ::setuid(65534) != 0) ::_exit(10);
      auto c = proto::Client::connect(sock);
      if (c) ::_exit(0);
      if (c.error().message.find("may not use this supervisor") != std::string::npos) ::_exit(1);
      ::_exit(2);  // some other failure (e.g. the directory mode kept us out)
    }
    int status = 0;
    ::waitpid(child, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  };
  {
    Server s;
    // The 0700 directory keeps another uid out before the credential check can.
    CHECK(try_as_nobody(s.socket()) == 2);
  }
  {
    Server s({"--allow-uid", "65533"});  // the dir and socket open up; the credential check gates
    ::chmod(s.dir().c_str(), 0711);       // the test's own temp dir, above the socket dir
    CHECK(try_as_nobody(s.socket()) == 1);
    CHECK(s.log().find("refused a connection from uid 65534") != std::string::npos);
  }
  {
    Server s({"--allow-uid", "65534"});
    ::chmod(s.dir().c_str(), 0711);
    CHECK(try_as_nobody(s.socket()) == 0);
  }
}

TEST_CASE("corral status and corral call speak for the supervisor") {
  Server s;
  auto st = cli({"status", "--json"}, s.socket());
  CHECK(st.exit_code == 0);
  CHECK(st.out.find("\"layers\":[") != std::string::npos);
  CHECK(st.out.find("\"socket\":\"" + s.socket() + "\"") != std::string::npos);
  auto plain = cli({"status"}, s.socket());
  CHECK(plain.exit_code == 0);
  CHECK(plain.out.find("layers") != std::string::npos);

  auto call = cli({"call", R"({body_type: "ExecRequest", body: {argv: ["echo", "hi"]}})"}, s.socket());
  CHECK(call.exit_code == 0);
  CHECK(call.out.find("\"body_type\": \"OutputChunk\"") != std::string::npos);
  CHECK(call.out.find("\"status\": \"exited\"") != std::string::npos);
  CHECK(call.out.find("\"request_id\": 1") != std::string::npos);

  auto bad = cli({"call", "{request_id: 1, body_type: \"Cancel\", body: {}}"}, s.socket());
  CHECK(bad.exit_code == 1);
  CHECK(bad.out.find("unknown_request_id") != std::string::npos);

  auto unparsable = cli({"call", "{not json"}, s.socket());
  CHECK(unparsable.exit_code == 2);

  auto none = cli({"status"}, s.dir() + "/no-such.sock");
  CHECK(none.exit_code == 1);
  CHECK(none.err.find("is `corral serve` running?") != std::string::npos);
}

TEST_CASE("a non-root supervisor runs commands as its own uid, mapped inside, and reports what it lacks") {
  if (::geteuid() != 0) {
    MESSAGE("skipped: starting a supervisor as another uid needs root (this test runs as uid " << ::geteuid() << ")");
    return;
  }
  TempDir d;
  ::chmod(d.path().c_str(), 0777);
  const std::string sock = d.path() + "/nobody/corral.sock";
  // Run `corral serve` and then the CLI as uid/gid 65534, as an unprivileged user would.
  auto as_nobody = [&](std::vector<std::string> argv, const std::string& out, const std::string& err) {
    pid_t pid = ::fork();
    if (pid == 0) {
      int o = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0666);
      int e = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0666);
      ::dup2(o, 1);
      ::dup2(e, 2);
      if (::setgroups(0, nullptr) != 0 || ::setgid(65534) != 0 || ::setuid(65534) != 0) ::_exit(90);
      std::vector<char*> args;
      for (auto& a : argv) args.push_back(a.data());
      args.push_back(nullptr);
      ::execv(args[0], args.data());
      ::_exit(91);
    }
    return pid;
  };
  // It dropped its own groups, and has no /etc/subgid range: the groups layer is accepted as
  // missing (escape_test 26 covers it).
  pid_t server = as_nobody({kCorral, "serve", "--socket", sock, "--temp-root", d.path(), "--allow-supplementary-groups"},
                           d.path() + "/serve.out", d.path() + "/serve.log");
  REQUIRE(wait_until([&] { return proto::Client::connect_raw(sock).ok(); }, 20s));
  pid_t exec = as_nobody({kCorral, "exec", "--socket", sock, "--json", "--sh", "id -u; touch /tmp/x && echo tmp-ok; touch /etc/x"},
                         d.path() + "/exec.out", d.path() + "/exec.err");
  int status = wait_process(exec);
  std::string out = read_file(d.path() + "/exec.out");
  CAPTURE(read_file(d.path() + "/exec.err"));
  CAPTURE(read_file(d.path() + "/serve.log"));
  CHECK(WIFEXITED(status));
  CHECK(out.find("\"stdout\":\"65534\\ntmp-ok\\n\"") != std::string::npos);
  CHECK(out.find("Read-only file system") != std::string::npos);
  CHECK(out.find("\"user-ns\"") != std::string::npos);
  // cgroups are root's here: a cap is refused by name rather than run unenforced.
  pid_t capped = as_nobody({kCorral, "exec", "--socket", sock, "--memory", "64M", "--", "true"}, d.path() + "/cap.out",
                           d.path() + "/cap.err");
  status = wait_process(capped);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 125);
  CHECK(read_file(d.path() + "/cap.err").find("cannot enforce cgroup-memory") != std::string::npos);
  ::kill(server, SIGTERM);
  status = wait_process(server);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}
