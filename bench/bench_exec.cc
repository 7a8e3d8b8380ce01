// One command end to end through a real supervisor, against its floor and against bubblewrap,
// measured in one run.
//   BM_SpawnFloor       posix_spawn("/bin/true") + waitpid: the least running that program costs.
//   BM_Bwrap            posix_spawn + waitpid of `bwrap --unshare-all --die-with-parent
//                       --ro-bind / / --dev /dev --proc /proc /bin/true`: the usual tool's price
//                       for comparable isolation (all namespaces, network included).
//   BM_PreparedFloor    one request byte to corral_bench_prepared_floor (bench/prepared_floor.c),
//                       started once, to its answer byte: a small process already inside mount,
//                       network and PID namespaces forks, applies Landlock and seccomp with
//                       no_new_privs, execs /bin/true and reaps it. The floor of a sandbox whose
//                       namespaces are prepared ahead.
//   BM_ExecEndToEnd     Client::exec(id, {argv = {"/bin/true"}}, {}) to its final reply, default
//                       policy (workspace_write, network denied, every layer on), over one
//                       connection to `corral serve --socket DIR/b.sock`, started once as our child.
// The others split the difference (they are not the headline ratios):
//   BM_SpawnPipesFloor  the floor plus what the engine needs around any child: stdin from
//                       /dev/null, stdout and stderr pipes read to EOF.
//   BM_StatusRoundTrip  a StatusRequest to its reply on the same connection: the wire and
//                       dispatch cost of one request, without a process.
//   BM_ExecNoDefaultMemory  the default policy with --memory 0: without the memory cgroup that
//                       the default memory bound gives every command.
//   BM_ExecMemoryCap    the default policy with --memory 256M: an explicit cap's groups.
//   BM_ExecNotPrepared  BM_ExecEndToEnd on a second supervisor with --prepare-after 0: every
//                       command builds its namespaces and view, where BM_ExecEndToEnd's start
//                       from a prepared sandbox (runtime/prepared.h) from the second one on.
//   BM_ExecConcurrent, BM_BwrapConcurrent  8 callers at once, 10 runs each per iteration:
//                       isolated runs per second (each corral caller its own connection).
//   BM_Exec*            end to end in each mode (read_only, workspace_write, danger_full_access)
//                       with network denied (the scope's own network namespace) and allowed (none):
//                       BM_ExecReadOnly, BM_ExecReadOnlyNetAllowed, BM_ExecEndToEnd,
//                       BM_ExecNetAllowed, BM_ExecFullAccessNetDenied, BM_ExecFullAccess.
// All use real time and report the p50/p90/p99 of single calls (µs) as counters. After the
// run, main() prints the ratios to the floor, to the prepared-sandbox floor and to bwrap, and
// the mode x network matrix, from this run's figures. The supervisor is stopped with SIGTERM and
// reaped at exit (and gets SIGTERM if we die); the prepared floor ends at end of its input.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "bench/bench_util.h"

