// One evaluation round trip (tiny request, tiny reply) through a real supervisor with the C++
// client, against its floors, measured in one run.
//   BM_PythonPipeFloor   a persistent /usr/bin/python3 child reading a line from a pipe on stdin
//                        and writing it back on a pipe from stdout (flushing): the least a
//                        round trip to a warm interpreter costs, with no evaluation at all.
//   BM_PythonColdStart   posix_spawn("/usr/bin/python3", "-c", "1") + waitpid: what a fresh
//                        interpreter per evaluation costs.
//   BM_EvalPython        WorkerEval {"code": "1"} to the shipped Python worker (WorkerStart with
//                        python = true, as `corral worker start --python`), to its
//                        WorkerEvalResult, over one connection to `corral serve`, started once as
//                        our child (bench_util.h).
//   BM_EvalEcho          WorkerEval "x" to the C++ echo worker (tests/echo_worker.cc, reply
//                        "echo:x"): the supervisor's relay without Python's share.
// The others split the difference (they are not the headline ratios):
//   BM_StatusRoundTrip   a StatusRequest to its reply: client <-> supervisor only.
//   BM_PythonPipeEval    the pipe floor, but the child does what the shipped worker does with
//                        a request besides the channel: json.loads, ast.parse, compile and eval
//                        of the code, captured stdout/stderr, json.dumps of the reply.
// All use real time and report the p50/p90/p99 of single calls (µs) as counters. Both workers
// are started once (and warmed with one evaluation) before their first timed evaluation; main()
// prints the start-up figures, the ratios to the aims, from this run's figures.
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "bench/bench_util.h"

namespace {

using namespace corral::bench;
using proto::Body;

const char* const kPython = "/usr/bin/python3";

// ---------------------------------------------------------------------------------------------
// Floors: a persistent python3 on two pipes.

// Echoes each line back (the floor of a round trip to a warm interpreter).
const char* const kEchoLoop =
    "import sys\n"
    "r, w, f = sys.stdin.buffer.readline, sys.stdout.buffer.write, sys.stdout.buffer.flush\n"
    "while True:\n"
    "    line = r()\n"
    "    if not line:\n"
    "        break\n"
    "    w(line)\n"
    "    f()\n";

// Each line is a JSON request {"code": "..."}; handled as corral_eval_worker.py does, minus the
// channel (the FlatBuffers frames) and the worker's bookkeeping.
const char* const kEvalLoop =
    "import ast, io, json, sys\n"
    "r, w, f = sys.stdin.buffer.readline, sys.stdout.buffer.write, sys.stdout.buffer.flush\n"
    "ns = {'__name__': '__main__'}\n"
    "while True:\n"
    "    line = r()\n"
    "    if not line:\n"
    "        break\n"
    "    code = json.loads(line).get('code')\n"
    "    out, err = io.StringIO(), io.StringIO()\n"
    "    saved = sys.stdout, sys.stderr\n"
    "    sys.stdout, sys.stderr = out, err\n"
    "    try:\n"
    "        tree = ast.parse(code, '<e>', 'exec')\n"
    "        last = ast.Expression(tree.body.pop().value) if tree.body and isinstance(tree.body[-1], ast.Expr) else None\n"
    "        exec(compile(tree, '<e>', 'exec'), ns)\n"
    "        v = eval(compile(last, '<e>', 'eval'), ns) if last else None\n"
    "    finally:\n"
    "        sys.stdout, sys.stderr = saved\n"
    "    reply = json.dumps({'ok': True, 'stdout': out.getvalue(), 'stderr': err.getvalue(),\n"
    "                        'result': None if v is None else repr(v), 'error': None}).encode()\n"
    "    w(reply + b'\\n')\n"
    "    f()\n";

class PersistentPython {
 public:
  static std::unique_ptr<PersistentPython> start(const char* program, std::string& error) {
    int in[2], out[2];
    if (::pipe2(in, O_CLOEXEC) < 0 || ::pipe2(out, O_CLOEXEC) < 0) {
      error = "pipe2 failed";
      return nullptr;
    }
    posix_spawn_file_actions_t fa;
    ::posix_spawn_file_actions_init(&fa);
    ::posix_spawn_file_actions_adddup2(&fa, in[0], 0);
    ::posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    const char* argv[] = {kPython, "-c", program, nullptr};
    char* envp[] = {nullptr};
    pid_t pid = -1;
    const int rc = ::posix_spawn(&pid, kPython, &fa, nullptr, const_cast<char* const*>(argv), envp);
    ::posix_spawn_file_actions_destroy(&fa);
    ::close(in[0]);
    ::close(out[1]);
    if (rc != 0) {
      ::close(in[1]);
      ::close(out[0]);
      error = std::string("posix_spawn python3 failed: ") + std::strerror(rc);
      return nullptr;
    }
    return std::unique_ptr<PersistentPython>(new PersistentPython(pid, in[1], out[0]));
  }
  ~PersistentPython() {
    ::close(to_);  // EOF: the loop ends
    ::close(from_);
    int status = 0;
    ::waitpid(pid_, &status, 0);
  }
  // Writes `line` (with its '\n') and reads one line back into `reply`.
  bool round_trip(const std::string& line, std::string& reply) {
    if (::write(to_, line.data(), line.size()) != static_cast<ssize_t>(line.size())) return false;
    reply.clear();
    char buf[4096];
    while (reply.empty() || reply.back() != '\n') {
      const ssize_t n = ::read(from_, buf, sizeof buf);
      if (n <= 0) return false;
      reply.append(buf, static_cast<std::size_t>(n));
    }
    return true;
  }

