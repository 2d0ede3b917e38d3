// Bucketer: gradient bucketing as DDP's reducer does it, for C++ training
// loops that embed Braid without torch. Register the tensors once; in each
// round (a backward pass) mark each tensor ready when it holds its final local
// value, then wait(): every tensor then holds the reduction (by default the
// average) over the group's ranks. Buckets start their all_reduce, in the
// background, as soon as their last tensor is marked, so communication
// overlaps the rest of the backward pass.
//
// How buckets are formed (once, in the constructor; the same on every rank
// given the same tensor list and options):
// - tensors are taken in REVERSE registration order (the order a backward
//   pass usually produces gradients: the last layer's first);
// - each dtype fills its own bucket; a tensor joins the open bucket of its
//   dtype unless that would take it past bucket_bytes, in which case that
//   bucket is closed and a new one opened. A bucket therefore holds at most
//   bucket_bytes, except that a tensor larger than bucket_bytes gets a
//   bucket of its own;
// - buckets are numbered in the order they were opened, so bucket 0 holds
//   the last registered tensor. Unlike DDP there is no smaller first bucket
//   (DDP caps its first at 1 MiB): every bucket uses bucket_bytes.
// buckets() shows the result.
//
// Launch order: bucket i's all_reduce starts once all its tensors are marked
// AND buckets 0..i-1 have started (as DDP does: every rank must issue the
// collectives in the same order, whatever order its tensors become ready in).
// A bucket of one tensor is reduced in place; a bucket of several is packed
// into a buffer of its own (from braid::mem_alloc, so ranks on one host read
// each other's in place). The copies into and out of that buffer run on
// Braid's async thread, right before and after the bucket's all_reduce, so
// mark_ready only counts and returns; a tensor may receive its result any
// time after it is marked, and has it for certain once wait() returns.
//
// Rules, each checked with a braid::Error naming the tensor and its bucket:
// index in range (InvalidArgument), a tensor marked at most once per round
// (InvalidState), every tensor marked before wait() (InvalidState; nothing
// changes, so the caller may mark the rest and wait again). The tensors'
// memory must stay valid, and untouched between mark_ready and wait(), while
// the Bucketer lives. Host tensors only (a device tensor: NotSupported).
// After wait() returns (or throws the error of a failed all_reduce) the next
// round starts fresh. One round at a time; mark_ready and wait may be called
// from different threads.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "braid/group.hpp"
#include "braid/ops.hpp"
#include "braid/tensor.hpp"

namespace braid {

struct BucketOptions {
  std::size_t bucket_bytes = 25u << 20;  // DDP's bucket_cap_mb default, 25 MiB
  ReduceOp op = ReduceOp::Avg;
  const Group* group = nullptr;  // nullptr: the default group; copied, need not outlive
};

class Bucketer {
 public:
  // Throws braid::Error: InvalidState before init_process_group;
  // InvalidArgument for an invalid tensor or an op its dtype does not
  // support (Avg needs a floating dtype, bitwise ops an integer one).
  Bucketer(std::vector<Tensor> tensors, const BucketOptions& options = {});
  ~Bucketer();  // waits for all_reduces still in flight (errors ignored)
  Bucketer(Bucketer&&) noexcept;
  Bucketer& operator=(Bucketer&&) noexcept;

  void mark_ready(std::size_t index);  // tensor `index` holds its final local value
  void wait();                         // this round's buckets reduced, results in place

  // The buckets, in launch order: bucket b lists the indices of its tensors
  // (registration indices) in the order they are laid out in its buffer.
  const std::vector<std::vector<std::size_t>>& buckets() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace braid
