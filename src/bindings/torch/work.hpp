// BraidWork: torch's Work over one or more braid::Work.
//
// When the Braid ops complete, the stand-ins are copied back (convert.hpp)
// and the Future, if anyone asked for it, completes with the output tensors:
// DDP's reducer chains its bucket handling on that Future and never calls
// wait(), so a Future handed out is completed by the process group's
// Completer thread, which waits for the works in issue order.
#pragma once

#include <ATen/core/ivalue.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include "braid/work.hpp"
#include "convert.hpp"

namespace braid_torch {

class Completer;

class BraidWork : public c10d::Work {
 public:
  BraidWork(int rank, c10d::OpType type, std::vector<braid::Work> works, std::vector<at::Tensor> outputs,
            Carry carry, Completer* completer);
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
  // Waits on the Braid works (up to the deadline when `bounded`), then
  // finishes; false if the deadline passed first.
  bool drive(bool bounded, std::chrono::milliseconds timeout);
  void complete(std::exception_ptr e);  // once: copies back, future, finish()

  std::vector<braid::Work> works_;
  std::vector<at::Tensor> outputs_;
  Carry carry_;
  Completer* completer_;
  std::mutex drive_mu_;  // one thread at a time waits on the Braid works
  std::atomic<bool> done_{false};
  int source_ = -1;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

// One thread per process group that completes handed-out Futures.
class Completer {
 public:
  ~Completer();
  void add(c10::intrusive_ptr<BraidWork> w);

 private:
  void loop();
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<c10::intrusive_ptr<BraidWork>> queue_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace braid_torch
