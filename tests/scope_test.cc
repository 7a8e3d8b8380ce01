// Scopes and background commands, end to end through the real binary.
#include <doctest/doctest.h>

#include <grp.h>

#include "tests/test_util.h"
#include "worker_proto/messages.h"

using namespace corral;
using namespace corral::test;
using namespace std::chrono_literals;

namespace {

std::uint64_t rss_kb(pid_t pid) {
  std::istringstream in(read_file("/proc/" + std::to_string(pid) + "/status"));
  for (std::string line; std::getline(in, line);)
    if (line.rfind("VmRSS:", 0) == 0) return std::stoull(line.substr(6));
  return 0;
}

std::string last_line(const std::string& out) {
  std::string s = out;
  while (!s.empty() && s.back() == '\n') s.pop_back();
  auto nl = s.rfind('\n');
  return nl == std::string::npos ? s : s.substr(nl + 1);
}

}  // namespace

TEST_CASE("a detached scope keeps its temp dir across commands until closed") {
  Server s;
  auto created = cli({"scope", "create"}, s.socket());
  REQUIRE(created.exit_code == 0);
  const std::string id = last_line(created.out);
  CHECK(id.rfind("s", 0) == 0);
  CHECK(cli({"exec", "--scope", id, "--sh", "echo kept > /tmp/f"}, s.socket()).exit_code == 0);
  auto again = cli({"exec", "--scope", id, "--", "cat", "/tmp/f"}, s.socket());
  CHECK(again.out == "kept\n");
  // File tools see the scope's /tmp too.
  auto read = cli({"read", "--scope", id, "/tmp/f"}, s.socket());
  CHECK(read.exit_code == 0);
  CHECK(read.out == "kept\n");
  auto list = cli({"scope", "list", "--json"}, s.socket());
  CHECK(list.out.find("\"id\":\"" + id + "\"") != std::string::npos);
  const auto pos = list.out.find("\"temp_dir\":\"", list.out.find("\"id\":\"" + id + "\"")) + 12;
  const std::string dir = list.out.substr(pos, list.out.find('"', pos) - pos);
  CHECK(std::filesystem::exists(dir + "/f"));

  CHECK(cli({"scope", "close", id}, s.socket()).exit_code == 0);
  CHECK(wait_until([&] { return !std::filesystem::exists(dir); }, 5s));
  auto gone = cli({"exec", "--scope", id, "--", "true"}, s.socket());
  CHECK(gone.exit_code == 125);
  CHECK(gone.err.find("no scope '" + id + "'") != std::string::npos);
  CHECK(cli({"scope", "close", id}, s.socket()).exit_code == 1);
}

TEST_CASE("background output is drained incrementally; the end is reported once") {
  Server s;
  TempDir d;
  const std::string go = d.path() + "/go";
  // Prints one line, waits for the test's signal file, prints another, exits 3.
  auto started = cli({"exec", "--background", "--workspace", d.path(), "--sh",
                      "echo first; while [ ! -e " + go + " ]; do sleep 0.05; done; echo second >&2; exit 3"},
                     s.socket());
  REQUIRE(started.exit_code == 0);
  const std::string id = last_line(started.out);
  CHECK(id.rfind("bg", 0) == 0);
  std::string seen;
  REQUIRE(wait_until([&] {
    auto p = cli({"poll", "--json", id}, s.socket());
    seen += p.out;
    return p.out.find("\"stdout\":\"first\\n\"") != std::string::npos;
  }, 10s));
  CHECK(seen.find("\"state\":\"running\"") != std::string::npos);
  // Nothing new yet: an empty poll.
  auto quiet = cli({"poll", "--json", id}, s.socket());
  CHECK(quiet.out.find("\"stdout\":\"\",\"stderr\":\"\"") != std::string::npos);
  std::ofstream(go) << "";
  std::string last;
  REQUIRE(wait_until([&] {
    last = cli({"poll", "--json", id}, s.socket()).out;
    return last.find("\"state\":\"exited\"") != std::string::npos || last.find("\"stderr\":\"second\\n\"") != std::string::npos;
  }, 10s));
  if (last.find("\"state\":\"exited\"") == std::string::npos)
    REQUIRE(wait_until([&] { return (last = cli({"poll", "--json", id}, s.socket()).out).find("\"state\":\"exited\"") != std::string::npos; }, 10s));
  CHECK(last.find("\"exit_code\":3") != std::string::npos);
  CHECK(last.find("\"stdout\":\"first") == std::string::npos);  // never delivered twice
  // The record is gone once its end has been seen.
  CHECK(cli({"poll", id}, s.socket()).exit_code == 1);
}

