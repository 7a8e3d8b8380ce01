// Shared helpers for the test suites: temp dirs, process inspection, running the engine
// synchronously, and a real `corral serve` started on a private socket.
#pragma once

#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <doctest/doctest.h>

#include <asio/io_context.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "runtime/execution.h"
#include "worker_proto/client.h"

// A failed Result prints its message in an assertion's expansion, not "{?}".
template <class T>
struct doctest::StringMaker<corral::proto::Result<T>> {
  static doctest::String convert(const corral::proto::Result<T>& r) {
    return r ? doctest::String("ok") : doctest::String(("failed: " + r.error().message).c_str());
  }
};

namespace corral::test {

// The value of `r`; a failure ends the test case with its message.
template <class T>
T must(proto::Result<T> r) {
  if (!r) FAIL(r.error().message);
  return std::move(*r);
}

inline const std::string kHelper = CORRAL_HELPER;
// CORRAL_TEST_BINARY runs the end-to-end tests against another build of `corral` (to show
// that a test fails without the fix it covers).
inline const std::string kCorral = std::getenv("CORRAL_TEST_BINARY") ? std::getenv("CORRAL_TEST_BINARY") : CORRAL_BINARY;

class TempDir {
 public:
  TempDir() {
    std::string t = "/tmp/corral-test-XXXXXX";
    if (::mkdtemp(t.data()) == nullptr) {
      std::perror("mkdtemp");  // no test can go on without its scratch dir
      std::abort();
    }
    path_ = t;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Polls `pred` every 10 ms until it holds or `limit` passes.
inline bool wait_until(const std::function<bool()>& pred, std::chrono::milliseconds limit) {
  auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return pred();
}

// True if `pid` exists and is not a zombie.
inline bool running(pid_t pid) {
  std::string stat = read_file("/proc/" + std::to_string(pid) + "/stat");
  if (stat.empty()) return false;
  auto close = stat.rfind(')');
  return close != std::string::npos && close + 2 < stat.size() && stat[close + 2] != 'Z';
}
inline bool exists(pid_t pid) { return std::filesystem::exists("/proc/" + std::to_string(pid)); }

inline std::vector<std::string> open_fds() {
  std::vector<std::string> fds;
  DIR* d = ::opendir("/proc/self/fd");
  int self = ::dirfd(d);
  while (dirent* e = ::readdir(d))
    if (e->d_name[0] != '.' && std::atoi(e->d_name) != self) fds.emplace_back(e->d_name);
  ::closedir(d);
  return fds;
}

// Host pids of every process (zombies included) whose command line contains `marker`:
// processes inside a sandbox's PID namespace are found by what they run, not by the pids
// they see.
inline std::vector<pid_t> processes_with(const std::string& marker) {
  std::vector<pid_t> found;
  DIR* d = ::opendir("/proc");
  while (dirent* e = ::readdir(d)) {
    pid_t pid = std::atoi(e->d_name);
    if (pid <= 0 || pid == ::getpid()) continue;
    std::string cmd = read_file("/proc/" + std::string(e->d_name) + "/cmdline");
    std::replace(cmd.begin(), cmd.end(), '\0', ' ');
    if (cmd.find(marker) != std::string::npos) found.push_back(pid);
  }
  ::closedir(d);
  return found;
}

inline std::vector<pid_t> read_pids(const std::string& path) {
  std::vector<pid_t> pids;
  std::istringstream in(read_file(path));
  pid_t p;
  while (in >> p) pids.push_back(p);
  return pids;
}

struct Ran {
  Result result;
  std::vector<std::pair<StreamId, std::string>> chunks;
};

// Runs one spec to completion on a private io_context.
inline Ran run(ExecSpec spec) {
  asio::io_context io;
  Ran ran;
  bool done = false;
  auto e = Execution::start(
      io, std::move(spec), [&](StreamId s, std::string_view d) { ran.chunks.emplace_back(s, std::string(d)); },
      [&](Result r) {
        ran.result = std::move(r);
        done = true;
      });
  io.run();
  if (!done) ran.result.message = "done handler never ran";
  return ran;
}

inline ExecSpec helper_spec(std::vector<std::string> args) {
  ExecSpec s;
  s.argv = {kHelper};
  s.argv.insert(s.argv.end(), args.begin(), args.end());
  s.temp_dir = "/tmp";
  return s;
}

// Starts a program with posix_spawn; stdout/stderr to files if given. `extra_env` entries
// (NAME=VALUE) are added to this process's environment, replacing a variable of the same name.
inline pid_t spawn_process(const std::vector<std::string>& argv, const std::string& out_file = "",
                           const std::string& err_file = "", const std::vector<std::string>& extra_env = {}) {
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  if (!out_file.empty()) posix_spawn_file_actions_addopen(&fa, 1, out_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (!err_file.empty()) posix_spawn_file_actions_addopen(&fa, 2, err_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::vector<std::string> env_store;
  auto overridden = [&](const char* var) {
    for (const auto& e : extra_env)
      if (std::strncmp(var, e.c_str(), e.find('=') + 1) == 0) return true;
    return false;
  };
  for (char** e = environ; *e; ++e)
    if (!overridden(*e)) env_store.emplace_back(*e);
  for (const auto& e : extra_env) env_store.push_back(e);
  std::vector<char*> env;
  for (auto& e : env_store) env.push_back(e.data());
  env.push_back(nullptr);
  pid_t pid = -1;
  posix_spawn(&pid, argv[0].c_str(), &fa, nullptr, args.data(), env.data());
  posix_spawn_file_actions_destroy(&fa);
  return pid;
}

// Who a process started by spawn_as runs as: uid, gid and exactly these supplementary groups.
struct Identity {
  uid_t uid;
  gid_t gid;
  std::vector<gid_t> groups;
};
// nobody: a uid with no /etc/subuid or /etc/subgid range.
inline Identity nobody() { return {65534, 65534, {}}; }

// Starts `argv` as `who` (or as this process when `who` is empty): fork, open the files (as
// this process, so they may lie in a directory only it can write), then setgroups, setgid,
// setuid and exec. `in` defaults to /dev/null; empty `out`/`err` inherit this process's; the
// same path for both opens it once. `before_drop`, if given, runs in the child before the
// credentials change (e.g. to unshare a mount namespace) and returns false on failure; it
// must not allocate. A child that cannot set up exits 120-124 (see below), one that cannot
// exec 127.
inline pid_t spawn_as(const std::optional<Identity>& who, const std::vector<std::string>& argv,
                      const std::string& in = "", const std::string& out = "", const std::string& err = "",
                      const std::vector<std::string>& extra_env = {}, const std::function<bool()>& before_drop = {}) {
  // Everything the child needs is built before fork: it only makes system calls.
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::vector<std::string> env_store;
  for (char** e = environ; *e; ++e) env_store.emplace_back(*e);
  for (const auto& e : extra_env) env_store.push_back(e);
  std::vector<char*> env;
  for (auto& e : env_store) env.push_back(e.data());
  env.push_back(nullptr);
  const std::string in_path = in.empty() ? "/dev/null" : in;
  pid_t pid = ::fork();
  if (pid != 0) return pid;
  int i = ::open(in_path.c_str(), O_RDONLY);
  if (i < 0 || ::dup2(i, 0) < 0) ::_exit(120);
  if (!out.empty()) {
    int o = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0666);
    if (o < 0 || ::dup2(o, 1) < 0) ::_exit(121);
  }
  if (!err.empty()) {
    int e = err == out ? 1 : ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0666);
    if (e < 0 || ::dup2(e, 2) < 0) ::_exit(122);
  }
  if (before_drop && !before_drop()) ::_exit(123);
  if (who && (::setgroups(who->groups.size(), who->groups.data()) != 0 || ::setgid(who->gid) != 0 ||
              ::setuid(who->uid) != 0))
    ::_exit(124);
  ::execve(args[0], args.data(), env.data());
  ::_exit(127);
}

// Waits for `pid`; returns its wait status, or -1 after `limit` (the process is then killed).
inline int wait_process(pid_t pid, std::chrono::milliseconds limit = std::chrono::seconds(60)) {
  int status = 0;
  bool done = wait_until([&] { return ::waitpid(pid, &status, WNOHANG) == pid; }, limit);
  if (!done) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, &status, 0);
    return -1;
  }
  return status;
}

// True if `log` holds a sanitizer's report (ASan, LSan, UBSan).
inline bool has_sanitizer_report(const std::string& log) {
  return log.find("ERROR: AddressSanitizer") != std::string::npos ||
         log.find("ERROR: LeakSanitizer") != std::string::npos || log.find("runtime error:") != std::string::npos ||
         log.find("SUMMARY: UndefinedBehaviorSanitizer") != std::string::npos;
}

// For a Server whose memory a test measures: under ASan, freed chunks wait in a quarantine
// (256 MiB by default) and stay resident, so keep it small; what is measured is then what the
// supervisor holds. Other builds ignore it.
inline const std::string kSmallAsanQuarantine = "ASAN_OPTIONS=abort_on_error=0:print_summary=1:quarantine_size_mb=1";

// A real `corral serve` on a socket in its own temp dir, stopped (SIGTERM) on destruction.
// The test fails, showing the supervisor's log, if the supervisor exits other than with
// status 0 when stopped, dies before that, or prints a sanitizer report. With `as`, it runs as
// that identity and its temp dir is that uid's.
class Server {
 public:
  explicit Server(std::vector<std::string> extra_args = {}, std::vector<std::string> extra_env = {},
                  std::optional<Identity> as = std::nullopt) {
    socket_ = dir_.path() + "/sock/corral.sock";
    log_ = dir_.path() + "/serve.log";
    std::vector<std::string> argv = {kCorral, "serve", "--socket", socket_, "--temp-root", dir_.path()};
    argv.insert(argv.end(), extra_args.begin(), extra_args.end());
    if (as) {
      REQUIRE(::chown(dir_.path().c_str(), as->uid, as->gid) == 0);
      pid_ = spawn_as(as, argv, "", dir_.path() + "/serve.out", log_, extra_env);
    } else {
      pid_ = spawn_process(argv, dir_.path() + "/serve.out", log_, extra_env);
    }
    wait_until(
        [&] { return proto::Client::connect_raw(socket_).ok() || !running(pid_); },
        std::chrono::seconds(20));
  }
  ~Server() { stop(); }
  // Stops the supervisor (SIGTERM) and returns its wait status; judges how it ended.
  int stop() {
    if (pid_ <= 0) return status_;
    int status = 0;
    const bool died_early = ::waitpid(pid_, &status, WNOHANG) == pid_;
    if (!died_early) {
      ::kill(pid_, SIGTERM);
      status = wait_process(pid_, std::chrono::seconds(30));
    }
    status_ = status;
    pid_ = -1;
    const std::string text = log();
    if (died_early)
      FAIL_CHECK("the supervisor died before it was stopped (wait status " << status << "); its log:\n" << text);
    else if (status < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
      FAIL_CHECK("the supervisor did not exit 0 on SIGTERM (wait status " << status << "); its log:\n" << text);
    if (has_sanitizer_report(text)) FAIL_CHECK("the supervisor's log holds a sanitizer report:\n" << text);
    return status_;
  }
  // nullptr if the connection or the hello fails.
  std::unique_ptr<proto::Client> connect() {
    auto c = proto::Client::connect(socket_, "test");
    return c ? std::move(*c) : nullptr;
  }
  const std::string& socket() const { return socket_; }
  const std::string& dir() const { return dir_.path(); }
  std::string log() const { return read_file(log_); }
  pid_t pid() const { return pid_; }

 private:
  TempDir dir_;
  std::string socket_, log_;
  pid_t pid_ = -1;
  int status_ = 0;
};

// Runs the corral CLI to completion, capturing stdout, stderr and the exit status.
struct CliRun {
  int exit_code = -1;
  std::string out, err;
};
// `--socket` goes right after the subcommand (and its sub-subcommand: scope create, ...). With
// `as`, the CLI runs as that identity; `input` is its stdin (/dev/null when empty).
inline CliRun cli(const std::vector<std::string>& args, const std::string& socket = "",
                  const std::optional<Identity>& as = std::nullopt, const std::string& input = "") {
  TempDir d;
  std::vector<std::string> argv = {kCorral};
  argv.insert(argv.end(), args.begin(), args.end());
  if (!socket.empty()) {
    const bool nested = args.size() > 1 && (args[0] == "scope" || args[0] == "worker");
    argv.insert(argv.begin() + (nested ? 3 : 2), {"--socket", socket});
  }
  if (!input.empty()) {
    std::ofstream in(d.path() + "/in", std::ios::binary);
    in << input;
  }
  pid_t pid = spawn_as(as, argv, input.empty() ? "" : d.path() + "/in", d.path() + "/out", d.path() + "/err");
  int status = wait_process(pid);
  CliRun r;
  r.exit_code = (status >= 0 && WIFEXITED(status)) ? WEXITSTATUS(status) : -1;
  r.out = read_file(d.path() + "/out");
  r.err = read_file(d.path() + "/err");
  return r;
}

}  // namespace corral::test
