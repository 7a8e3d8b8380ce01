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
//   anything else   replies "echo:" + request
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "worker_proto/worker_sdk.h"

using corral::proto::WorkerConnection;

namespace {

std::string handle(std::string_view request, WorkerConnection& conn) {
  static long counter = 0;
  auto after = [&](std::string_view prefix) { return std::string(request.substr(prefix.size())); };
  if (request == "count") return std::to_string(++counter);
  if (request.starts_with("host:")) {
    std::string reply, error;
    if (!conn.host_call(after("host:"), reply, error)) return "host-error:" + error;
    return "host-reply:" + reply;
  }
  if (request.starts_with("hostcalls:")) {
    const long n = std::atol(after("hostcalls:").c_str());
    std::vector<std::uint64_t> ids;
    std::string error;
    for (long i = 1; i <= n; ++i) {
      std::uint64_t id = conn.start_host_call("call-" + std::to_string(i), error);
      if (id == 0) return "host-error:" + error;
      ids.push_back(id);
    }
    std::string all;
    for (std::uint64_t id : ids) {
      std::string reply;
      if (!conn.wait_host_call(id, reply, error)) return "host-error:" + error;
      all += reply;
    }
    return all;
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
  std::string error;
  auto conn = WorkerConnection::from_env(error);
  if (!conn) {
    std::fprintf(stderr, "corral_echo_worker: %s\n", error.c_str());
    return 2;
  }
  if (!conn->serve(handle, error)) {
    std::fprintf(stderr, "corral_echo_worker: %s\n", error.c_str());
    return 1;
  }
  return 0;
}
