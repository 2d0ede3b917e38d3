// AsyncRunner: runs async collectives on one background thread, in the order
// they were issued. Issue order is what every rank agrees on, so running them
// in that order can never deadlock ranks against each other; the engine's
// progress goes on for everything else meanwhile.
//
// A waiter may run a job itself (submit_claimable, Job::claim): whoever
// claims it first runs it, the runner skips it. A caller that waits at once
// (torch's blocking ops wait right after issuing) then spares the hand-over
// to the runner thread and back, several microseconds on a busy machine.
// This is safe for the same reason a blocking op issued after async ones
// is: the op took its place in the group's order (sequence number, turn)
// when it was issued, and the runner goes on with the other queued jobs
// meanwhile, so whatever the one claimed waits for still runs.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "src/runtime/work_state.hpp"

namespace braid {

class AsyncRunner {
 public:
  // cpu >= 0: the thread runs there only (Context::runner_cpu).
  explicit AsyncRunner(int cpu = -1);
  ~AsyncRunner();  // runs what is queued, then stops
  struct Job {
    std::function<void()> fn;
    std::atomic<bool> claimed{false};
    // True for exactly one caller: it runs fn.
    bool claim() { return !claimed.exchange(true, std::memory_order_acq_rel); }
  };
  void submit(std::function<void()> job);
  std::shared_ptr<Job> submit_claimable(std::function<void()> job);

 private:
  void loop();
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Job>> queue_;
  std::atomic<std::size_t> queued_{0};  // queue_.size(), for the spin before sleeping
  bool stopping_ = false;
  std::thread thread_;
};

// The Work state of an async collective: completed by the runner.
struct CollectiveWork final : detail::WorkState {
  std::mutex mu;
  std::condition_variable cv;
  std::atomic<bool> done{false};
  std::exception_ptr err;
  // The job that completes it, while queued: an unbounded wait runs it on
  // the waiting thread if the runner has not started it (AsyncRunner::Job).
  std::weak_ptr<AsyncRunner::Job> job;
  void finish(std::exception_ptr e);
  bool wait_until(Deadline until) override;
  bool test() override;
  std::exception_ptr error() override;
};

}  // namespace braid
