#include "core/async_runner.hpp"

#include <fmt/core.h>

#include "braid/error.hpp"

namespace braid {

AsyncRunner::AsyncRunner() : thread_([this] { loop(); }) {}

AsyncRunner::~AsyncRunner() {
  {
    std::lock_guard lk(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void AsyncRunner::submit(std::function<void()> job) {
  {
    std::lock_guard lk(mu_);
    queue_.push_back(std::move(job));
  }
  cv_.notify_one();
}

void AsyncRunner::loop() {
  std::unique_lock lk(mu_);
  for (;;) {
    cv_.wait(lk, [&] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, and nothing left
    auto job = std::move(queue_.front());
    queue_.pop_front();
    lk.unlock();
    job();  // jobs catch their own errors into their Work
    lk.lock();
  }
}

void CollectiveWork::finish(std::exception_ptr e) {
  {
    std::lock_guard lk(mu);
    if (!err) err = std::move(e);
    done = true;
  }
  cv.notify_all();
}

bool CollectiveWork::wait_until(Deadline until) {
  std::unique_lock lk(mu);
  // The executor enforces the op's deadline itself; allow it a moment to
  // report its own (more precise) timeout before giving a generic one.
  const bool at_op_deadline = until.at >= op_deadline.at;
  const auto limit = at_op_deadline ? op_deadline.at + std::chrono::seconds(2) : until.at;
  cv.wait_until(lk, limit, [&] { return done; });
  if (!done && at_op_deadline) {
    if (!err)
      err = std::make_exception_ptr(Error(ErrorCode::Timeout, "async collective did not complete "
                                          "within its timeout"));
    return true;
  }
  return done;
}

bool CollectiveWork::test() {
  std::lock_guard lk(mu);
  return done;
}

std::exception_ptr CollectiveWork::error() {
  std::lock_guard lk(mu);
  return err;
}

}  // namespace braid