 private:
  PersistentPython(pid_t pid, int to, int from) : pid_(pid), to_(to), from_(from) {}
  pid_t pid_;
  int to_, from_;
};

void pipe_loop(benchmark::State& state, const char* program, const std::string& request, const std::string& expect) {
  std::string error, reply;
  auto py = PersistentPython::start(program, error);
  if (!py || !py->round_trip(request, reply)) {  // also the warm-up: the interpreter is up
    state.SkipWithError(("persistent python3: " + (py ? std::string("no reply") : error)).c_str());
    return;
  }
  Latencies lat(state);
  for (auto _ : state) {
    const auto t0 = Clock::now();
    const bool ok = py->round_trip(request, reply);
    lat.add(Clock::now() - t0);
    if (!ok || reply != expect) {
      state.SkipWithError(("persistent python3 replied '" + reply + "'").c_str());
      break;
    }
  }
}

void BM_PythonPipeFloor(benchmark::State& state) { pipe_loop(state, kEchoLoop, "1\n", "1\n"); }
BENCHMARK(BM_PythonPipeFloor)->UseRealTime()->Unit(benchmark::kMicrosecond);

void BM_PythonPipeEval(benchmark::State& state) {
  pipe_loop(state, kEvalLoop, "{\"code\": \"1\"}\n",
            "{\"ok\": true, \"stdout\": \"\", \"stderr\": \"\", \"result\": \"1\", \"error\": null}\n");
}
BENCHMARK(BM_PythonPipeEval)->UseRealTime()->Unit(benchmark::kMicrosecond);

void BM_PythonColdStart(benchmark::State& state) {
  const std::vector<const char*> argv = {kPython, "-c", "1"};
  time_program_runs(state, argv);
}
BENCHMARK(BM_PythonColdStart)->UseRealTime()->Unit(benchmark::kMicrosecond);

// ---------------------------------------------------------------------------------------------
// Through the supervisor.

std::uint64_t g_next_id = 1;

proto::Frame start_frame(std::uint64_t id, const std::string& name, const std::vector<std::string>& argv, bool python) {
  proto::WorkerStartArgs a;
  a.name = name;
  a.argv = argv;
  a.python = python;
  a.idle_timeout_ms = 3600 * 1000;  // no idle stop between the benchmarks
  return proto::make_worker_start(id, a);
}

// One evaluation; its reply, or false with `error`.
bool evaluate(proto::Client& client, const std::string& name, const std::string& request, std::string& reply,
              std::string& error) {
  const std::uint64_t id = g_next_id++;
  proto::WorkerEvalArgs args;
  args.name = name;
  args.request = request;
  auto r = client.call(id, proto::make_worker_eval(id, args));
  if (!r) {
    error = "eval: " + r.error().message;
    return false;
  }
  if (const auto* e = r->msg->body_as_Error()) {
    error = std::string("eval: ") + proto::EnumNameErrorCode(e->code()) + ": " + proto::str(e->message());
    return false;
  }
  const auto* result = r->msg->body_as_WorkerEvalResult();
  if (!result) {
    error = "eval: unexpected reply";
    return false;
  }
  const auto* v = result->reply();
  reply = v ? std::string(reinterpret_cast<const char*>(v->data()), v->size()) : std::string();
  return true;
}

// A worker started once per name; start_us and first_eval_us are measured once, for main().
struct StartedWorker {
  bool tried = false, ok = false;
  std::string error;
  double start_us = 0, first_eval_us = 0;
};
std::map<std::string, StartedWorker> g_workers;

bool ensure_worker(benchmark::State& state, Supervisor& s, const std::string& name,
                   const std::vector<std::string>& argv, bool python, const std::string& request) {
  StartedWorker& w = g_workers[name];
  if (!w.tried) {
    w.tried = true;
    const std::uint64_t id = g_next_id++;
    auto t0 = Clock::now();
    auto r = s.client().call(id, start_frame(id, name, argv, python));
    if (!r) {
      w.error = "worker start: " + r.error().message;
    } else if (const auto* e = r->msg->body_as_Error()) {
      w.error = "worker start: " + proto::str(e->message());
    } else {
      w.start_us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
      std::string reply;
      t0 = Clock::now();
      w.ok = evaluate(s.client(), name, request, reply, w.error);
      w.first_eval_us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
    }
  }
  if (!w.ok) state.SkipWithError((w.error + "\nsupervisor log:\n" + s.log_text()).c_str());
  return w.ok;
}

void eval_loop(benchmark::State& state, const std::string& name, const std::vector<std::string>& argv, bool python,
               const std::string& request, const std::string& expect) {
  Supervisor* s = supervisor(state, "bench_eval");
  if (!s || !ensure_worker(state, *s, name, argv, python, request)) return;
  Latencies lat(state);
  std::string reply, error;
  for (auto _ : state) {
    const auto t0 = Clock::now();
    const bool ok = evaluate(s->client(), name, request, reply, error);
    lat.add(Clock::now() - t0);
    if (!ok || reply != expect) {
      state.SkipWithError((ok ? "unexpected reply: " + reply : error).c_str());
      break;
    }
  }
}

void BM_StatusRoundTrip(benchmark::State& state) {
  Supervisor* s = supervisor(state, "bench_eval");
  if (!s) return;
  Latencies lat(state);
  for (auto _ : state) {
    const auto t0 = Clock::now();
    const std::uint64_t id = g_next_id++;
    auto reply = s->client().call(id, proto::make_status_request(id));
    lat.add(Clock::now() - t0);
    if (!reply || reply->msg->body_type() != Body::StatusReply) {
      const std::string why = reply ? "unexpected reply" : reply.error().message;
      state.SkipWithError(("status failed: " + why).c_str());
      break;
    }
  }
}
BENCHMARK(BM_StatusRoundTrip)->UseRealTime()->Unit(benchmark::kMicrosecond);

void BM_EvalEcho(benchmark::State& state) {
  eval_loop(state, "bench-echo", {CORRAL_ECHO_WORKER}, false, "x", "echo:x");
}
BENCHMARK(BM_EvalEcho)->UseRealTime()->Unit(benchmark::kMicrosecond);

void BM_EvalPython(benchmark::State& state) {
  eval_loop(state, "bench-py", {}, true, R"({"code": "1"})",
            R"({"ok": true, "stdout": "", "stderr": "", "result": "1", "error": null})");
}
BENCHMARK(BM_EvalPython)->UseRealTime()->Unit(benchmark::kMicrosecond);

}  // namespace

