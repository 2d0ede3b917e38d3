// Call: one collective call, fully resolved to the plan contract
// (algorithms/plan.hpp, "Buffer contract"). src/api builds it from the
// caller's arguments; run() issues it (sequence number or turn, in issue
// order), finds its plan and runs it, blocking or on the async runner.
#pragma once

#include <cstring>
#include <functional>
#include <memory>
#include <vector>

#include "algorithms/plan.hpp"
#include "braid/ops.hpp"
#include "src/device/device_staging.hpp"
#include "src/runtime/context.hpp"
#include "src/runtime/executor.hpp"
#include "src/runtime/staging_pool.hpp"

namespace braid::detail {

using plan::Collective;
// Staging memory the call owns until it completes (staging_pool.hpp).
using Bytes = std::shared_ptr<char[]>;

inline Bytes alloc(std::size_t n) { return staging_buffer(n); }

// One collective call, fully resolved to the plan contract.
struct Call {
  Collective coll;
  const char* what;
  // The caller's group lives through a blocking call: a raw pointer (a
  // shared_ptr copy is two atomic operations, a fifth of an 8-byte
  // all_reduce's own time). An async call keeps it alive through `hold`.
  detail::GroupImpl* group = nullptr;
  std::shared_ptr<detail::GroupImpl> hold;
  DType dtype = DType::Float32;
  ReduceOp op = ReduceOp::Sum;
  std::int64_t count = 0;
  int root = 0;  // group rank
  std::vector<std::vector<std::int64_t>> splits;
  ExecBuffers buffers;
  // Device tensors' pinned stand-ins: made on the first device tensor, so a
  // host-only call (the small-message hot path) allocates nothing for it.
  std::shared_ptr<detail::DeviceStaging> staging;
  void* stream = nullptr;  // OpOptions::stream
  std::vector<Bytes> keep;              // staging buffers the call owns
  std::function<void()> before, after;  // layout in, results out
  // AllReduce/Reduce (Broadcast: the root's): the caller's input, and the
  // copy of it into Output the buffer contract wants (AllGather: into its
  // own block); a plan that reads Input (Plan::reads_input) gets the input
  // instead and the copy is skipped. A plain record, not a closure: the small-message path
  // allocates nothing for it.
  const void* contribution = nullptr;
  struct CopyIn {
    void* dst = nullptr;
    const void* src = nullptr;
    std::size_t bytes = 0;
  } init_output;
  // >= 0: the tensors are on this CUDA device and the call runs a one-sided
  // plan straight on them (CUDA IPC between the ranks, no staging); the
  // plan is `device_algorithm`.
  int device = -1;
  const char* device_algorithm = nullptr;
  // All-gather into a list of tensors that are not one block of memory:
  // each rank's block goes to its own tensor. run() writes the blocks
  // straight into them when the plan allows (CompiledPlan::output_in_blocks),
  // else gathers into staging and copies out; the choice is this rank's
  // alone (the plan is the same on every rank either way).
  std::vector<char*> output_list;
};


// The group an op runs on (its options', else the default group's),
// checked for validity and membership.
inline const std::shared_ptr<GroupImpl>& group_of(const OpOptions& o, const char* op) {
  op_group(o, op);
  return o.group ? o.group->impl() : context().world.impl();
}

// Issues c and runs it: on the caller's thread, or (o.async_op) on the
// context's async runner, returning the Work that completes with it.
Work run(Call&& c, const OpOptions& o);

// dst = src, host memory (they may overlap).
inline void copy_bytes(void* dst, const void* src, std::size_t n) {
  if (n && dst != src) std::memmove(dst, src, n);
}

// dst = src on a device's stream.
void copy_on_device(int device, void* stream, void* dst, const void* src, std::size_t bytes);

}  // namespace braid::detail
