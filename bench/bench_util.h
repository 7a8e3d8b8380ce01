// Helpers shared by bench_exec, bench_eval and bench_status:
//   Supervisor     a `corral serve` child on a private socket with one connected client,
//                  started once on first use, stopped (SIGTERM, reaped) by stop_supervisor()
//   Latencies      per-call latencies -> p50/p90/p99 counters (µs)
//   spawn_wait     posix_spawn + waitpid of one argv, the floor of running a program
//   RatioReporter  the console output, keeping each benchmark's figures for main()'s ratios
//   run_benchmarks main()'s flag parsing and run into a RatioReporter
// Header-only, one translation unit per benchmark binary. CORRAL_BINARY must be defined.
#pragma once

#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "worker_proto/client.h"

namespace corral::bench {

using Clock = std::chrono::steady_clock;
namespace proto = corral::proto;

inline std::string describe_status(int status) {
  if (WIFEXITED(status)) return "exit " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return "signal " + std::to_string(WTERMSIG(status));
  return "status " + std::to_string(status);
}

// A `corral serve` child on a private socket, with one connected client.
// Reaps `pid`, waiting up to 5 s for it to end on its own (after what the caller asked of it),
// then SIGKILL; `late` is printed if it had to be killed. The wait status.
inline int reap_within_5s(pid_t pid, const char* late) {
  int status = 0;
  const auto deadline = Clock::now() + std::chrono::seconds(5);
  while (::waitpid(pid, &status, WNOHANG) == 0) {
    if (Clock::now() > deadline) {
      std::cerr << "bench: " << late << "; killing it\n";
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return status;
}

class Supervisor {
 public:
  // `extra`: one more `serve` option and its value (e.g. {"--prepare-after", "0"}), or none.
  static std::unique_ptr<Supervisor> start(std::string& error, const char* client_name,
                                           std::pair<const char*, const char*> extra = {nullptr, nullptr}) {
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
      const char* argv[] = {CORRAL_BINARY, "serve", "--socket", s->socket_.c_str(), extra.first, extra.second, nullptr};
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
    for (;;) {
      auto c = proto::Client::connect(s->socket_, client_name);
      if (c) {
        s->client_ = std::move(*c);
        break;
      }
      error = c.error().message;
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
      const int status = reap_within_5s(pid_, "corral serve ignored SIGTERM for 5 s");
      if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        std::cerr << "bench: corral serve ended with " << describe_status(status) << "; its log:\n" << log_text();
    }
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }

  proto::Client& client() { return *client_; }
  const std::string& socket() const { return socket_; }
  std::string log_text() const {
    std::ifstream in(log_);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }

 private:
  explicit Supervisor(std::string dir) : dir_(dir), socket_(dir + "/b.sock"), log_(dir + "/serve.log") {}

  std::string dir_, socket_, log_;
  pid_t pid_ = -1;
  std::unique_ptr<proto::Client> client_;
};

// The one supervisor of a benchmark binary: started by the first benchmark that needs it.
struct SharedSupervisor {
  std::unique_ptr<Supervisor> s;
  std::string error;
  bool tried = false;
};
inline SharedSupervisor g_shared;

// A second one that never prepares sandboxes (serve --prepare-after 0), for the same
// benchmark both ways in one run.
inline SharedSupervisor g_unprepared;

inline Supervisor* supervisor(benchmark::State& state, const char* client_name, bool prepared = true) {
  SharedSupervisor& shared = prepared ? g_shared : g_unprepared;
  if (!shared.tried) {
    shared.tried = true;
    shared.s = prepared ? Supervisor::start(shared.error, client_name)
                        : Supervisor::start(shared.error, client_name, {"--prepare-after", "0"});
  }
  if (!shared.s) state.SkipWithError(("cannot start corral serve: " + shared.error).c_str());
  return shared.s.get();
}
inline void stop_supervisor() {  // SIGTERM, reap, remove the socket dir
  g_shared.s.reset();
  g_unprepared.s.reset();
}

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

// posix_spawn(argv[0]) with an empty environment, then waitpid: the least running it costs.
// Returns false (with `error`) unless it exited 0.
inline bool spawn_wait(const std::vector<const char*>& args, std::string& error) {
  std::vector<char*> argv;
  for (const char* a : args) argv.push_back(const_cast<char*>(a));
  argv.push_back(nullptr);
  char* envp[] = {nullptr};
  pid_t pid = -1;
  if (int rc = ::posix_spawn(&pid, argv[0], nullptr, nullptr, argv.data(), envp); rc != 0) {
    error = std::string("posix_spawn ") + argv[0] + " failed: " + std::strerror(rc);
    return false;
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    error = std::string(argv[0]) + " ended with " + describe_status(status);
    return false;
  }
  return true;
}

// The console output, plus each benchmark's real time per call and p50/p99 (the median over
// repetitions when --benchmark_repetitions is given), for the ratios main() prints.
class RatioReporter : public benchmark::ConsoleReporter {
 public:
  using ConsoleReporter::ConsoleReporter;
  struct Figures {
    double mean_us = 0, p50_us = 0, p99_us = 0;
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
      f.mean_us = r.GetAdjustedRealTime();  // every benchmark here reports in µs
      auto counter = [&](const char* name) {
        auto it = r.counters.find(name);
        return it == r.counters.end() ? 0.0 : it->second.value;
      };
      f.p50_us = counter("p50_us");
      f.p99_us = counter("p99_us");
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

// Colour only on a terminal: a custom display reporter does not see --benchmark_color.
inline benchmark::ConsoleReporter::OutputOptions console_options() {
  return ::isatty(STDOUT_FILENO) ? benchmark::ConsoleReporter::OO_ColorTabular
                                 : benchmark::ConsoleReporter::OO_Tabular;
}

// main()'s common part: parses the benchmark flags and runs the benchmarks into `reporter`
// (whose figures main() then turns into ratios). False: an unknown argument (reported).
inline bool run_benchmarks(int& argc, char** argv, RatioReporter& reporter) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return false;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  return true;
}

// The benchmark loop for a whole program run per iteration (spawn to reaped), with its
// latency percentiles; stops with an error if a run fails.
inline void time_program_runs(benchmark::State& state, const std::vector<const char*>& argv) {
  Latencies lat(state);
  std::string error;
  for (auto _ : state) {
    const auto t0 = Clock::now();
    const bool ok = spawn_wait(argv, error);
    lat.add(Clock::now() - t0);
    if (!ok) {
      state.SkipWithError(error.c_str());
      break;
    }
  }
}

}  // namespace corral::bench
