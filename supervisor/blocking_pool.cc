#include "supervisor/blocking_pool.h"

#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

namespace corral::supervisor {

BlockingPool::BlockingPool(unsigned threads, int nice) {
  // The loop thread takes SIGTERM and SIGINT (asio::signal_set); these threads take none.
  sigset_t all, old;
  sigfillset(&all);
  ::pthread_sigmask(SIG_SETMASK, &all, &old);
  for (unsigned i = 0; i < threads; ++i)
    threads_.emplace_back([this, nice] {
      // Linux: a thread's niceness is its own (setpriority on its tid). Best effort.
      if (nice > 0) (void)::setpriority(PRIO_PROCESS, static_cast<id_t>(::gettid()), nice);
      run();
    });
  ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
}

BlockingPool::~BlockingPool() {
  std::deque<std::function<void()>> dropped;
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    dropped.swap(jobs_);
  }
  wake_.notify_all();
  for (auto& t : threads_) t.join();
}

void BlockingPool::submit(std::function<void()> job) {
  {
    std::lock_guard lock(mu_);
    jobs_.push_back(std::move(job));
  }
  wake_.notify_one();
}

void BlockingPool::run() {
  for (;;) {
    std::function<void()> job;
    {
      std::unique_lock lock(mu_);
      wake_.wait(lock, [this] { return stopping_ || !jobs_.empty(); });
      if (stopping_) return;
      job = std::move(jobs_.front());
      jobs_.pop_front();
    }
    job();
  }
}

}  // namespace corral::supervisor
