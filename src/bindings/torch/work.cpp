#include "work.hpp"

#include <ATen/core/jit_type.h>
#include <pybind11/pybind11.h>

#include "braid/error.hpp"

namespace braid_torch {

BraidWork::BraidWork(int rank, c10d::OpType type, std::vector<braid::Work> works, std::vector<at::Tensor> outputs,
                     Carry carry, Completer* completer)
    : c10d::Work(rank, type),
      works_(std::move(works)),
      outputs_(std::move(outputs)),
      carry_(std::move(carry)),
      completer_(completer) {}

namespace {

// Braid's timeouts say " Timed out " as torch's own backends do (callers and
// torch's tests match on it); the rest of the message is Braid's.
std::exception_ptr torch_worded(std::exception_ptr e) {
  if (!e) return e;
  try {
    std::rethrow_exception(e);
  } catch (const braid::Error& x) {
    if (x.code() == braid::ErrorCode::Timeout && std::string(x.what()).find(" Timed out ") == std::string::npos)
      return std::make_exception_ptr(
          braid::Error(x.code(), std::string("braid: Timed out waiting: ") + x.what(), x.peer()));
  } catch (...) {
  }
  return e;
}

}  // namespace

void BraidWork::complete(std::exception_ptr e) {
  if (done_.load(std::memory_order_acquire)) return;
  e = torch_worded(e);
  if (!e) {
    try {
      carry_.finish();
    } catch (...) {
      e = std::current_exception();
    }
  }
  for (auto& w : works_) {
    const int s = w.source_rank();
    if (s >= 0) source_ = s;
  }
  carry_.keep.clear();
  c10::intrusive_ptr<c10::ivalue::Future> fut;
  {
    std::lock_guard<std::mutex> lk(mutex_);
    completed_ = true;
    exception_ = e;
    fut = future_;
    done_.store(true, std::memory_order_release);
  }
  cv_.notify_all();
  if (fut) {
    if (e) fut->setError(e);
    else fut->markCompleted(c10::IValue(outputs_));
  }
}

bool BraidWork::drive(bool bounded, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lk(drive_mu_);
  if (done_.load(std::memory_order_acquire)) return true;
  const auto until = std::chrono::steady_clock::now() + timeout;
  try {
    for (auto& w : works_) {
      if (!bounded) {
        w.wait();
      } else {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now());
        if (left.count() <= 0 || !w.wait_for(left)) return false;
      }
    }
    complete(nullptr);
  } catch (...) {
    complete(std::current_exception());
  }
  return true;
}

bool BraidWork::isCompleted() {
  if (done_.load(std::memory_order_acquire)) return true;
  for (auto& w : works_)
    if (!w.is_completed()) return false;
  return drive(false, {});  // all done: finishes at once
}

bool BraidWork::isSuccess() const {
  std::lock_guard<std::mutex> lk(mutex_);
  return completed_ && !exception_;
}

std::exception_ptr BraidWork::exception() const {
  std::lock_guard<std::mutex> lk(mutex_);
  return exception_;
}

int BraidWork::sourceRank() const {
  if (!done_.load(std::memory_order_acquire))
    throw braid::Error(braid::ErrorCode::InvalidState,
                       "sourceRank: the receive has not completed: call wait() first");
  if (source_ < 0)
    throw braid::Error(braid::ErrorCode::InvalidState, "sourceRank: this work is not a receive");
  return source_;
}

std::vector<at::Tensor> BraidWork::result() { return outputs_; }

bool BraidWork::wait(std::chrono::milliseconds timeout) {
  const bool bounded = timeout.count() > 0;
  if (!drive(bounded, timeout))
    throw braid::Error(braid::ErrorCode::Timeout,
                       "Work.wait: Timed out waiting " + std::to_string(timeout.count()) +
                           " ms for the operation to complete (it keeps running; its own timeout still applies)");
  std::lock_guard<std::mutex> lk(mutex_);
  if (exception_) std::rethrow_exception(exception_);
  return true;
}

c10::intrusive_ptr<c10::ivalue::Future> BraidWork::getFuture() {
  bool hand_over = false;
  c10::intrusive_ptr<c10::ivalue::Future> fut;
  {
    std::lock_guard<std::mutex> lk(mutex_);
    if (!future_) {
      future_ = c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()));
      if (completed_) {
        if (exception_) future_->setError(exception_);
        else future_->markCompleted(c10::IValue(outputs_));
      } else {
        hand_over = true;
      }
    }
    fut = future_;
  }
  if (hand_over) completer_->add(c10::intrusive_ptr<BraidWork>::reclaim_copy(this));
  return fut;
}

Completer::~Completer() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (!thread_.joinable()) return;
  // The thread may need the GIL (a Python callback chained on a Future, or
  // the last reference to a tensor Python also holds): a process group
  // dropped from Python is destroyed with the GIL held, so let go of it.
  if (Py_IsInitialized() && PyGILState_Check()) {
    pybind11::gil_scoped_release nogil;
    thread_.join();
  } else {
    thread_.join();
  }
}

void Completer::add(c10::intrusive_ptr<BraidWork> w) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    queue_.push_back(std::move(w));
    if (!thread_.joinable()) thread_ = std::thread([this] { loop(); });
  }
  cv_.notify_one();
}

void Completer::loop() {
  std::unique_lock<std::mutex> lk(mu_);
  for (;;) {
    cv_.wait(lk, [&] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, and nothing left
    auto w = std::move(queue_.front());
    queue_.pop_front();
    lk.unlock();
    w->drive(false, {});  // the op's own timeout bounds it
    w.reset();
    lk.lock();
  }
}

}  // namespace braid_torch