namespace {

using namespace corral::bench;

const char* const kProgram = "/bin/true";
const char* const kBwrap = "/usr/bin/bwrap";

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

// bubblewrap with every namespace, as a sandboxing tool is usually run for one command.
// bwrap's command line for kProgram, or none (the benchmark skipped, saying why).
std::optional<std::vector<const char*>> bwrap_argv(benchmark::State& state) {
  if (::access(kBwrap, X_OK) != 0) {
    state.SkipWithError("no /usr/bin/bwrap (tools/setup.sh installs bubblewrap)");
    return std::nullopt;
  }
  return std::vector<const char*>{kBwrap, "--unshare-all", "--die-with-parent", "--ro-bind", "/", "/",
                                  "--dev", "/dev", "--proc", "/proc", kProgram};
}

void BM_Bwrap(benchmark::State& state) {
  if (auto argv = bwrap_argv(state)) time_program_runs(state, *argv);
}
BENCHMARK(BM_Bwrap)->UseRealTime()->Unit(benchmark::kMicrosecond);

// corral_bench_prepared_floor as our child: requests on its stdin, answers on its stdout, its
// stderr kept in a memfd for the error message. Started once by the first BM_PreparedFloor run;
// stopped by closing its stdin (it then removes its temp dir and exits), else killed.
class PreparedFloor {
 public:
  static std::unique_ptr<PreparedFloor> start(std::string& error) {
    auto f = std::unique_ptr<PreparedFloor>(new PreparedFloor());
    // A floor that died must fail the write, not kill the benchmark.
    ::signal(SIGPIPE, SIG_IGN);
    int req[2], ans[2];
    f->log_ = ::memfd_create("prepared-floor-stderr", MFD_CLOEXEC);
    if (f->log_ < 0 || ::pipe2(req, O_CLOEXEC) < 0) {
      error = std::string("memfd/pipe: ") + std::strerror(errno);
      return nullptr;
    }
    f->request_ = req[1];
    if (::pipe2(ans, O_CLOEXEC) < 0) {
      ::close(req[0]);
      error = std::string("pipe: ") + std::strerror(errno);
      return nullptr;
    }
    f->answer_ = ans[0];
    posix_spawn_file_actions_t fa;
    ::posix_spawn_file_actions_init(&fa);
    ::posix_spawn_file_actions_adddup2(&fa, req[0], 0);
    ::posix_spawn_file_actions_adddup2(&fa, ans[1], 1);
    ::posix_spawn_file_actions_adddup2(&fa, f->log_, 2);
    char* argv[] = {const_cast<char*>(CORRAL_PREPARED_FLOOR), const_cast<char*>(kProgram), nullptr};
    char* envp[] = {nullptr};
    const int rc = ::posix_spawn(&f->pid_, CORRAL_PREPARED_FLOOR, &fa, nullptr, argv, envp);
    ::posix_spawn_file_actions_destroy(&fa);
    ::close(req[0]);
    ::close(ans[1]);
    if (rc != 0) {
      f->pid_ = -1;
      error = std::string("posix_spawn " CORRAL_PREPARED_FLOOR ": ") + std::strerror(rc);
      return nullptr;
    }
    // Ready: 'R' within 10 s; end of file means it failed its setup (its stderr says where).
    pollfd p{f->answer_, POLLIN, 0};
    unsigned char ready = 0;
    if (::poll(&p, 1, 10000) != 1 || ::read(f->answer_, &ready, 1) != 1 || ready != 'R') {
      error = "prepared floor did not start: " + f->log_text();
      return nullptr;
    }
    return f;
  }

  // One run of the program; false (with `error`) unless it exited 0.
  bool run(std::string& error) {
    const unsigned char request = 1;
    unsigned char answer = 0;
    if (::write(request_, &request, 1) != 1 || ::read(answer_, &answer, 1) != 1) {
      error = "prepared floor stopped answering: " + log_text();
      return false;
    }
    if (answer != 0) {
      error = "prepared floor answered " + std::to_string(answer) + " (exit code, 128+signal, 254 fork failed): " +
              log_text();
      return false;
    }
    return true;
  }

  ~PreparedFloor() {
    if (request_ >= 0) ::close(request_);
    if (pid_ > 0) {
      const int status = reap_within_5s(pid_, "the prepared floor did not end at end of input within 5 s");
      if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        std::cerr << "bench: the prepared floor ended with " << describe_status(status) << ": " << log_text() << "\n";
    }
    if (answer_ >= 0) ::close(answer_);
    if (log_ >= 0) ::close(log_);
  }

 private:
  PreparedFloor() = default;
  std::string log_text() const {
    std::string text(4096, '\0');
    const ssize_t n = ::pread(log_, text.data(), text.size(), 0);
    text.resize(n > 0 ? static_cast<std::size_t>(n) : 0);
    return text.empty() ? "(no message)" : text;
  }

