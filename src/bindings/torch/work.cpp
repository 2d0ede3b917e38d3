#include "work.hpp"

#include <ATen/core/jit_type.h>
#include <pybind11/pybind11.h>
#include <pthread.h>

#include "braid/error.hpp"

namespace braid_torch {

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

bool all_completed(std::vector<braid::Work>& works) {
  for (auto& w : works)
    if (!w.is_completed()) return false;
  return true;
}

// Runs f with the GIL released if this thread holds it.
template <class F>
void without_gil(F&& f) {
  if (Py_IsInitialized() && PyGILState_Check()) {
    pybind11::gil_scoped_release nogil;
    f();
  } else {
    f();
  }
}

}  // namespace

BraidWork::BraidWork(int rank, c10d::OpType type, std::vector<braid::Work> works, std::vector<at::Tensor> outputs,
                     Carry carry, std::shared_ptr<Completer> completer)
    : c10d::Work(rank, type),
      works_(std::move(works)),
      outputs_(std::move(outputs)),
      carry_(std::move(carry)),
      completer_(std::move(completer)) {}

BraidWork::~BraidWork() {
  // Dropped while its ops run: they still read and write the stand-ins.
  // (Once the group is gone its teardown has ended them: nothing to keep.)
  if (!done_.load(std::memory_order_acquire) && !completer_->stopped() && !all_completed(works_))
    completer_->adopt(std::move(works_), std::move(carry_));
}

c10::intrusive_ptr<c10::ivalue::Future> BraidWork::settle(std::exception_ptr e) {
  if (!e) {
    try {
      carry_.finish();
    } catch (...) {
      e = std::current_exception();
    }
  }
  e = torch_worded(e);
  for (auto& w : works_) {
    const int s = w.source_rank();
    if (s >= 0) source_ = s;
  }
  c10::intrusive_ptr<c10::ivalue::Future> fut;
  {
    std::lock_guard<std::mutex> lk(mutex_);
    completed_ = true;
    exception_ = e;
    fut = future_;
    done_.store(true, std::memory_order_release);
  }
  cv_.notify_all();
  return fut;
}

void BraidWork::fire(const c10::intrusive_ptr<c10::ivalue::Future>& fut) {
  if (!fut) return;
  std::exception_ptr e;
  {
    std::lock_guard<std::mutex> lk(mutex_);
    e = exception_;
  }
  if (e) fut->setError(e);
  else fut->markCompleted(c10::IValue(outputs_));
}

bool BraidWork::ready() { return done_.load(std::memory_order_acquire) || all_completed(works_); }

bool BraidWork::drive(bool bounded, std::chrono::steady_clock::time_point until) {
  std::unique_lock<std::timed_mutex> lk(drive_mu_, std::defer_lock);
  if (bounded) {
    if (!lk.try_lock_until(until)) return done_.load(std::memory_order_acquire);
  } else {
    lk.lock();
  }
  if (done_.load(std::memory_order_acquire)) return true;
  std::exception_ptr e;
  try {
    for (auto& w : works_) {
      if (!bounded) {
        w.wait();
      } else {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now());
        if (left.count() <= 0 ? !w.is_completed() : !w.wait_for(left)) return false;
      }
    }
  } catch (...) {
    e = std::current_exception();
  }
  conclude(lk, e);
  return true;
}

void BraidWork::conclude(std::unique_lock<std::timed_mutex>& lk, std::exception_ptr e) {
  auto fut = settle(e);
  lk.unlock();
  fire(fut);
}

bool BraidWork::isCompleted() {
  if (done_.load(std::memory_order_acquire)) return true;
  if (!all_completed(works_)) return false;
  // Settle at once unless another thread is doing it (then it will shortly).
  std::unique_lock<std::timed_mutex> lk(drive_mu_, std::try_to_lock);
  if (!lk.owns_lock() || done_.load(std::memory_order_acquire)) return done_.load(std::memory_order_acquire);
  std::exception_ptr e;
  try {
    for (auto& w : works_) w.wait();  // all completed: rethrows a failure
  } catch (...) {
    e = std::current_exception();
  }
  conclude(lk, e);
  return true;
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
  if (!drive(bounded, std::chrono::steady_clock::now() + timeout))
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
  if (hand_over && !completer_->add(c10::intrusive_ptr<BraidWork>::reclaim_copy(this)))
    drive(false, {});  // the group is gone: its teardown ended the op
  return fut;
}

Completer::~Completer() {
  stop();
}

void Completer::start_locked() {
  if (!thread_.joinable()) {
    thread_ = std::thread([this] { loop(); });
    pthread_setname_np(thread_.native_handle(), "braid-complete");  // for top -H, perf, gdb
  }
}

bool Completer::add(c10::intrusive_ptr<BraidWork> w) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (stop_) return false;
    queue_.push_back(std::move(w));
    start_locked();
  }
  cv_.notify_one();
  return true;
}

void Completer::adopt(std::vector<braid::Work> works, Carry carry) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (stop_) return;  // dropped here: teardown already ended the ops
    orphans_.push_back(Orphan{std::move(works), std::move(carry)});
    start_locked();
  }
  cv_.notify_one();
}

bool Completer::stopped() {
  std::lock_guard<std::mutex> lk(mu_);
  return stop_;
}

void Completer::stop() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (stop_ && !thread_.joinable()) return;
    stop_ = true;
  }
  cv_.notify_all();
  if (!thread_.joinable()) return;
  // The last reference may go on the thread itself (a Future callback).
  if (thread_.get_id() == std::this_thread::get_id()) {
    thread_.detach();
    return;
  }
  // The thread may need the GIL (a Python callback chained on a Future, the
  // last reference to a tensor Python also holds): a process group dropped
  // from Python is destroyed with the GIL held, so let go of it.
  without_gil([&] { thread_.join(); });
}

void Completer::loop() {
  std::unique_lock<std::mutex> lk(mu_);
  for (;;) {
    cv_.wait(lk, [&] { return stop_ || !queue_.empty() || !orphans_.empty(); });
    if (queue_.empty() && orphans_.empty()) return;  // stopping, and nothing left
    // Settle whatever is ready, in any order.
    std::vector<c10::intrusive_ptr<BraidWork>> ready;
    std::vector<Orphan> done;
    for (auto it = queue_.begin(); it != queue_.end();)
      if ((*it)->ready()) ready.push_back(std::move(*it)), it = queue_.erase(it);
      else ++it;
    for (auto it = orphans_.begin(); it != orphans_.end();)
      if (all_completed(it->works)) done.push_back(std::move(*it)), it = orphans_.erase(it);
      else ++it;
    auto head = queue_.empty() ? c10::intrusive_ptr<BraidWork>() : queue_.front();
    const bool idle = ready.empty() && done.empty();
    lk.unlock();
    for (auto& w : ready) w->drive(false, {});
    for (auto& o : done) {
      try {
        for (auto& w : o.works) w.wait();
        o.carry.finish();
      } catch (...) {  // nobody holds the Work: the error has no one to go to
      }
    }
    ready.clear();
    done.clear();
    // Nothing ready: wait on the oldest a little (a Braid wait, not a spin),
    // then look at all of them again.
    if (idle) {
      if (head) head->drive(true, std::chrono::steady_clock::now() + std::chrono::milliseconds(2));
      else std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    head.reset();
    lk.lock();
  }
}

}  // namespace braid_torch
