// The command line as people type it, through the real binary and a real supervisor.
//
// The matrix: every repeatable option of every subcommand (found through --help, where each
// one says "(repeatable)") is put last before `--` and last before a positional argument, and
// must take exactly one value there: the option has its effect, and every word after it
// reaches the program or the positional argument unchanged. A repeatable option that the
// matrix has no case for fails the test, so a new one cannot be added untested.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <cstring>
#include <functional>
#include <map>
#include <regex>
#include <set>

#include "tests/test_util.h"

using namespace corral;
using namespace corral::test;

namespace {

// Runs the CLI with `input` on its stdin (cli() gives it /dev/null).
CliRun run(std::vector<std::string> args, const std::string& input = "") {
  TempDir d;
  {
    std::ofstream(d.path() + "/in", std::ios::binary) << input;
  }
  args.insert(args.begin(), kCorral);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, (d.path() + "/in").c_str(), O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, (d.path() + "/out").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&fa, 2, (d.path() + "/err").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = -1;
  REQUIRE(::posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), environ) == 0);
  posix_spawn_file_actions_destroy(&fa);
  int status = wait_process(pid);
  CliRun r;
  r.exit_code = (status >= 0 && WIFEXITED(status)) ? WEXITSTATUS(status) : -1;
  r.out = read_file(d.path() + "/out");
  r.err = read_file(d.path() + "/err");
  return r;
}

// Every subcommand path, from the binary's own --help (so a new subcommand is seen too).
std::vector<std::vector<std::string>> subcommands() {
  std::vector<std::vector<std::string>> out;
  std::function<void(std::vector<std::string>)> walk = [&](std::vector<std::string> path) {
    auto args = path;
    args.push_back("--help");
    CliRun help = run(args);
    REQUIRE(help.exit_code == 0);
    auto at = help.out.find("Subcommands:");
    if (at == std::string::npos) {
      out.push_back(path);
      return;
    }
    std::istringstream in(help.out.substr(at));
    std::string line;
    std::getline(in, line);
    static const std::regex entry(R"(^  ([a-z][a-z-]*)\s)");
    std::smatch m;
    while (std::getline(in, line))
      if (std::regex_search(line, m, entry)) {
        auto sub = path;
        sub.push_back(m[1]);
        walk(sub);
      }
  };
  walk({});
  return out;
}

// The options whose --help line says "(repeatable)".
std::vector<std::string> repeatable_options(const std::vector<std::string>& path) {
  auto args = path;
  args.push_back("--help");
  CliRun help = run(args);
  REQUIRE(help.exit_code == 0);
  // CLI11 prints "  --name TYPE ...   help"; a help text may wrap onto the next lines.
  std::vector<std::string> out;
  static const std::regex option(R"(^\s+(?:-\w,)?(--[a-z][a-z-]*))");
  std::istringstream in(help.out);
  std::string line, current;
  std::set<std::string> seen;
  while (std::getline(in, line)) {
    std::smatch m;
    if (std::regex_search(line, m, option)) current = m[1];
    if (!current.empty() && line.find("(repeatable)") != std::string::npos && seen.insert(current).second)
      out.push_back(current);
  }
  return out;
}

std::string join(const std::vector<std::string>& words) {
  std::string s;
  for (const auto& w : words) s += (s.empty() ? "" : " ") + w;
  return s;
}

// A directory under /var/tmp (the sandbox's /tmp is its own), readable by the sandbox uid.
struct Workspace {
  std::string path;
  Workspace() {
    path = "/var/tmp/corral-cli-XXXXXX";
    REQUIRE(::mkdtemp(path.data()) != nullptr);
    REQUIRE(::chmod(path.c_str(), 0755) == 0);
  }
  ~Workspace() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  std::string put(const std::string& name, const std::string& data) const {
    std::string p = path + "/" + name;
    std::ofstream(p, std::ios::binary) << data;
    ::chmod(p.c_str(), 0644);
    return p;
  }
};

// Where a repeatable option goes in a matrix case.
enum class Place { before_dashdash, before_positional };

