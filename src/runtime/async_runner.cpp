#include "src/runtime/async_runner.hpp"

#include <fmt/core.h>

#include <pthread.h>
#include <sched.h>

#include <chrono>
#include <thread>

#include "braid/error.hpp"
#include "src/common/thread_name.hpp"

namespace braid {

namespace {

// Both sides of an async call look a few microseconds before they sleep: a
// small collective often completes (or the next one arrives) within that,
// and a futex sleep and wake-up costs as much again on each side. Yielding,
// not spinning hard: ranks may outnumber CPUs.
template <class F>
bool briefly(F&& ready) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(30);
  do {
    if (ready()) return true;
    std::this_thread::yield();
  } while (std::chrono::steady_clock::now() < until);
  return ready();
}

}  // namespace

AsyncRunner::AsyncRunner(int cpu) : thread_([this] { loop(); }) {
  name_thread(thread_, "braid-async");
  if (cpu < 0) return;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  pthread_setaffinity_np(thread_.native_handle(), sizeof set, &set);  // best effort
}

AsyncRunner::~AsyncRunner() {
  {
    std::lock_guard lk(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void AsyncRunner::submit(std::function<void()> job) { (void)submit_claimable(std::move(job)); }

std::shared_ptr<AsyncRunner::Job> AsyncRunner::submit_claimable(std::function<void()> fn) {
  auto job = std::make_shared<Job>();
  job->fn = std::move(fn);
  {
    std::lock_guard lk(mu_);
    queue_.push_back(job);
    queued_.store(queue_.size(), std::memory_order_release);
  }
  cv_.notify_one();
  return job;
}

void AsyncRunner::loop() {
  std::unique_lock lk(mu_);
  for (;;) {
    if (queue_.empty() && !stopping_) {
      lk.unlock();
      briefly([&] { return queued_.load(std::memory_order_acquire) > 0; });
      lk.lock();
    }
    cv_.wait(lk, [&] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, and nothing left
    auto job = std::move(queue_.front());
    queue_.pop_front();
    queued_.store(queue_.size(), std::memory_order_release);
    lk.unlock();
    if (job->claim()) {  // else a waiter ran it
      job->fn();  // jobs catch their own errors into their Work
      job->fn = nullptr;
    }
    lk.lock();
  }
}

void CollectiveWork::finish(std::exception_ptr e) {
  {
    std::lock_guard lk(mu);
    if (!err) err = std::move(e);
    done.store(true, std::memory_order_release);
  }
  cv.notify_all();
}

bool CollectiveWork::wait_until(Deadline until) {
  // Not started yet, and the caller waits as long as the op may take: run it
  // here (a wait with a shorter limit must return at that limit, so it
  // leaves the op to the runner).
  if (until.at >= op_deadline.at)
    if (auto j = job.lock(); j && j->claim()) {
      auto fn = std::move(j->fn);
      fn();  // finishes this Work, with its error if it failed
    }
  if (briefly([&] { return done.load(std::memory_order_acquire); })) {
    std::lock_guard lk(mu);  // err is read under it
    return true;
  }
  std::unique_lock lk(mu);
  // The executor enforces the op's deadline itself; allow it a moment to
  // report its own (more precise) timeout before giving a generic one.
  const bool at_op_deadline = until.at >= op_deadline.at;
  const auto limit = at_op_deadline ? op_deadline.at + std::chrono::seconds(2) : until.at;
  cv.wait_until(lk, limit, [&] { return done.load(std::memory_order_relaxed); });
  if (!done && at_op_deadline) {
    if (!err)
      err = std::make_exception_ptr(Error(ErrorCode::Timeout, "async collective did not complete "
                                          "within its timeout"));
    return true;
  }
  return done;
}

bool CollectiveWork::test() { return done.load(std::memory_order_acquire); }

std::exception_ptr CollectiveWork::error() {
  std::lock_guard lk(mu);
  return err;
}

}  // namespace braid
