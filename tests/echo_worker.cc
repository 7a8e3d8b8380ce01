// corral_echo_worker: a tiny worker for tests, built on worker_proto/worker_sdk.h. What it does
// is picked by the request:
//   count           increments an in-memory counter and replies it (state across evaluations)
//   host:DATA       host_call(DATA); replies "host-reply:" + reply or "host-error:" + error
//   hostcalls:N     starts N host calls "call-1".."call-N" (all in flight at once), then waits
//                   for each in order; replies the replies concatenated, or "host-error:" + error
//   crash           abort()
//   sleep:N         sleeps N seconds, then replies "slept"
//   side-effect:P   appends one line to the file P, then replies "done" (ran-at-most-once proofs)
//   print           writes a line to stdout and to stderr (the logs); replies "printed"
//   big:N           replies N bytes of 'b'
//   bigcalls:N:S    like hostcalls:N, each call carrying S bytes
//   flood:N         writes N host calls straight to the channel, reading no reply; replies "flooded"
//   stray           replies "stray" itself, sends a host call for the evaluation just ended, then sleeps
//   anything else   replies "echo:" + request
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "worker_proto/codec.h"
#include "worker_proto/messages.h"
#include "worker_proto/worker_sdk.h"

#if defined(__SANITIZE_ADDRESS__)
// This program runs inside sandboxes, where LeakSanitizer cannot work (it needs ptrace, which
// seccomp refuses): an ASan build checks its memory accesses, not its leaks.
extern "C" const char* __asan_default_options() { return "detect_leaks=0"; }
#endif


using corral::proto::WorkerConnection;

namespace {

int g_channel = -1;  // the raw channel fd, for the modes that break the protocol on purpose

void write_raw(std::uint64_t id, corral::proto::Body type, std::uint64_t call_id, std::string_view data) {
  namespace proto = corral::proto;
  proto::Frame f = type == proto::Body::HostCall ? proto::make_host_call(id, call_id, data) : proto::make_eval_reply(id, data);
  std::size_t done = 0;
  while (done < f.size()) {
    ssize_t n = ::write(g_channel, f.data() + done, f.size() - done);
    if (n <= 0) std::_Exit(3);  // the supervisor stopped us: nothing else to do
    done += static_cast<std::size_t>(n);
  }
}

// start_host_call() N times with `size` bytes each, then waits for every reply in order.
std::string many_calls(WorkerConnection& conn, long n, std::size_t size) {
  std::vector<std::uint64_t> ids;
  for (long i = 1; i <= n; ++i) {
    std::string data = "call-" + std::to_string(i);
    if (size > data.size()) data.resize(size, 'c');
    auto id = conn.start_host_call(data);
    if (!id) return "host-error:" + id.error().message;
    ids.push_back(*id);
  }
  std::string all;
  for (std::uint64_t id : ids) {
    auto reply = conn.wait_host_call(id);
    if (!reply) return "host-error:" + reply.error().message;
    all += *reply;
  }
  return all;
}

std::string handle(std::string_view request, WorkerConnection& conn) {
  static long counter = 0;
  auto after = [&](std::string_view prefix) { return std::string(request.substr(prefix.size())); };
  if (request == "count") return std::to_string(++counter);
  if (request.starts_with("host:")) {
    auto reply = conn.host_call(after("host:"));
    if (!reply) return "host-error:" + reply.error().message;
    return "host-reply:" + *reply;
  }
  if (request.starts_with("hostcalls:")) return many_calls(conn, std::atol(after("hostcalls:").c_str()), 0);
  if (request.starts_with("bigcalls:")) {
    const std::string args = after("bigcalls:");
    return many_calls(conn, std::atol(args.c_str()), std::strtoul(args.substr(args.find(':') + 1).c_str(), nullptr, 10));
  }
  if (request.starts_with("big:")) return std::string(std::strtoul(after("big:").c_str(), nullptr, 10), 'b');
  if (request.starts_with("flood:")) {
    const long n = std::atol(after("flood:").c_str());
    for (long i = 1; i <= n; ++i) write_raw(conn.evaluation(), corral::proto::Body::HostCall, 1000 + i, "flood");
    return "flooded";
  }
  if (request == "stray") {
    write_raw(conn.evaluation(), corral::proto::Body::EvalReply, 0, "stray");
    write_raw(conn.evaluation(), corral::proto::Body::HostCall, 1, "after the end");
    ::sleep(3600);  // serve() would send a second reply: the stray call is the one under test
    std::_Exit(0);
  }
  if (request == "crash") std::abort();
  if (request.starts_with("sleep:")) {
    ::sleep(static_cast<unsigned>(std::atoi(after("sleep:").c_str())));
    return "slept";
  }
  if (request.starts_with("side-effect:")) {
    std::ofstream(after("side-effect:"), std::ios::app) << "ran " << ::getpid() << "\n";
    return "done";
  }
  if (request == "print") {
    std::printf("echo worker: a line on stdout\n");
    std::fflush(stdout);
    std::fprintf(stderr, "echo worker: a line on stderr\n");
    return "printed";
  }
  return "echo:" + std::string(request);
}

}  // namespace

int main() {
  if (const char* fd = std::getenv("CORRAL_WORKER_FD")) g_channel = std::atoi(fd);
  auto conn = WorkerConnection::from_env();
  if (!conn) {
    std::fprintf(stderr, "corral_echo_worker: %s\n", conn.error().message.c_str());
    return 2;
  }
  if (auto served = (*conn)->serve(handle); !served) {
    std::fprintf(stderr, "corral_echo_worker: %s\n", served.error().message.c_str());
    return 1;
  }
  return 0;
}
