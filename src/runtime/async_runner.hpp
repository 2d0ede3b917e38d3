// AsyncRunner: runs async collectives on one background thread, in the order
// they were issued. Issue order is what every rank agrees on, so running them
// in that order can never deadlock ranks against each other; the engine's
// progress goes on for everything else meanwhile.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

#include "src/runtime/work_state.hpp"

namespace braid {

class AsyncRunner {
 public:
  // cpu >= 0: the thread runs there only (Context::runner_cpu).
  explicit AsyncRunner(int cpu = -1);
  ~AsyncRunner();  // runs what is queued, then stops
  void submit(std::function<void()> job);

 private:
  void loop();
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
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
  void finish(std::exception_ptr e);
  bool wait_until(Deadline until) override;
  bool test() override;
  std::exception_ptr error() override;
};

}  // namespace braid