// One case: runs the command with OPTION VALUE at `place` and checks its effect.
using Case = std::function<void(const std::string& socket, Place place)>;

// The program's own arguments, dash-words included, must arrive untouched: echo prints them.
const std::vector<std::string> kProgram = {"/bin/echo", "-n", "one", "-c", "--json", "two"};
const std::string kProgramOut = "one -c --json two";
const std::string kEchoWorker = CORRAL_ECHO_WORKER;

}  // namespace

TEST_CASE("CLI matrix: each repeatable option takes one value, last before -- and before a positional") {
  Server s;
  Workspace ws;
  ws.put("f", "content\n");

  // exec OPTION VALUE -- PROGRAM ARGS, and exec OPTION VALUE PROGRAM (a positional, no --).
  // `effect` runs with the same placement; `check` proves the option had its value.
  using Check = std::function<void(const CliRun&)>;
  auto exec_case = [&](std::vector<std::string> option, std::vector<std::string> effect, Check check) -> Case {
    return [=](const std::string& socket, Place place) {
      std::vector<std::string> args = {"exec", "--socket", socket};
      args.insert(args.end(), option.begin(), option.end());
      if (place == Place::before_dashdash) {
        args.push_back("--");
        auto program = args;
        program.insert(program.end(), kProgram.begin(), kProgram.end());
        CAPTURE(join(program));
        auto r = run(program);
        CHECK(r.err == "");
        CHECK(r.exit_code == 0);
        CHECK(r.out == kProgramOut);
      }
      // Without --, the program name is the first positional; its arguments carry no dashes.
      args.insert(args.end(), effect.begin(), effect.end());
      CAPTURE(join(args));
      check(run(args));
    };
  };
  auto prints = [](std::string out) -> Check {
    return [out](const CliRun& r) {
      CHECK(r.err == "");
      CHECK(r.exit_code == 0);
      CHECK(r.out == out);
    };
  };
  auto fails = [](const CliRun& r) {
    CHECK(r.exit_code == 1);
    CHECK(r.out == "");
  };
  std::string secret = ws.put("secret", "hidden\n");
  std::string guarded = ws.put("guarded", "");
  // Controls: without the option, the same command succeeds (so the refusals below are the
  // options' doing).
  REQUIRE(run({"exec", "--socket", s.socket(), "--workspace", ws.path, "--", "/bin/cat", secret}).out == "hidden\n");
  REQUIRE(run({"exec", "--socket", s.socket(), "--workspace", ws.path, "--", "/usr/bin/touch", guarded}).exit_code == 0);

  std::map<std::string, Case> cases;
  cases["exec --env"] = exec_case({"--env", "CORRAL_A=1"}, {"/usr/bin/printenv", "CORRAL_A"}, prints("1\n"));
  cases["exec --workspace"] =
      exec_case({"--workspace", ws.path}, {"/bin/cp", ws.path + "/f", ws.path + "/copy"}, prints(""));
  cases["exec --deny-read"] = exec_case({"--workspace", ws.path, "--deny-read", secret}, {"/bin/cat", secret}, fails);
  cases["exec --protect"] = exec_case({"--workspace", ws.path, "--protect", guarded}, {"/usr/bin/touch", guarded}, fails);
  cases["exec --bind"] = exec_case({"--bind", ws.path + ":/mnt:ro"}, {"/bin/cat", "/mnt/f"}, prints("content\n"));
  // A host socket under the host's /tmp whose listener is gone: without --allow-socket the
  // sandbox does not even see it (ENOENT); allowed, it is shown at its own path and the
  // connect gets as far as the socket (ECONNREFUSED).
  const std::string dead_socket = ws.path + "/dead.sock";
  {
    int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::memcpy(a.sun_path, dead_socket.c_str(), dead_socket.size() + 1);
    REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    ::close(fd);
    REQUIRE(::chmod(dead_socket.c_str(), 0777) == 0);  // the sandbox uid's own right is checked too
  }
  REQUIRE(run({"exec", "--socket", s.socket(), "--", kHelper, "unix-connect", dead_socket}).out == "errno=ENOENT\n");
  cases["exec --allow-socket"] =
      exec_case({"--allow-socket", dead_socket}, {kHelper, "unix-connect", dead_socket}, prints("errno=ECONNREFUSED\n"));

  // read/write/ls OPTION VALUE PATH (a positional).
  cases["read --workspace"] = [&](const std::string& socket, Place) {
    auto r = run({"read", "--socket", socket, "--workspace", ws.path, "f"});
    CHECK(r.exit_code == 0);
    CHECK(r.out == "content\n");
  };
  cases["write --workspace"] = [&](const std::string& socket, Place) {
    auto r = run({"write", "--socket", socket, "--workspace", ws.path, "written"}, "new\n");
    CHECK(r.err == "");
    CHECK(r.exit_code == 0);
    CHECK(read_file(ws.path + "/written") == "new\n");
  };
  cases["ls --workspace"] = [&](const std::string& socket, Place) {
    auto r = run({"ls", "--socket", socket, "--workspace", ws.path, "."});
    CHECK(r.err == "");
    CHECK(r.exit_code == 0);
    CHECK(r.out.find("f\n") != std::string::npos);
  };
  // scope create has no positional and no --: the option is last on the line.
  cases["scope create --workspace"] = [&](const std::string& socket, Place) {
    auto r = run({"scope", "create", "--socket", socket, "--workspace", ws.path});
    CHECK(r.exit_code == 0);
    std::string id = r.out.substr(0, r.out.find('\n'));
    CHECK_FALSE(id.empty());
    auto list = run({"scope", "list", "--socket", socket, "--json"});
    CHECK(list.out.find("\"workspaces\":[\"" + ws.path + "\"") != std::string::npos);
    CHECK(run({"scope", "close", "--socket", socket, id}).exit_code == 0);
  };
  // The scope's own --deny-read and --protect apply to what runs in it.
  cases["scope create --deny-read"] = [&](const std::string& socket, Place) {
    auto r = run({"scope", "create", "--socket", socket, "--workspace", ws.path, "--deny-read", secret});
    CHECK(r.exit_code == 0);
    std::string id = r.out.substr(0, r.out.find('\n'));
    fails(run({"exec", "--socket", socket, "--scope", id, "--", "/bin/cat", secret}));
    CHECK(run({"scope", "close", "--socket", socket, id}).exit_code == 0);
  };
  cases["scope create --protect"] = [&](const std::string& socket, Place) {
    auto r = run({"scope", "create", "--socket", socket, "--workspace", ws.path, "--protect", guarded});
    CHECK(r.exit_code == 0);
    std::string id = r.out.substr(0, r.out.find('\n'));
    fails(run({"exec", "--socket", socket, "--scope", id, "--", "/usr/bin/touch", guarded}));
    CHECK(run({"scope", "close", "--socket", socket, id}).exit_code == 0);
  };
  // worker start OPTION VALUE NAME -- PROGRAM, and NAME OPTION VALUE -- PROGRAM.
  cases["worker start --workspace"] = [&](const std::string& socket, Place place) {
    std::string name = place == Place::before_dashdash ? "w-dashdash" : "w-positional";
    std::vector<std::string> args = {"worker", "start", "--socket", socket};
    if (place == Place::before_dashdash) args.insert(args.end(), {name, "--workspace", ws.path});
    else args.insert(args.end(), {"--workspace", ws.path, name});
    args.insert(args.end(), {"--", kEchoWorker, "-x"});  // its arguments, dashes included, arrive
    CAPTURE(join(args));
    auto r = run(args);
    CHECK(r.err.find("worker " + name + " started") != std::string::npos);
    CHECK(r.exit_code == 0);
    auto list = run({"worker", "list", "--socket", socket, "--json"});
    CHECK(list.out.find("\"argv\":[\"" + kEchoWorker + "\",\"-x\"]") != std::string::npos);
    auto e = run({"worker", "eval", "--socket", socket, "--request", "hi", name});
    CHECK(e.out == "echo:hi");
    CHECK(run({"worker", "stop", "--socket", socket, name}).exit_code == 0);
  };
  // The same dead socket, reached from the shipped Python worker only when allowed.
  auto py_connect = [&](const std::string& socket, const std::string& name) {
    // JSON by hand: the code's newlines as \n, its quotes as \".
    const std::string req = R"({"code": "import socket\ns = socket.socket(socket.AF_UNIX)\ntry:\n    s.connect(\")" +
                            dead_socket + R"(\")\n    r = 0\nexcept OSError as e:\n    r = e.errno\nr"})";
    return run({"worker", "eval", "--socket", socket, "--request", req, name}).out;
  };
  cases["worker start --allow-socket"] = [&](const std::string& socket, Place place) {
    std::string name = place == Place::before_dashdash ? "ws-dashdash" : "ws-positional";
    std::vector<std::string> args = {"worker", "start", "--socket", socket};
    if (place == Place::before_dashdash) args.insert(args.end(), {"--python", name, "--allow-socket", dead_socket});
    else args.insert(args.end(), {"--python", "--allow-socket", dead_socket, name});
    CAPTURE(join(args));
    auto r = run(args);
    CHECK(r.exit_code == 0);
    CHECK(py_connect(socket, name).find("\"result\": \"" + std::to_string(ECONNREFUSED) + "\"") != std::string::npos);
    CHECK(run({"worker", "stop", "--socket", socket, name}).exit_code == 0);
  };
  // Control: without it the worker does not even see the socket.
  REQUIRE(run({"worker", "start", "--socket", s.socket(), "--python", "no-socket"}).exit_code == 0);
  REQUIRE(py_connect(s.socket(), "no-socket").find("\"result\": \"" + std::to_string(ENOENT) + "\"") != std::string::npos);
  REQUIRE(run({"worker", "stop", "--socket", s.socket(), "no-socket"}).exit_code == 0);
  // mcp has neither: the option is last on the line; the session's commands carry it.
  auto mcp_call = [&](const std::string& socket, const std::vector<std::string>& options, const std::string& tool,
                      const std::string& arguments) {
    std::vector<std::string> args = {"mcp", "--socket", socket};
    args.insert(args.end(), options.begin(), options.end());
    std::string input = R"({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":")" + tool +
                        R"(","arguments":)" + arguments + "}}\n";
    CAPTURE(join(args));
    auto r = run(args, input);
    CHECK(r.exit_code == 0);
    return r.out;
  };
  cases["mcp --workspace"] = [&](const std::string& socket, Place) {
    auto out = mcp_call(socket, {"--workspace", ws.path}, "list_dir", "{}");
    CHECK(out.find(R"("name":"f")") != std::string::npos);
  };
  cases["mcp --deny-read"] = [&](const std::string& socket, Place) {
    auto out = mcp_call(socket, {"--workspace", ws.path, "--deny-read", secret}, "exec", R"({"argv":["/bin/cat",")" + secret + R"("]})");
    CHECK(out.find(R"("isError":true)") != std::string::npos);
    CHECK(out.find("hidden") == std::string::npos);
  };
  cases["mcp --protect"] = [&](const std::string& socket, Place) {
    auto out = mcp_call(socket, {"--workspace", ws.path, "--protect", guarded}, "exec", R"({"argv":["/usr/bin/touch",")" + guarded + R"("]})");
    CHECK(out.find(R"("isError":true)") != std::string::npos);
    CHECK(out.find(R"("exit_code":1)") != std::string::npos);
  };
  // serve has neither: the option is last on the line, and the supervisor it starts serves.
  cases["serve --allow-uid"] = [&](const std::string&, Place) {
    Server other({"--allow-uid", "4242", "--allow-uid", "4243"});
    auto r = run({"status", "--socket", other.socket()});
    CHECK(r.exit_code == 0);
  };

  int covered = 0;
  for (const auto& path : subcommands()) {
    for (const auto& option : repeatable_options(path)) {
      std::string key = join(path) + " " + option;
      CAPTURE(key);
      auto it = cases.find(key);
      REQUIRE_MESSAGE(it != cases.end(), "no CLI matrix case for the repeatable option `corral " << key << "`");
      it->second(s.socket(), Place::before_dashdash);
      it->second(s.socket(), Place::before_positional);
      ++covered;
    }
  }
  CHECK(covered == static_cast<int>(cases.size()));
  // The sandbox really ran the cp: --workspace took its one value.
  CHECK(read_file(ws.path + "/copy") == "content\n");
}