TEST_CASE("stop ends a background command; closing a parent scope ends its child's commands") {
  Server s;
  auto parent = last_line(cli({"scope", "create"}, s.socket()).out);
  auto child = last_line(cli({"scope", "create", "--parent", parent}, s.socket()).out);
  REQUIRE(!parent.empty());
  REQUIRE(!child.empty());
  const std::string marker = "corral-scope-test-" + std::to_string(::getpid());
  auto stopped = last_line(cli({"exec", "--background", "--scope", child, "--", kHelper, "sleep", "300", marker}, s.socket()).out);
  REQUIRE(wait_until([&] { return processes_with(marker).size() == 1; }, 10s));
  CHECK(cli({"stop", "--force", stopped}, s.socket()).exit_code == 0);
  REQUIRE(wait_until([&] { return processes_with(marker).empty(); }, 10s));
  // The process is gone; the supervisor notices through its pidfd a moment later.
  CliRun p;
  CHECK(wait_until([&] {
    p = cli({"poll", "--json", stopped}, s.socket());
    return p.out.find("\"state\":\"running\"") == std::string::npos;
  }, 10s));
  CHECK(p.out.find("\"state\":\"stopped\"") != std::string::npos);

  // A background command, a foreground one and a worker in the child scope; close the parent.
  REQUIRE(cli({"worker", "start", "w", "--scope", child, "--", CORRAL_ECHO_WORKER}, s.socket()).exit_code == 0);
  REQUIRE(processes_with(CORRAL_ECHO_WORKER).size() == 1);
  auto bg = last_line(cli({"exec", "--background", "--scope", child, "--", kHelper, "sleep", "300", marker + "-bg"}, s.socket()).out);
  pid_t fg = spawn_process({kCorral, "exec", "--socket", s.socket(), "--scope", child, "--", kHelper, "sleep", "300", marker + "-fg"});
  REQUIRE(wait_until([&] { return processes_with(marker + "-bg").size() == 1 && processes_with(marker + "-fg").size() >= 1; }, 10s));
  auto listed = cli({"scope", "list", "--json"}, s.socket()).out;
  const auto at = listed.find("\"temp_dir\":\"", listed.find("\"id\":\"" + child + "\"")) + 12;
  const std::string child_dir = listed.substr(at, listed.find('"', at) - at);
  CHECK(cli({"scope", "close", parent}, s.socket()).exit_code == 0);
  CHECK(wait_until([&] { return processes_with(marker + "-bg").empty(); }, 10s));
  CHECK(wait_until([&] { return processes_with(CORRAL_ECHO_WORKER).empty(); }, 10s));
  CHECK(cli({"worker", "list", "--json"}, s.socket()).out == "[]\n");
  int status = wait_process(fg, 10s);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 128 + SIGKILL);  // cancelled: killed by SIGKILL
  CHECK(wait_until([&] { return !std::filesystem::exists(child_dir); }, 5s));
  CHECK(cli({"scope", "list", "--json"}, s.socket()).out.find("\"id\":\"" + child + "\"") == std::string::npos);
}

TEST_CASE("a non-detached scope ends with the connection that created it") {
  Server s;
  std::string dir;
  {
    auto c = s.connect();
    REQUIRE(c);
    proto::ScopeArgs a;
    proto::Received r = must(c->call(1, proto::make_scope_create(1, a)));
    REQUIRE(r.msg->body_as_ScopeCreated());
    dir = proto::str(r.msg->body_as_ScopeCreated()->temp_dir());
    CHECK(std::filesystem::exists(dir));
  }
  CHECK(wait_until([&] { return !std::filesystem::exists(dir); }, 5s));
}

