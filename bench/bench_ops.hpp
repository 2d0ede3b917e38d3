// One class per benchmarked operation: how big its buffers are for a given
// size (nccl-tests' conventions), how to run it out of place and in place, how
// to fill its inputs and how to check its outputs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "braid/ops.hpp"
#include "braid/tensor.hpp"
#include "bench_data.hpp"

namespace bench {

// Frees a Buffer's memory the way it was allocated.
struct BufferFree {
  bool braid_mem = false;
  void operator()(void* p) const noexcept;
};

// A 64-byte aligned, growable host buffer (grows only; contents not kept).
// With `shareable` set (braid-bench -R 1, like nccl-tests' registration
// flag) it comes from braid::mem_alloc, so peers on the host read it in place.
class Buffer {
 public:
  static inline bool shareable = false;
  void reserve(std::size_t bytes);
  void* data() { return p_.get(); }
  char* bytes() { return static_cast<char*>(data()); }

 private:
  std::unique_ptr<void, BufferFree> p_;
  std::size_t cap_ = 0;
};

// Element counts for one size, as nccl-tests computes them.
struct Layout {
  std::int64_t count = 0;       // the "count" column (per rank, or per peer for alltoall)
  std::int64_t send_elems = 0;  // a rank's input buffer
  std::int64_t recv_elems = 0;  // a rank's output buffer
  std::uint64_t bytes = 0;      // the "size" column: the larger of the two, in bytes
};

// Everything one (collective, dtype, op) sweep needs.
struct Ctx {
  Ctx(braid::DType dt, braid::ReduceOp op, int root, int rank, int nranks, bool reduction,
      const char* algo);
  braid::DType dtype;
  braid::ReduceOp op;
  int root, rank, nranks;
  std::size_t esize;
  Pattern pattern;
  braid::OpOptions opts;  // algorithm forced or not
  Buffer send, recv;
  Layout lay;  // the current size

  // Views of the buffers: `n` elements from element `off`.
  braid::Tensor send_t(std::int64_t off, std::int64_t n) {
    return braid::tensor(send.bytes() + static_cast<std::size_t>(off) * esize, n, dtype);
  }
  braid::Tensor recv_t(std::int64_t off, std::int64_t n) {
    return braid::tensor(recv.bytes() + static_cast<std::size_t>(off) * esize, n, dtype);
  }
};

class Op {
 public:
  virtual ~Op() = default;
  virtual const char* name() const = 0;
  virtual Layout layout(std::uint64_t size_bytes, std::size_t esize, int nranks) const = 0;
  // busbw = algbw x bus_factor (nccl-tests' factors).
  virtual double bus_factor(int nranks) const = 0;
  virtual bool has_in_place() const { return true; }
  virtual bool reduces() const { return false; }  // the -o op applies
  virtual bool rooted() const { return false; }   // the -r root applies
  virtual bool sized() const { return true; }     // false: one row (barrier)
  virtual int min_ranks() const { return 1; }
  // One run() is this many reported iterations (pingpong: a round trip = 2 halves).
  virtual double time_divisor() const { return 1; }

  // One operation, on the buffers as laid out for c.lay.
  virtual void run(Ctx& c, bool in_place) const = 0;
  // Writes the inputs a run reads and poisons the outputs it writes.
  virtual void fill(Ctx& c, bool in_place) const = 0;
  // Counts output elements (and, out of place, input elements the op must
  // not have written) that differ from what this rank computes they should be.
  virtual std::int64_t check(Ctx& c, bool in_place) const = 0;
};

// nullptr for an unknown name. `window`: messages in flight per iteration of bw.
std::unique_ptr<Op> make_op(const std::string& name, int window = 64);

}  // namespace bench