TEST_CASE("CLI: the issue's own command lines") {
  Server s;
  Workspace ws;
  ws.put("a", "");
  auto r = run({"exec", "--socket", s.socket(), "--env", "A=1", "--", "sh", "-c", "echo $A"});
  CHECK(r.out == "1\n");
  CHECK(r.exit_code == 0);
  r = run({"ls", "--socket", s.socket(), "--workspace", ws.path, "."});
  CHECK(r.out == "a\n");
  CHECK(r.exit_code == 0);
  // Everything after -- belongs to the program, even words that name corral's options.
  r = run({"exec", "--socket", s.socket(), "--env", "A=1", "--", "/bin/echo", "--env", "B=2", "--", "--json"});
  CHECK(r.out == "--env B=2 -- --json\n");
  // A program's dash-words without -- are a usage error that says where they go.
  r = run({"exec", "--socket", s.socket(), "sh", "-c", "true"});
  CHECK(r.exit_code == 125);  // exec's own failures are 125, never a status a program may use
  CHECK(r.err.find("after `--`") != std::string::npos);
  CHECK(r.err.find("unknown option -c") != std::string::npos);
}

TEST_CASE("CLI: an option nobody defines is named as unknown, not blamed on the words after it") {
  for (const auto& [args, name] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"exec", "--time", "1", "--", "true"}, "--time"},
           {{"exec", "--foo", "--", "true"}, "--foo"},
           {{"exec", "--foo=1", "--", "true"}, "--foo"},
           {{"status", "--bogus"}, "--bogus"},
           {{"scope", "create", "--workspaces", "/tmp"}, "--workspaces"},
       }) {
    CAPTURE(join(args));
    auto r = run(args);
    CHECK(r.exit_code == (args[0] == "exec" ? 125 : 2));
    CHECK(r.err.find("corral: unknown option " + name + " ") == 0);
  }
}

