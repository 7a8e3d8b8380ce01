// Work that may block — filesystem calls made as a peer, fsync, removing directories — runs on
// these few threads, never on the event loop (docs/design.md "Threads"). Jobs run in the order
// they were submitted, on whichever thread is free; a job hands its result back to the loop
// itself (asio::post). What a job holds is bounded by its submitter: a connection reserves a
// file request's bytes against --max-queued before submitting it (FileRequests, supervisor/requests.h).
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace corral::supervisor {

class BlockingPool {
 public:
  // `nice` > 0: the threads run at that niceness (background work that must not take a CPU
  // from a launch, e.g. making spare network namespaces, about a millisecond of kernel time).
  explicit BlockingPool(unsigned threads, int nice = 0);
  BlockingPool(const BlockingPool&) = delete;
  BlockingPool& operator=(const BlockingPool&) = delete;
  // Waits for the jobs that are running; those not started are dropped (what they hold is
  // released: a connection or launch that is going away anyway).
  ~BlockingPool();

  void submit(std::function<void()> job);
  // submit() as a function, for what hands work to "somewhere else" without knowing the pool
  // (ExecSpec::offload and ::teardown, Scope::offload). The pool must outlive it.
  std::function<void(std::function<void()>)> submitter() {
    return [this](std::function<void()> job) { submit(std::move(job)); };
  }

 private:
  void run();

  std::mutex mu_;
  std::condition_variable wake_;
  std::deque<std::function<void()>> jobs_;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace corral::supervisor
