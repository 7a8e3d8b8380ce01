// Frame codec throughput: building frames with the message builders (make_exec, make_output)
// and the inbound gate every received frame goes through (verify_payload), for a 64 B and a
// 64 KiB variable part (the ExecRequest's stdin, the OutputChunk's data). Bytes/s counts that
// variable part only.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdlib>
#include <span>
#include <string>

#include "worker_proto/codec.h"
#include "worker_proto/messages.h"

namespace {

using namespace corral::proto;

ExecArgs exec_args(std::size_t stdin_bytes) {
  ExecArgs a;
  a.argv = {"/bin/cat", "-"};
  a.env = {{"LANG", "C.UTF-8"}};
  a.stdin_data = std::string(stdin_bytes, 'x');
  a.timeout_ms = 5000;
  return a;
}

std::span<const std::uint8_t> payload_of(const Frame& f) {
  return std::span<const std::uint8_t>(f).subspan(kHeaderBytes);
}

void BM_MakeExec(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  const ExecArgs args = exec_args(n);
  std::uint64_t id = 1;
  for (auto _ : state) {
    Frame f = make_exec(id++, args);
    benchmark::DoNotOptimize(f.data());
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * n));
}
BENCHMARK(BM_MakeExec)->Arg(64)->Arg(64 << 10);

void BM_MakeOutput(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  const std::string data(n, 'o');
  std::uint64_t id = 1;
  for (auto _ : state) {
    Frame f = make_output(id++, Stream::out, data);
    benchmark::DoNotOptimize(f.data());
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * n));
}
BENCHMARK(BM_MakeOutput)->Arg(64)->Arg(64 << 10);

void verify_loop(benchmark::State& state, const Frame& frame, std::size_t n) {
  const auto payload = payload_of(frame);
  for (auto _ : state) {
    DecodeError err;
    const Message* msg = verify_payload(payload, kDefaultMaxFrame, err);
    if (!msg) {
      state.SkipWithError(err.message.c_str());
      break;
    }
    benchmark::DoNotOptimize(msg);
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * n));
}

void BM_VerifyExec(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  verify_loop(state, make_exec(1, exec_args(n)), n);
}
BENCHMARK(BM_VerifyExec)->Arg(64)->Arg(64 << 10);

void BM_VerifyOutput(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  verify_loop(state, make_output(1, Stream::out, std::string(n, 'o')), n);
}
BENCHMARK(BM_VerifyOutput)->Arg(64)->Arg(64 << 10);

}  // namespace

BENCHMARK_MAIN();