TEST_CASE("another uid cannot act on a scope it did not create") {
  if (::geteuid() != 0) {
    MESSAGE("skipped: acting as another uid needs root (this test runs as uid " << ::geteuid() << ")");
    return;
  }
  Server s({"--allow-uid", "65534"});
  ::chmod(s.dir().c_str(), 0711);
  auto id = last_line(cli({"scope", "create"}, s.socket()).out);
  REQUIRE(!id.empty());
  pid_t child = ::fork();
  if (child == 0) {
    if (::setgroups(0, nullptr) != 0 || ::setgid(65534) != 0 || ::setuid(65534) != 0) ::_exit(10);
    auto c = proto::Client::connect(s.socket());
    if (!c) ::_exit(11);
    auto r = (*c)->call(1, proto::make_scope_close(1, id));
    if (!r) ::_exit(12);
    const proto::Error* e = r->msg->body_as_Error();
    if (!e || e->code() != proto::ErrorCode::permission_denied) ::_exit(13);
    proto::ExecArgs a;
    a.argv = {"true"};
    a.scope = id;
    r = (*c)->call(2, proto::make_exec(2, a));
    if (!r) ::_exit(14);
    e = r->msg->body_as_Error();
    if (!e || e->code() != proto::ErrorCode::permission_denied) ::_exit(15);
    r = (*c)->call(3, proto::make_scope_list(3));
    if (!r || !r->msg->body_as_ScopeList()) ::_exit(16);
    if (r->msg->body_as_ScopeList()->scopes() && r->msg->body_as_ScopeList()->scopes()->size() != 0) ::_exit(17);
    ::_exit(0);
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  CHECK(cli({"scope", "close", id}, s.socket()).exit_code == 0);  // its owner still can
}

TEST_CASE("a background start whose id never reaches its client is terminated") {
  Server s;
  const std::string marker = "corral-abandoned-" + std::to_string(::getpid());
  {
    auto c = must(proto::Client::connect(s.socket()));
    proto::ExecArgs a;
    a.argv = {kHelper, "sleep", "300", marker};
    a.background = true;
    REQUIRE(c->send(proto::make_exec(1, a)));
  }  // gone before the reply could be read
  // Whether the supervisor saw the close first or its write failed, the command must end.
  std::this_thread::sleep_for(500ms);
  CHECK(wait_until([&] { return processes_with(marker).empty(); }, 10s));
}

TEST_CASE("a background start whose reply the client left unread is terminated; a read one is not") {
  Server s;
  const std::string marker = "corral-unread-" + std::to_string(::getpid());
  proto::ExecArgs a;
  a.argv = {kHelper, "sleep", "300", marker};
  a.background = true;
  {
    auto c = must(proto::Client::connect(s.socket()));
    REQUIRE(c->send(proto::make_exec(1, a)));
    pollfd ready{c->fd(), POLLIN, 0};
    REQUIRE(::poll(&ready, 1, 10000) == 1);  // the reply is written, and left unread
    REQUIRE(wait_until([&] { return processes_with(marker).size() == 1; }, 10s));
  }
  CHECK(wait_until([&] { return processes_with(marker).empty(); }, 10s));

  // The same start, its reply read before the client goes: the command stays.
  const std::string kept = marker + "-read";
  a.argv = {kHelper, "sleep", "300", kept};
  std::string id;
  {
    auto c = must(proto::Client::connect(s.socket()));
    auto reply = must(c->call(1, proto::make_exec(1, a)));
    REQUIRE(reply.msg->body_as_BackgroundStarted());
    id = proto::str(reply.msg->body_as_BackgroundStarted()->id());
  }
  REQUIRE(wait_until([&] { return processes_with(kept).size() == 1; }, 10s));
  std::this_thread::sleep_for(500ms);
  CHECK(processes_with(kept).size() == 1);
  CHECK(cli({"stop", "--force", id}, s.socket()).exit_code == 0);
  CHECK(wait_until([&] { return processes_with(kept).empty(); }, 10s));
}

TEST_CASE("a scope holds at most 256 background commands; the limit is checked before launch") {
  Server s;
  const std::string id = last_line(cli({"scope", "create"}, s.socket()).out);
  auto c = s.connect();
  REQUIRE(c);
  const std::string marker = "corral-bg-limit-" + std::to_string(::getpid());
  for (int i = 0; i < 256; ++i) {
    proto::ExecArgs a;
    a.argv = {kHelper, "sleep", "300", marker};
    a.background = true;
    a.scope = id;
    const auto rid = static_cast<std::uint64_t>(i + 1);
    proto::Received r = must(c->call(rid, proto::make_exec(rid, a)));
    REQUIRE(r.msg->body_as_BackgroundStarted());
  }
  proto::ExecArgs a;
  a.argv = {kHelper, "sleep", "300", marker};
  a.background = true;
  a.scope = id;
  proto::Received r = must(c->call(999, proto::make_exec(999, a)));
  REQUIRE(r.msg->body_as_Error());
  CHECK(proto::str(r.msg->body_as_Error()->message()).find("the limit is 256") != std::string::npos);
  // Each was started (BackgroundStarted); launches run off the loop, so wait for all 256.
  CHECK(wait_until([&] { return processes_with(marker).size() == 256; }, 60s));
  CHECK(processes_with(marker).size() == 256);
  CHECK(cli({"scope", "close", id}, s.socket()).exit_code == 0);
  CHECK(wait_until([&] { return processes_with(marker).empty(); }, 30s));
}

TEST_CASE("a background command has no total output cap and no deadline unless it names them") {
  Server s;
  auto start = [&](std::vector<std::string> opts, std::vector<std::string> argv) {
    std::vector<std::string> args = {"exec", "--background"};
    args.insert(args.end(), opts.begin(), opts.end());
    args.push_back("--");
    args.insert(args.end(), argv.begin(), argv.end());
    auto r = cli(args, s.socket());
    REQUIRE(r.exit_code == 0);
    return last_line(r.out);
  };
  // Polled until it ends; returns the bytes it wrote and its final state line.
  auto drain = [&](const std::string& id, std::string& state) {
    auto c = s.connect();
    REQUIRE(c);
    std::size_t got = 0;
    std::uint64_t rid = 0;
    REQUIRE(wait_until([&] {
      ++rid;
      proto::Received r = must(c->call(rid, proto::make_poll(rid, id)));
      const proto::PollReply* p = r.msg->body_as_PollReply();
      REQUIRE(p);
      if (p->stdout()) got += p->stdout()->size();
      state = proto::str(p->state());
      if (state != "running" && p->result()) state += std::string(" ") + proto::EnumNameExitStatus(p->result()->status());
      return state.rfind("running", 0) != 0;
    }, 60s));
    return got;
  };
  // 3 MiB, well past the foreground default cap of 1M: all of it, and it exits.
  std::string state;
  CHECK(drain(start({}, {kHelper, "write", std::to_string(3 << 20)}), state) == (3u << 20));
  CHECK(state == "exited exited");
  // A cap it names is its whole life's.
  CHECK(drain(start({"--max-output", "100K"}, {kHelper, "write", std::to_string(3 << 20)}), state) == 100u * 1024);
  CHECK(state == "failed output_limit");
  // A deadline it names ends it.
  drain(start({"--timeout", "300ms"}, {kHelper, "sleep", "30"}), state);
  CHECK(state == "failed timed_out");
}

TEST_CASE("a uid's unpolled background output is held within its 64 MiB budget; past it output pauses, none is lost") {
  Server s;
  const std::string id = last_line(cli({"scope", "create"}, s.socket()).out);
  auto c = s.connect();
  REQUIRE(c);
  // 128 commands of 1 MiB each, none polled: twice the budget. Those whose output fits end;
  // the others wait on their pipes (paused), and the supervisor holds about the budget.
  constexpr int kCommands = 128;
  constexpr long kBytes = 1 << 20;
  const std::string marker = "corral-bg-budget-" + std::to_string(::getpid());
  std::vector<std::string> ids;
  for (int i = 0; i < kCommands; ++i) {
    proto::ExecArgs a;
    a.argv = {kHelper, "write", std::to_string(kBytes), "out", marker};
    a.background = true;
    a.scope = id;
    const auto rid = static_cast<std::uint64_t>(i + 1);
    proto::Received r = must(c->call(rid, proto::make_exec(rid, a)));
    REQUIRE(r.msg->body_as_BackgroundStarted());
    ids.push_back(proto::str(r.msg->body_as_BackgroundStarted()->id()));
  }
  // Each command's megabyte fits its pipe, so every one of them ends; those past the budget
  // leave the rest of their output in their pipes, paused.
  REQUIRE(wait_until([&] { return processes_with(marker).empty(); }, 60s));
  std::uint64_t rss = 0;
  REQUIRE(wait_until([&] {
    const std::uint64_t before = rss_kb(s.pid());
    std::this_thread::sleep_for(500ms);
    rss = rss_kb(s.pid());
    return rss == before;
  }, 30s));
#if defined(__SANITIZE_ADDRESS__)
  // ASan's quarantine keeps every freed buffer resident (up to 256 MB): the supervisor's RSS
  // says nothing about what it holds. The main build checks it; the bytes below are checked here.
  MESSAGE("ASan build: the supervisor's RSS (" << rss << " kB) is not checked (freed memory stays in ASan's quarantine)");
#else
  CHECK(rss < 112 * 1024);  // the budget and the supervisor, not 128 MiB of output
#endif
  // Every byte of every command arrives, polled in turn (paused ones resume as the budget
  // frees), although each command ended long ago: a paused pipe is not closed on its reader.
  std::uint64_t rid = 1000;
  for (const std::string& bg : ids) {
    CAPTURE(bg);
    std::size_t got = 0;
    bool ended = false;
    REQUIRE(wait_until([&] {
      ++rid;
      proto::Received r = must(c->call(rid, proto::make_poll(rid, bg)));
      const proto::PollReply* p = r.msg->body_as_PollReply();
      if (!p) return true;
      if (p->stdout()) got += p->stdout()->size();
      ended = proto::str(p->state()) != "running";
      return ended;
    }, 30s));
    CHECK(ended);
    CHECK(got == static_cast<std::size_t>(kBytes));
  }
  CHECK(processes_with(marker).empty());
  CHECK(cli({"scope", "close", id}, s.socket()).exit_code == 0);
}

TEST_CASE("a scope's prepared sandboxes end when it closes, whatever records of its commands remain") {
  if (::geteuid() != 0) {
    MESSAGE("skipped: prepared sandboxes are a root supervisor's (uid " << ::geteuid() << ")");
    return;
  }
  Server s;
  // The supervisor's children that are prepared sandboxes' servers: named corral-init, and in
  // no PID namespace of their own (an init has a second NSpid).
  auto servers = [&] {
    std::vector<pid_t> out;
    std::vector<pid_t> children;
    {
      std::istringstream list(read_file("/proc/" + std::to_string(s.pid()) + "/task/" + std::to_string(s.pid()) + "/children"));
      for (pid_t p; list >> p;) children.push_back(p);
    }
    // Children of the supervisor's other threads (the launcher pool clones too).
    for (const auto& t : std::filesystem::directory_iterator("/proc/" + std::to_string(s.pid()) + "/task")) {
      if (t.path().filename() == std::to_string(s.pid())) continue;
      std::istringstream list(read_file(t.path().string() + "/children"));
      for (pid_t p; list >> p;) children.push_back(p);
    }
    for (pid_t p : children) {
      const std::string status = read_file("/proc/" + std::to_string(p) + "/status");
      const auto ns = status.find("NSpid:");
      if (status.find("Name:\tcorral-init") == std::string::npos || ns == std::string::npos) continue;
      const std::string line = status.substr(ns, status.find('\n', ns) - ns);
      if (std::count(line.begin(), line.end(), '\t') == 1) out.push_back(p);
    }
    return out;
  };
  const std::string id = last_line(cli({"scope", "create"}, s.socket()).out);
  REQUIRE(cli({"exec", "--scope", id, "--", "true"}, s.socket()).exit_code == 0);
  REQUIRE(cli({"exec", "--scope", id, "--", "true"}, s.socket()).exit_code == 0);  // the second prepares
  REQUIRE_MESSAGE(servers().size() == 1, s.log());
  // A background command's record (kept until polled) does not keep the server.
  auto bg = cli({"exec", "--background", "--scope", id, "--", "true"}, s.socket());
  REQUIRE(bg.exit_code == 0);
  CHECK(cli({"scope", "close", id}, s.socket()).exit_code == 0);
  CHECK(wait_until([&] { return servers().empty(); }, 5s));
}