TEST_CASE("CLI: typed options refuse values out of their bounds, naming the bound") {
  struct Bad {
    std::vector<std::string> args;
    std::string says;
  };
  for (const Bad& bad : std::vector<Bad>{
           {{"exec", "--timeout", "0", "--", "true"}, "under the minimum 1ms"},
           {{"exec", "--timeout", "25h", "--", "true"}, "over the maximum 24h"},
           {{"exec", "--grace", "2m", "--", "true"}, "over the maximum 1m"},
           {{"exec", "--max-output", "65M", "--", "true"}, "over the maximum 64M"},
           {{"exec", "--memory", "1M", "--", "true"}, "under the minimum 4M"},
           {{"exec", "--pids", "1000001", "--", "true"}, "not in range 0 to 1000000"},
           {{"exec", "--memory", "0K1", "--", "true"}, "--memory"},
           {{"exec", "--cpus", "0.005", "--", "true"}, "--cpus: '0.005' is under the minimum 0.01"},
           {{"exec", "--pids", "-1", "--", "true"}, "--pids"},
           {{"exec", "--cpus", "0", "--", "true"}, "--cpus"},
           {{"exec", "--cpu-time", "1ms", "--", "true"}, "under the minimum 10ms"},
           {{"exec", "--mode", "bogus", "--", "true"}, "unknown mode 'bogus'"},
           {{"exec", "--net", "open", "--", "true"}, "unknown network policy 'open'"},
           {{"exec", "--env", "=1", "--", "true"}, "NAME=VALUE"},
           {{"exec", "--timeout", "10years", "--", "true"}, "unknown duration suffix"},
           {{"ls", "--max-entries", "10001", "x"}, "not in range 1 to 10000"},
           {{"read", "--max-bytes", "0", "x"}, "under the minimum"},
           {{"worker", "start", "--memory", "lots", "w", "--python"}, "--memory"},
           {{"worker", "eval", "--timeout", "0", "w"}, "--timeout"},
           {{"serve", "--max-frame", "5G"}, "over the maximum"},
       }) {
    CAPTURE(join(bad.args));
    auto r = run(bad.args);
    CHECK(r.exit_code == (bad.args[0] == "exec" ? 125 : 2));
    CHECK(r.err.find("corral: ") == 0);
    CHECK(r.err.find(bad.says) != std::string::npos);
  }
}

