// BraidWork: torch's Work over one or more braid::Work.
//
// When the Braid ops complete, the stand-ins are copied back (convert.hpp)
// and the Future, if anyone asked for it, completes with the output tensors:
// DDP's reducer chains its bucket handling on that Future and never calls
// wait(), so a Future handed out is completed by the process group's
// Completer thread. The Completer also takes the Braid works of a BraidWork
// dropped before they completed, so that the stand-ins they read and write
// live until then.
#pragma once

#include <ATen/core/ivalue.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>

#include "braid/work.hpp"
#include "convert.hpp"

namespace braid_torch {

class Completer;

class BraidWork : public c10d::Work {
 public:
  BraidWork(int rank, c10d::OpType type, std::vector<braid::Work> works, std::vector<at::Tensor> outputs,
            Carry carry, std::shared_ptr<Completer> completer);
  ~BraidWork() override;
  bool isCompleted() override;
  bool isSuccess() const override;
  std::exception_ptr exception() const override;
  int sourceRank() const override;
  std::vector<at::Tensor> result() override;
  void synchronize() override {}
  bool wait(std::chrono::milliseconds timeout = kNoTimeout) override;
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;

 private:
  friend class Completer;
  // Whether every Braid work has completed (non-blocking).
  bool ready();
  // Waits on the Braid works (bounded: until `until`, the lock included),
  // then settles; false if `until` passed first.
  bool drive(bool bounded, std::chrono::steady_clock::time_point until);
  // Once, under drive_mu_: copies back, records the outcome; returns the
  // Future to complete, which the caller does after letting go of drive_mu_
  // (its callbacks may need the GIL, which a caller of isCompleted holds).
  c10::intrusive_ptr<c10::ivalue::Future> settle(std::exception_ptr e);
  void fire(const c10::intrusive_ptr<c10::ivalue::Future>& fut);
  // settle, then let go of lk (drive_mu_), then fire.
  void conclude(std::unique_lock<std::timed_mutex>& lk, std::exception_ptr e);

  std::vector<braid::Work> works_;
  std::vector<at::Tensor> outputs_;
  Carry carry_;
  std::shared_ptr<Completer> completer_;
  std::timed_mutex drive_mu_;  // one thread at a time waits on the Braid works
  std::atomic<bool> done_{false};
  int source_ = -1;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

// One thread per process group: completes handed-out Futures as their works
// complete (any order: a receive that waits for a message holds no later
// collective back), and keeps dropped works' buffers until they complete.
class Completer {
 public:
  ~Completer();
  // Queues w; false once stopped.
  bool add(c10::intrusive_ptr<BraidWork> w);
  // Keeps works and their buffers until they complete; drops them at once
  // once stopped (the process group's teardown has ended every op).
  void adopt(std::vector<braid::Work> works, Carry carry);
  // Waits for everything queued, then ends the thread. The process group
  // calls it before its communicator goes.
  void stop();
  bool stopped();

 private:
  struct Orphan {
    std::vector<braid::Work> works;
    Carry carry;
  };
  void loop();
  void start_locked();
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<c10::intrusive_ptr<BraidWork>> queue_;
  std::deque<Orphan> orphans_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace braid_torch