  pid_t pid_ = -1;
  int request_ = -1, answer_ = -1, log_ = -1;
};

struct SharedPreparedFloor {
  std::unique_ptr<PreparedFloor> f;
  std::string error;
  bool tried = false;
};
SharedPreparedFloor g_prepared;

void BM_PreparedFloor(benchmark::State& state) {
  if (!g_prepared.tried) {
    g_prepared.tried = true;
    g_prepared.f = PreparedFloor::start(g_prepared.error);
  }
  if (!g_prepared.f) {
    state.SkipWithError(("cannot start the prepared floor: " + g_prepared.error).c_str());
    return;
  }
  Latencies lat(state);
  std::string error;
  for (auto _ : state) {
    const auto t0 = Clock::now();
    const bool ok = g_prepared.f->run(error);
    lat.add(Clock::now() - t0);
    if (!ok) {
      state.SkipWithError(error.c_str());
      break;
    }
  }
}
BENCHMARK(BM_PreparedFloor)->UseRealTime()->Unit(benchmark::kMicrosecond);

std::uint64_t g_next_id = 1;

void BM_StatusRoundTrip(benchmark::State& state) {
  Supervisor* s = supervisor(state, "bench_exec");
  if (!s) return;
  proto::Client& client = s->client();
  Latencies lat(state);
  for (auto _ : state) {
    const auto t0 = Clock::now();
    const std::uint64_t id = g_next_id++;
    auto sent = client.send(proto::make_status_request(id));
    auto reply = sent ? client.receive() : proto::Result<proto::Received>(sent.error());
    while (reply && reply->msg->request_id() != id) reply = client.receive();
    lat.add(Clock::now() - t0);
    if (!reply || reply->msg->body_type() != proto::Body::StatusReply) {
      const std::string why = reply ? "unexpected reply" : reply.error().message;
      state.SkipWithError(("status failed: " + why).c_str());
      break;
    }
  }
}
BENCHMARK(BM_StatusRoundTrip)->UseRealTime()->Unit(benchmark::kMicrosecond);

void exec_loop(benchmark::State& state, const proto::ExecArgs& args, bool prepared = true) {
  Supervisor* s = supervisor(state, "bench_exec", prepared);
  if (!s) return;
  proto::Client& client = s->client();
  Latencies lat(state);
  for (auto _ : state) {
    const auto t0 = Clock::now();
    auto replied = client.exec(g_next_id++, args, {});
    lat.add(Clock::now() - t0);
    if (!replied) {
      state.SkipWithError(("exec failed: " + replied.error().message).c_str());
      break;
    }
    const proto::ExecReply& reply = *replied;
    const proto::ExecResult* r = reply.result();
    if (!r || r->status() != proto::ExitStatus::exited || r->exit_code() != 0) {
      state.SkipWithError(reply.error() ? proto::str(reply.error()->message()).c_str()
                                        : r ? proto::str(r->message()).c_str()
                                            : "/bin/true did not exit 0 through corral");
      break;
    }
  }
}

proto::ExecArgs exec_args(proto::Mode mode, proto::Network network) {
  proto::ExecArgs args;
  args.argv = {kProgram};
  args.mode = mode;
  args.network = network;
  return args;
}

// The default policy, as a client that sets nothing gets it: workspace_write, network denied.
void BM_ExecEndToEnd(benchmark::State& state) {
  proto::ExecArgs args;
  args.argv = {kProgram};
  exec_loop(state, args);
}
BENCHMARK(BM_ExecEndToEnd)->UseRealTime()->Unit(benchmark::kMicrosecond);

// BM_ExecEndToEnd on a supervisor that never prepares sandboxes (serve --prepare-after 0):
// every command builds its namespaces and view. Against BM_ExecEndToEnd (which, from its
// second command on, starts from a prepared sandbox), what preparing saves.
void BM_ExecNotPrepared(benchmark::State& state) {
  proto::ExecArgs args;
  args.argv = {kProgram};
  exec_loop(state, args, /*prepared=*/false);
}
BENCHMARK(BM_ExecNotPrepared)->UseRealTime()->Unit(benchmark::kMicrosecond);

// Issue 13's concurrency aim: isolated runs per second with 8 callers at once. One iteration is
// kCallers threads each running kRunsPerCaller commands back to back; main() turns the mean
// iteration time into runs/s for corral (each caller its own connection, so its own scope and
// prepared sandbox, the default policy) and for bwrap (each caller its own processes).
constexpr int kCallers = 8;
constexpr int kRunsPerCaller = 10;

// Runs `one(caller, error)` kRunsPerCaller times in each of kCallers threads; false with the
// first error.
template <typename One>
bool run_callers(One one, std::string& error) {
  std::vector<std::string> errors(kCallers);
  std::vector<std::thread> threads;
  for (int c = 0; c < kCallers; ++c)
    threads.emplace_back([&, c] {
      for (int i = 0; i < kRunsPerCaller && errors[c].empty(); ++i) one(c, errors[c]);
    });
  for (auto& t : threads) t.join();
  for (const auto& e : errors)
    if (!e.empty()) {
      error = e;
      return false;
    }
  return true;
}

void BM_ExecConcurrent(benchmark::State& state) {
  Supervisor* s = supervisor(state, "bench_exec");
  if (!s) return;
  static std::vector<std::unique_ptr<proto::Client>> clients;  // kept across iterations, as an agent's
  for (int c = static_cast<int>(clients.size()); c < kCallers; ++c) {
    auto client = proto::Client::connect(s->socket(), "bench_exec");
    if (!client) {
      state.SkipWithError(("connect: " + client.error().message).c_str());
      return;
    }
    clients.push_back(std::move(*client));
  }
  proto::ExecArgs args;
  args.argv = {kProgram};
  std::vector<std::uint64_t> ids(kCallers, 1);
  for (auto _ : state) {
    std::string error;
    const bool ok = run_callers(
        [&](int c, std::string& err) {
          auto replied = clients[c]->exec(ids[c]++, args, {});
          if (!replied) err = "exec failed: " + replied.error().message;
          else if (const proto::ExecResult* r = replied->result(); !r || r->exit_code() != 0)
            err = "/bin/true did not exit 0 through corral";
        },
        error);
    if (!ok) {
      state.SkipWithError(error.c_str());
      break;
    }
  }
}
BENCHMARK(BM_ExecConcurrent)->UseRealTime()->Unit(benchmark::kMicrosecond);

void BM_BwrapConcurrent(benchmark::State& state) {
  const auto argv = bwrap_argv(state);
  if (!argv) return;
  for (auto _ : state) {
    std::string error;
    if (!run_callers([&](int, std::string& err) { spawn_wait(*argv, err); }, error)) {
      state.SkipWithError(error.c_str());
      break;
    }
  }
}
BENCHMARK(BM_BwrapConcurrent)->UseRealTime()->Unit(benchmark::kMicrosecond);

// The default policy with --memory 0 (unlimited, said explicitly): no memory cgroup per command.
// Against BM_ExecEndToEnd, what the default memory bound costs.
void BM_ExecNoDefaultMemory(benchmark::State& state) {
  proto::ExecArgs args;
  args.argv = {kProgram};
  args.memory_bytes = 0;
  exec_loop(state, args);
}
BENCHMARK(BM_ExecNoDefaultMemory)->UseRealTime()->Unit(benchmark::kMicrosecond);

// The default policy with an explicit --memory 256M: a group in every hierarchy that gives a
// cap, the peak, CPU time or the kill (here: v1 memory and v1 cpuacct joined by init itself,
// the v2 one entered at clone).
void BM_ExecMemoryCap(benchmark::State& state) {
  proto::ExecArgs args;
  args.argv = {kProgram};
  args.memory_bytes = 256ULL << 20;
  exec_loop(state, args);
}
BENCHMARK(BM_ExecMemoryCap)->UseRealTime()->Unit(benchmark::kMicrosecond);

// workspace_write with network allowed: no network namespace to create and tear down.
void BM_ExecNetAllowed(benchmark::State& state) {
  exec_loop(state, exec_args(proto::Mode::workspace_write, proto::Network::allowed));
}
BENCHMARK(BM_ExecNetAllowed)->UseRealTime()->Unit(benchmark::kMicrosecond);

void BM_ExecReadOnly(benchmark::State& state) {
  exec_loop(state, exec_args(proto::Mode::read_only, proto::Network::denied));
}
BENCHMARK(BM_ExecReadOnly)->UseRealTime()->Unit(benchmark::kMicrosecond);

void BM_ExecReadOnlyNetAllowed(benchmark::State& state) {
  exec_loop(state, exec_args(proto::Mode::read_only, proto::Network::allowed));
}
BENCHMARK(BM_ExecReadOnlyNetAllowed)->UseRealTime()->Unit(benchmark::kMicrosecond);

// danger_full_access: no mount view restrictions beyond the namespaces, no Landlock.
void BM_ExecFullAccessNetDenied(benchmark::State& state) {
  exec_loop(state, exec_args(proto::Mode::danger_full_access, proto::Network::denied));
}
BENCHMARK(BM_ExecFullAccessNetDenied)->UseRealTime()->Unit(benchmark::kMicrosecond);

// danger_full_access and network allowed: the least confinement the supervisor offers.
void BM_ExecFullAccess(benchmark::State& state) {
  exec_loop(state, exec_args(proto::Mode::danger_full_access, proto::Network::allowed));
}
BENCHMARK(BM_ExecFullAccess)->UseRealTime()->Unit(benchmark::kMicrosecond);

}  // namespace