TEST_CASE("CLI: --stdin reads its source up to the limit and no further; --bind names its mode or nothing") {
  Server s;
  auto r = run({"exec", "--socket", s.socket(), "--stdin", "-", "--", "/bin/cat"}, "from stdin\n");
  CHECK(r.exit_code == 0);
  CHECK(r.out == "from stdin\n");
  Workspace ws;
  TempDir d;
  r = run({"exec", "--socket", s.socket(), "--stdin", ws.put("in", "from a file"), "--", "/bin/cat"});
  CHECK(r.out == "from a file");
  // An endless source is refused once past the limit (a read to its end would never end).
  r = run({"exec", "--socket", s.socket(), "--stdin", "/dev/zero", "--", "/bin/cat"});
  CHECK(r.exit_code == 125);
  CHECK(r.err.find("--stdin: more than 8M (the limit); nothing was done") != std::string::npos);
  r = run({"exec", "--socket", s.socket(), "--stdin", d.path(), "--", "/bin/cat"});
  CHECK(r.exit_code == 125);
  CHECK(r.err.find("is a directory") != std::string::npos);
  r = run({"exec", "--socket", s.socket(), "--stdin", d.path() + "/missing", "--", "/bin/cat"});
  CHECK(r.exit_code == 125);
  CHECK(r.err.find("cannot open") != std::string::npos);
  // corral write reads its stdin up to its own limit (1M) and no further.
  r = run({"write", "--socket", s.socket(), "--workspace", ws.path, ws.path + "/big"}, std::string((1 << 20) + 1, 'x'));
  CHECK(r.exit_code == 1);
  CHECK(r.err.find("write: more than 1M (the limit); nothing was done") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(ws.path + "/big"));
  // Without --scope, /tmp is the command's own scope's, gone when it ends: refused, not lost.
  for (const std::string tool : {"write", "read", "ls"}) {
    r = run({tool, "--socket", s.socket(), "/tmp/x.txt"}, "data");
    CHECK(r.exit_code == 2);
    CHECK(r.err.find("name the scope with --scope ID") != std::string::npos);
  }
  // A mistyped mode is no part of the target path.
  for (const std::string mode : {"RW", "readonly", "xx"}) {
    r = run({"exec", "--socket", s.socket(), "--bind", d.path() + ":/mnt/w:" + mode, "--", "/bin/true"});
    CHECK(r.exit_code == 125);
    CHECK(r.err.find("unknown mode '" + mode + "' (ro or rw)") != std::string::npos);
  }
}

TEST_CASE("CLI: a socket that accepts and never answers the hello ends the client with a reason") {
  TempDir d;
  const std::string path = d.path() + "/silent.sock";
  UniqueFd listener(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof addr.sun_path - 1);
  REQUIRE(::bind(listener.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  REQUIRE(::listen(listener.get(), 8) == 0);  // connects complete in the backlog; nobody answers
  const auto start = std::chrono::steady_clock::now();
  auto r = cli({"status"}, path);
  const auto took = std::chrono::steady_clock::now() - start;
  CHECK(r.exit_code != 0);
  CHECK(r.err.find("did not answer the hello within 10 s") != std::string::npos);
  CHECK(took >= std::chrono::seconds(9));
  CHECK(took < std::chrono::seconds(30));
}
