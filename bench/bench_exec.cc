// One command end to end through a real supervisor, against its floor, measured in one run.
//   BM_SpawnFloor       posix_spawn("/bin/true") + waitpid: the least running that program costs.
//   BM_ExecEndToEnd     Client::exec(id, {argv = {"/bin/true"}}) to its final reply, default
//                       policy, over one connection to `corral serve --socket DIR/b.sock`,
//                       started once as our child.
// The others split the difference between those two (they are not the headline ratio):
//   BM_SpawnPipesFloor  the floor plus what the engine needs around any child: stdin from
//                       /dev/null, stdout and stderr pipes read to EOF.
//   BM_StatusRoundTrip  a StatusRequest to its reply on the same connection: the wire and
//                       dispatch cost of one request, without a process.
//   BM_ExecNetAllowed   end to end with network allowed (no network namespace).
//   BM_ExecFullAccess   end to end with danger_full_access and network allowed.
// All use real time and report the p50/p90/p99 of single calls (µs) as counters. After the
// run, main() prints each one's ratio to the floor, from this run's figures.
// The supervisor is stopped with SIGTERM and reaped at exit (and gets SIGTERM if we die).
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "worker_proto/client.h"

namespace {

using Clock = std::chrono::steady_clock;
namespace proto = corral::proto;

const char* const kProgram = "/bin/true";

std::string describe_status(int status) {
  if (WIFEXITED(status)) return "exit " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return "signal " + std::to_string(WTERMSIG(status));
  return "status " + std::to_string(status);
}

// A `corral serve` child on a private socket, with one connected client.
class Supervisor {
 public:
  static std::unique_ptr<Supervisor> start(std::string& error) {
    std::string dir = "/tmp/corral-bench-XXXXXX";
    if (!::mkdtemp(dir.data())) {
      error = "mkdtemp failed";
      return nullptr;
    }
    auto s = std::unique_ptr<Supervisor>(new Supervisor(dir));
    const int log = ::open(s->log_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (log < 0) {
      error = "cannot open " + s->log_;
      return nullptr;
    }
    const pid_t parent = ::getpid();
    s->pid_ = ::fork();
    if (s->pid_ == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGTERM);
      if (::getppid() != parent) ::_exit(126);
      ::dup2(log, 1);
      ::dup2(log, 2);
      const char* argv[] = {CORRAL_BINARY, "serve", "--socket", s->socket_.c_str(), nullptr};
      ::execv(CORRAL_BINARY, const_cast<char* const*>(argv));
      ::_exit(127);
    }
    ::close(log);
    if (s->pid_ < 0) {
      error = "fork failed";
      return nullptr;
    }
    // Ready when the socket accepts a connection and answers the hello.
    const auto deadline = Clock::now() + std::chrono::seconds(10);
    while (!(s->client_ = proto::Client::connect(s->socket_, error, "bench_exec"))) {
      int status = 0;
      if (::waitpid(s->pid_, &status, WNOHANG) == s->pid_) {
        s->pid_ = -1;
        error = "corral serve exited early (" + describe_status(status) + "); its log:\n" + s->log_text();
        return nullptr;
      }
      if (Clock::now() > deadline) {
        error = "corral serve did not accept within 10 s (" + error + "); its log:\n" + s->log_text();
        return nullptr;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return s;
  }

  ~Supervisor() {
    client_.reset();
    if (pid_ > 0) {
      ::kill(pid_, SIGTERM);
      int status = 0;
      const auto deadline = Clock::now() + std::chrono::seconds(5);
      while (::waitpid(pid_, &status, WNOHANG) == 0) {
        if (Clock::now() > deadline) {
          std::cerr << "bench_exec: corral serve ignored SIGTERM for 5 s; killing it\n";
          ::kill(pid_, SIGKILL);
          ::waitpid(pid_, &status, 0);
          break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
      if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        std::cerr << "bench_exec: corral serve ended with " << describe_status(status) << "; its log:\n" << log_text();
    }
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }

  proto::Client& client() { return *client_; }

 private:
  explicit Supervisor(std::string dir) : dir_(dir), socket_(dir + "/b.sock"), log_(dir + "/serve.log") {}
  std::string log_text() const {
    std::ifstream in(log_);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }

  std::string dir_, socket_, log_;
  pid_t pid_ = -1;
  std::unique_ptr<proto::Client> client_;
};

std::unique_ptr<Supervisor> g_supervisor;
std::string g_supervisor_error;
bool g_supervisor_tried = false;

// Per-call latencies (µs) -> p50/p90/p99 counters.
class Latencies {
 public:
  explicit Latencies(benchmark::State& state) : state_(state) { us_.reserve(4096); }
  void add(Clock::duration d) { us_.push_back(std::chrono::duration<double, std::micro>(d).count()); }
  ~Latencies() {
    if (us_.empty()) return;
    std::sort(us_.begin(), us_.end());
    auto at = [&](double q) { return us_[static_cast<std::size_t>(q * static_cast<double>(us_.size() - 1))]; };
    state_.counters["p50_us"] = at(0.50);
    state_.counters["p90_us"] = at(0.90);
    state_.counters["p99_us"] = at(0.99);
  }

 private:
  benchmark::State& state_;
  std::vector<double> us_;
};

void BM_SpawnFloor(benchmark::State& state) {
  char* argv[] = {const_cast<char*>(kProgram), nullptr};
  char* envp[] = {nullptr};
  Latencies lat(state);
  for (auto _ : state) {
    const auto t0 = Clock::now();
    pid_t pid = -1;
    if (int rc = ::posix_spawn(&pid, kProgram, nullptr, nullptr, argv, envp); rc != 0) {
      state.SkipWithError("posix_spawn failed");
      break;
    }
    int status = 0;
    ::waitpid(pid, &status, 0);
    lat.add(Clock::now() - t0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      state.SkipWithError("/bin/true did not exit 0");
      break;
    }
  }
}
BENCHMARK(BM_SpawnFloor)->UseRealTime()->Unit(benchmark::kMicrosecond);

void BM_SpawnPipesFloor(benchmark::State& state) {
  char* argv[] = {const_cast<char*>(kProgram), nullptr};
  char* envp[] = {nullptr};
  Latencies lat(state);
  for (auto _ : state) {
    const auto t0 = Clock::now();
    int out[2], err[2];
    if (::pipe2(out, O_CLOEXEC) < 0 || ::pipe2(err, O_CLOEXEC) < 0) {
      state.SkipWithError("pipe2 failed");
      break;
    }
    posix_spawn_file_actions_t fa;
    ::posix_spawn_file_actions_init(&fa);
    ::posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    ::posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    ::posix_spawn_file_actions_adddup2(&fa, err[1], 2);
    pid_t pid = -1;
    const int rc = ::posix_spawn(&pid, kProgram, &fa, nullptr, argv, envp);
    ::posix_spawn_file_actions_destroy(&fa);
    ::close(out[1]);
    ::close(err[1]);
    if (rc != 0) {
      ::close(out[0]);
      ::close(err[0]);
      state.SkipWithError("posix_spawn failed");
      break;
    }
    // Both pipes to EOF, then reap: what the engine waits for before its final reply.
    pollfd fds[2] = {{out[0], POLLIN, 0}, {err[0], POLLIN, 0}};
    int open_fds = 2;
    char buf[4096];
    while (open_fds > 0 && ::poll(fds, 2, -1) > 0) {
      for (auto& p : fds) {
        if (p.fd < 0 || !(p.revents & (POLLIN | POLLHUP))) continue;
        if (::read(p.fd, buf, sizeof buf) <= 0) {
          ::close(p.fd);
          p.fd = -1;
          --open_fds;
        }
      }
    }
    int status = 0;
    ::waitpid(pid, &status, 0);
    lat.add(Clock::now() - t0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      state.SkipWithError("/bin/true did not exit 0");
      break;
    }
  }
}
BENCHMARK(BM_SpawnPipesFloor)->UseRealTime()->Unit(benchmark::kMicrosecond);

Supervisor* supervisor(benchmark::State& state) {
  if (!g_supervisor_tried) {
    g_supervisor_tried = true;
    g_supervisor = Supervisor::start(g_supervisor_error);
  }
  if (!g_supervisor) state.SkipWithError(("cannot start corral serve: " + g_supervisor_error).c_str());
  return g_supervisor.get();
}

std::uint64_t g_next_id = 1;

void BM_StatusRoundTrip(benchmark::State& state) {
  Supervisor* s = supervisor(state);
  if (!s) return;
  proto::Client& client = s->client();
  Latencies lat(state);
  for (auto _ : state) {
    const auto t0 = Clock::now();
    const std::uint64_t id = g_next_id++;
    proto::Received reply;
    bool ok = client.send(proto::make_status_request(id));
    while (ok && (ok = client.receive(reply)) && reply.msg->request_id() != id) {
    }
    lat.add(Clock::now() - t0);
    if (!ok || reply.msg->body_type() != proto::Body::StatusReply) {
      state.SkipWithError(("status failed: " + client.error()).c_str());
      break;
    }
  }
}
BENCHMARK(BM_StatusRoundTrip)->UseRealTime()->Unit(benchmark::kMicrosecond);

void exec_loop(benchmark::State& state, const proto::ExecArgs& args) {
  Supervisor* s = supervisor(state);
  if (!s) return;
  proto::Client& client = s->client();
  Latencies lat(state);
  for (auto _ : state) {
    const auto t0 = Clock::now();
    proto::ExecReply reply;
    const bool ok = client.exec(g_next_id++, args, {}, reply);
    lat.add(Clock::now() - t0);
    if (!ok) {
      state.SkipWithError(("exec failed: " + client.error()).c_str());
      break;
    }
    const proto::ExecResult* r = reply.result();
    if (!r || r->status() != proto::ExitStatus::exited || r->exit_code() != 0) {
      state.SkipWithError(reply.error() ? proto::str(reply.error()->message()).c_str()
                                        : r ? proto::str(r->message()).c_str()
                                            : "/bin/true did not exit 0 through corral");
      break;
    }
  }
}

// The default policy, as a client that sets nothing gets it: workspace_write, network denied.
void BM_ExecEndToEnd(benchmark::State& state) {
  proto::ExecArgs args;
  args.argv = {kProgram};
  exec_loop(state, args);
}
BENCHMARK(BM_ExecEndToEnd)->UseRealTime()->Unit(benchmark::kMicrosecond);

// The same with network allowed: no network namespace to create and tear down.
void BM_ExecNetAllowed(benchmark::State& state) {
  proto::ExecArgs args;
  args.argv = {kProgram};
  args.network = proto::Network::allowed;
  exec_loop(state, args);
}
BENCHMARK(BM_ExecNetAllowed)->UseRealTime()->Unit(benchmark::kMicrosecond);

// danger_full_access and network allowed: the least confinement the supervisor offers.
void BM_ExecFullAccess(benchmark::State& state) {
  proto::ExecArgs args;
  args.argv = {kProgram};
  args.mode = proto::Mode::danger_full_access;
  args.network = proto::Network::allowed;
  exec_loop(state, args);
}
BENCHMARK(BM_ExecFullAccess)->UseRealTime()->Unit(benchmark::kMicrosecond);

// The console output, plus each benchmark's real time per call and p50 (the median over
// repetitions when --benchmark_repetitions is given), for the ratio.
class RatioReporter : public benchmark::ConsoleReporter {
 public:
  using ConsoleReporter::ConsoleReporter;
  struct Figures {
    double mean_us = 0, p50_us = 0;
    bool ok = false, from_median = false;
  };

  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const auto& r : runs) {
      if (r.error_occurred) continue;
      const bool median = r.run_type == Run::RT_Aggregate && r.aggregate_name == "median";
      Figures& f = figures_[r.run_name.function_name];
      if (r.run_type == Run::RT_Aggregate && !median) continue;
      if (r.run_type == Run::RT_Iteration && f.from_median) continue;
      f.mean_us = r.GetAdjustedRealTime();  // both benchmarks report in µs
      auto p50 = r.counters.find("p50_us");
      f.p50_us = p50 == r.counters.end() ? 0 : p50->second.value;
      f.ok = true;
      f.from_median = median;
    }
  }

  const Figures* find(const std::string& name) const {
    auto it = figures_.find(name);
    return it == figures_.end() || !it->second.ok ? nullptr : &it->second;
  }

 private:
  std::map<std::string, Figures> figures_;
};

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  // Colour only on a terminal: a custom display reporter does not see --benchmark_color.
  RatioReporter reporter(::isatty(STDOUT_FILENO) ? benchmark::ConsoleReporter::OO_ColorTabular
                                                 : benchmark::ConsoleReporter::OO_Tabular);
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  g_supervisor.reset();  // SIGTERM, reap, remove the socket dir

  const auto* floor = reporter.find("BM_SpawnFloor");
  const auto* e2e = reporter.find("BM_ExecEndToEnd");
  if (!floor || !e2e) {
    std::cout << "ratio: needs both BM_SpawnFloor and BM_ExecEndToEnd in the same run\n";
    return (floor || e2e) ? 0 : 1;
  }
  std::printf("\nper call (real time%s)            mean us    p50 us   /floor mean  /floor p50\n",
              floor->from_median ? ", medians of the repetitions" : "");
  const std::pair<const char*, const char*> rows[] = {
      {"BM_SpawnFloor", "floor: posix_spawn+waitpid"},   {"BM_SpawnPipesFloor", "floor + pipes"},
      {"BM_StatusRoundTrip", "status round trip"},       {"BM_ExecFullAccess", "exec, full access, net"},
      {"BM_ExecNetAllowed", "exec, default, net allowed"}, {"BM_ExecEndToEnd", "exec, default policy"},
  };
  for (const auto& [name, label] : rows) {
    const auto* f = reporter.find(name);
    if (!f) continue;
    std::printf("%-36s %9.1f %9.1f %11.2fx %10.2fx\n", label, f->mean_us, f->p50_us, f->mean_us / floor->mean_us,
                f->p50_us / floor->p50_us);
  }
  std::printf("ratio end-to-end/floor (%s): %.2fx (mean), %.2fx (p50); aim <= 1.25x\n", kProgram,
              e2e->mean_us / floor->mean_us, e2e->p50_us / floor->p50_us);
  return 0;
}
