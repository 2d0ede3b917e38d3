// DeviceSteps: the data steps of a one-sided plan (Copy, Reduce, Get,
// GetReduce, Put) on CUDA device memory, for ranks on one host that open
// each other's buffers through CUDA IPC. The one-sided runner
// (one_sided.cpp) keeps doing the scheduling, the signals and the waits; it
// hands the data steps here instead of touching memory itself.
//
// Everything is enqueued on the call's stream, in the order the runner
// starts steps (a valid order of the plan's dependencies, and the stream
// keeps it). Consecutive steps that build one result are fused into a
// single kernel (cuda::reduce_fan): "Get or GetReduce a block from every
// rank, then Put it into every rank's output" is one pass that reads each
// source once and writes each destination once, the least traffic the
// collective needs. Steps are held back until something needs them launched.
//
// Ordering across processes is host-side: before each Signal the runner
// calls settle(), which launches what is held and waits on the host for the
// stream to finish it (no GPU work of its own: see settle()). A peer that sees our signal
// therefore sees every write we made and every write the stream's earlier
// work made to the buffers we publish; and the kernels we enqueue after a
// Wait run after the peer's work that preceded its signal. The first
// settle() of a call waits even with nothing launched: peers are about to
// read buffers our caller's earlier stream work produced.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "src/common/time.hpp"

#include "braid/ops.hpp"
#include "braid/tensor.hpp"
#include "transports/shm/window.hpp"

namespace braid::detail {

class DeviceSteps {
 public:
  DeviceSteps(void* stream, DType dtype, ReduceOp op);

  // What peers need to open [p, p + bytes) of this rank's device memory.
  static shm::BufDesc describe(const void* p, std::size_t bytes, int device, shm::IpcDesc* ipc);
  // The address here of byte `off` of a buffer `peer` described, opened
  // through CUDA IPC (cached per allocation) and pinned until the next
  // settle(). A mapping of an older allocation of the peer that the new one
  // overlaps is closed: the peer freed it.
  char* open_peer(shm::Window& w, int peer, const shm::BufDesc& d, const shm::IpcDesc& ipc, std::uint64_t off);

  void copy(char* dst, const char* src, std::int64_t count);                     // dst = src
  void reduce(char* dst, const char* src, std::int64_t count);                   // dst = dst op src
  void get(char* dst, const char* peer_src, std::int64_t count);                 // dst = peer's src
  void get_reduce(char* dst, const char* acc, const char* peer_src, std::int64_t count);
  void put(char* peer_dst, const char* src, std::int64_t count);                 // peer's dst = src

  // Launches what is held, then waits until the stream has run it: polls,
  // sleeping between polls after a while, calling check() (which throws to
  // give up: a dead peer, an aborted job) and failing with Timeout at
  // `until`. Mappings pinned since the last settle are released.
  template <class Check>
  void settle(Deadline until, const char* what, Check&& check);
  // Launches what is held (at the end of a call: later stream work sees it).
  void flush();
  // Waits for the stream if peers' memory may still be in use, releases pins.
  ~DeviceSteps();

 private:
  static constexpr int kMax = 8;  // cuda::kMaxFanPointers
  // The kernel being assembled: sources folded in order, stored to dsts.
  struct Fan {
    const void* src[kMax];
    void* dst[kMax];
    int nsrc = 0, ndst = 0;
    std::int64_t count = 0;
  };
  void start(std::initializer_list<const void*> srcs, void* dst, std::int64_t count);
  // The held kernel produces exactly `dst` (count elements) and nothing else.
  bool builds(const void* dst, std::int64_t count) const;
  // [p, p + count elements) overlaps a held source that is not p itself.
  bool overlaps_a_source(const void* p, std::int64_t count) const;

  void* stream_;
  DType dtype_;
  ReduceOp op_;
  Fan fan_;
  bool dirty_ = true;  // stream work not yet waited for (the caller's, at first)
  std::vector<std::array<unsigned char, 64>> pinned_;  // handles opened since the last settle
  // One poll step of settle(), which began waiting at `from`; true when done.
  bool wait_once(Clock::time_point from, Deadline until, const char* what);
  void release_pins();
};

template <class Check>
void DeviceSteps::settle(Deadline until, const char* what, Check&& check) {
  flush();
  if (dirty_) {
    // A host-side wait, not an event: recording one is GPU work, and ranks
    // sharing a GPU pay a switch between processes for every piece of GPU
    // work each submits (time-slicing), however small.
    const auto from = Clock::now();
    while (!wait_once(from, until, what)) check();
    dirty_ = false;
  }
  release_pins();
}

}  // namespace braid::detail