int main(int argc, char** argv) {
  RatioReporter reporter(console_options());
  if (!run_benchmarks(argc, argv, reporter)) return 1;
  stop_supervisor();  // SIGTERM; the workers die with it

  std::printf("\nper call (real time)                    mean us    p50 us    p99 us\n");
  const std::pair<const char*, const char*> rows[] = {
      {"BM_PythonPipeFloor", "floor: persistent python3, line echo"},
      {"BM_PythonPipeEval", "persistent python3, JSON eval of '1'"},
      {"BM_PythonColdStart", "cold: python3 -c 1 (spawn+wait)"},
      {"BM_StatusRoundTrip", "status round trip (no worker)"},
      {"BM_EvalEcho", "eval, C++ echo worker"},
      {"BM_EvalPython", "eval, Python worker {\"code\": \"1\"}"},
  };
  for (const auto& [name, label] : rows) {
    const auto* f = reporter.find(name);
    if (!f) continue;
    std::printf("%-38s %9.1f %9.1f %9.1f%s\n", label, f->mean_us, f->p50_us, f->p99_us,
                f->from_median ? "  (medians of the repetitions)" : "");
  }
  for (const auto& [name, w] : g_workers)
    if (w.ok)
      std::printf("worker %-10s start %.1f ms, first evaluation %.1f ms (once, not repeated)\n", name.c_str(),
                  w.start_us / 1000, w.first_eval_us / 1000);

  const auto* pipe = reporter.find("BM_PythonPipeFloor");
  const auto* cold = reporter.find("BM_PythonColdStart");
  const auto* py = reporter.find("BM_EvalPython");
  if (!py || !pipe || !cold) {
    std::printf("ratios: need BM_EvalPython, BM_PythonPipeFloor and BM_PythonColdStart in the same run\n");
    return py || pipe || cold ? 0 : 1;
  }
  std::printf("\nratio python eval / persistent pipe floor: %.2fx (p50), %.2fx (p99), %.2fx (mean); aim <= 2x\n",
              py->p50_us / pipe->p50_us, py->p99_us / pipe->p99_us, py->mean_us / pipe->mean_us);
  std::printf("ratio cold python / python eval: %.1fx (p50), %.1fx (mean); aim >= 50x\n", cold->p50_us / py->p50_us,
              cold->mean_us / py->mean_us);
  // Not aims: how the difference splits (the relay without Python; Python's work without a relay).
  if (const auto* pe = reporter.find("BM_PythonPipeEval"))
    std::printf("python eval / persistent python3 doing the same JSON eval on a pipe: %.2fx (p50)\n",
                py->p50_us / pe->p50_us);
  if (const auto* echo = reporter.find("BM_EvalEcho"))
    std::printf("C++ echo worker eval / persistent pipe floor: %.2fx (p50)\n", echo->p50_us / pipe->p50_us);
  return 0;
}