int main(int argc, char** argv) {
  RatioReporter reporter(console_options());
  if (!run_benchmarks(argc, argv, reporter)) return 1;
  std::vector<corral::proto::LayerInfo> layers;
  if (g_shared.s) layers = g_shared.s->client().layers();
  stop_supervisor();
  g_prepared.f.reset();

  if (!layers.empty()) {
    std::printf("\nsupervisor layers:");
    for (const auto& l : layers) std::printf(" %s%s", l.name.c_str(), l.available ? "" : "(unavailable)");
    std::printf("\n");
  }
  const auto* floor = reporter.find("BM_SpawnFloor");
  const auto* e2e = reporter.find("BM_ExecEndToEnd");
  const auto* bwrap = reporter.find("BM_Bwrap");
  if (!floor || !e2e) {
    std::cout << "ratio: needs both BM_SpawnFloor and BM_ExecEndToEnd in the same run\n";
    return (floor || e2e) ? 0 : 1;
  }
  std::printf("\nper call (real time%s)            mean us    p50 us    p99 us  /floor mean  /floor p50\n",
              floor->from_median ? ", medians of the repetitions" : "");
  const std::pair<const char*, const char*> rows[] = {
      {"BM_SpawnFloor", "floor: posix_spawn+waitpid"},
      {"BM_SpawnPipesFloor", "floor + pipes"},
      {"BM_PreparedFloor", "prepared floor (landlock+seccomp)"},
      {"BM_StatusRoundTrip", "status round trip"},
      {"BM_Bwrap", "bwrap --unshare-all /bin/true"},
      {"BM_ExecFullAccess", "exec, full access, net allowed"},
      {"BM_ExecFullAccessNetDenied", "exec, full access, net denied"},
      {"BM_ExecReadOnlyNetAllowed", "exec, read-only, net allowed"},
      {"BM_ExecReadOnly", "exec, read-only, net denied"},
      {"BM_ExecNetAllowed", "exec, workspace, net allowed"},
      {"BM_ExecEndToEnd", "exec, default (workspace, denied)"},
  };
  for (const auto& [name, label] : rows) {
    const auto* f = reporter.find(name);
    if (!f) continue;
    std::printf("%-36s %9.1f %9.1f %9.1f %11.2fx %10.2fx\n", label, f->mean_us, f->p50_us, f->p99_us,
                f->mean_us / floor->mean_us, f->p50_us / floor->p50_us);
  }

  // Mode x network: what each layer adds. Denied - allowed is the network namespace's price.
  struct ModeRow {
    const char* label;
    const char* denied;
    const char* allowed;
  };
  const ModeRow modes[] = {{"read-only", "BM_ExecReadOnly", "BM_ExecReadOnlyNetAllowed"},
                           {"workspace-write", "BM_ExecEndToEnd", "BM_ExecNetAllowed"},
                           {"danger-full-access", "BM_ExecFullAccessNetDenied", "BM_ExecFullAccess"}};
  std::printf("\nexec p50 us (mean us)     net denied            net allowed           net namespace adds\n");
  for (const auto& m : modes) {
    const auto* d = reporter.find(m.denied);
    const auto* a = reporter.find(m.allowed);
    if (!d || !a) continue;
    std::printf("%-22s %8.1f (%8.1f)  %8.1f (%8.1f)  %8.1f (%8.1f)\n", m.label, d->p50_us, d->mean_us, a->p50_us,
                a->mean_us, d->p50_us - a->p50_us, d->mean_us - a->mean_us);
  }

  std::printf("\nratio end-to-end/floor (%s): %.2fx (mean), %.2fx (p50); aim <= 1.25x\n", kProgram,
              e2e->mean_us / floor->mean_us, e2e->p50_us / floor->p50_us);
  if (const auto* prepared = reporter.find("BM_PreparedFloor"))
    std::printf("ratio default execute via client library/prepared-sandbox floor: %.2fx (mean), %.2fx (p50); "
                "aim <= 1.3x\n",
                e2e->mean_us / prepared->mean_us, e2e->p50_us / prepared->p50_us);
  else
    std::printf("ratio default execute via client library/prepared-sandbox floor: needs BM_PreparedFloor in the "
                "same run\n");
  if (bwrap)
    std::printf("ratio default execute/bwrap: %.2fx (mean), %.2fx (p50); aim <= 0.25x\n", e2e->mean_us / bwrap->mean_us,
                e2e->p50_us / bwrap->p50_us);
  else
    std::printf("ratio default execute/bwrap: needs BM_Bwrap in the same run\n");
  const auto* together = reporter.find("BM_ExecConcurrent");
  const auto* bwrap_together = reporter.find("BM_BwrapConcurrent");
  if (together && bwrap_together) {
    const double runs = kCallers * kRunsPerCaller;
    std::printf("isolated runs/s with %d concurrent callers: corral (client library) %.0f, bwrap %.0f; "
                "ratio %.2fx; aim >= 2x\n",
                kCallers, runs / (together->mean_us / 1e6), runs / (bwrap_together->mean_us / 1e6),
                bwrap_together->mean_us / together->mean_us);
  }
  if (const auto* usual = reporter.find("BM_ExecNotPrepared"))
    std::printf("ratio default execute from a prepared sandbox/without: %.2fx (mean), %.2fx (p50)\n",
                e2e->mean_us / usual->mean_us, e2e->p50_us / usual->p50_us);
  return 0;
}
