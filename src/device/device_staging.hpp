// DeviceStaging: one op's device tensors carried through pinned host buffers,
// so that every op (and every transport, across hosts too) works on device
// memory by running its host implementation on stand-ins.
//
// The life of one op, all on OpOptions::stream (ordered after the stream's
// earlier work; nullptr = the device's legacy default stream):
//
//   stage(t, dir)   each device tensor gets a pinned host stand-in (from a
//                   process-wide pool); host tensors pass through untouched
//   begin()         at issue, on the caller's thread: device -> host copies of
//                   what the op reads, enqueued on the stream, event recorded
//   wait_inputs()   before the host op runs: those copies are complete
//   ... the host op reads and writes the stand-ins ...
//   end()           host -> device copies of what the op wrote, enqueued on
//                   the stream, event recorded; later work on the stream sees
//                   the result
//   done()/settle() the Work's side: true once end()'s copies are complete
//
// Memory ordering: the host op sees every device write enqueued on the stream
// before begin(); the device sees the op's results in stream order after
// end() (for a blocking op, everything the caller enqueues after the op
// returns); host code sees them after done() or Work::wait(). Across streams
// nothing is promised beyond CUDA's own rules (the caller orders them with
// events, as with NCCL).
//
// Pinned buffers are never freed or reused while a copy may still touch them:
// on destruction they go to a deferred list with the last recorded event and
// return to the pool once it completes (polled by later calls, never waited).
//
// One op's device tensors must all be on one device (else InvalidArgument,
// naming both). Host and device tensors may be mixed: only device ones are
// staged. Tensors that are the same memory, or lie inside one staged before
// them, share its stand-in (in-place ops stay in place): stage the enclosing
// tensor first. Zero-byte device tensors are not touched.
#pragma once

#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <vector>

#include "braid/tensor.hpp"
#include "src/common/time.hpp"

namespace braid::cuda {
class Event;
struct PointerInfo;
}

namespace braid::detail {

// The checks every device tensor argument gets (context.cpp's check_tensor
// calls it): NotSupported "<op>: <what> is on cuda:N: <why CUDA is not
// usable>" in a build without CUDA or on a machine without a driver or
// device; InvalidArgument for a device that does not exist. Probes CUDA only
// when t is a device tensor (the probe must not run before ranks fork).
void check_device_tensor(const Tensor& t, const char* what, const char* op);

// For a device tensor with count > 0 that check_device_tensor accepted: its
// memory is device (or managed) memory of t.device and t lies inside one
// allocation (InvalidArgument naming what is wrong otherwise).
cuda::PointerInfo check_device_memory(const Tensor& t, const char* what, const char* op);

// In: the op only reads the tensor (copied to the host at begin()).
// Out: the op writes every byte of it (copied back at end()).
// InOut: both; also for an output the op may write only in part (the copy in
// keeps the bytes it leaves alone).
enum class StageDir : std::uint8_t { In, Out, InOut };

// Which stand-in bytes stand for which device bytes. Pure bookkeeping (no
// CUDA call, no memory touched), so it is tested without a GPU.
class StagingLayout {
 public:
  struct Region {            // one pinned stand-in for one device range
    const char* device = nullptr;
    std::size_t bytes = 0;
  };
  struct Range {             // bytes [offset, offset + bytes) of a region
    std::size_t region = 0;
    std::size_t offset = 0;
    std::size_t bytes = 0;
    friend bool operator==(const Range&, const Range&) = default;
  };

  explicit StagingLayout(const char* op) : op_(op) {}

  // Records a device tensor (t.device.is_cuda(), t.nbytes() > 0); returns
  // where its bytes live among the regions. Throws InvalidArgument when t is
  // on another device than the tensors added before it.
  Range add(const Tensor& t, StageDir dir, const char* what);

  int device() const { return device_; }  // -1 before the first add()
  const std::vector<Region>& regions() const { return regions_; }
  const std::vector<Range>& copy_in() const { return copy_in_; }     // device -> host at begin()
  const std::vector<Range>& copy_back() const { return copy_back_; } // host -> device at end()

 private:
  const char* op_;
  int device_ = -1;
  const char* first_what_ = nullptr;
  std::vector<Region> regions_;
  std::vector<Range> copy_in_, copy_back_;
};

class DeviceStaging {
 public:
  DeviceStaging(void* stream, const char* op);
  ~DeviceStaging();
  DeviceStaging(const DeviceStaging&) = delete;
  DeviceStaging& operator=(const DeviceStaging&) = delete;

  // t itself when it is host memory; else its pinned stand-in. Checks that
  // CUDA is usable (NotSupported with the reason otherwise), that t's memory
  // is device memory of t.device and lies inside one allocation.
  Tensor stage(const Tensor& t, StageDir dir, const char* what);
  // A list; one contiguous run of device memory is staged as one region, so
  // that the stand-ins are contiguous too.
  std::vector<Tensor> stage_list(const std::vector<Tensor>& list, StageDir dir, const char* what);

  bool active() const { return !layout_.regions().empty(); }  // any device tensor staged
  int device() const { return layout_.device(); }

  void begin();
  // Waits (polling, sleeping between) for begin()'s copies; Timeout past `until`.
  void wait_inputs(Deadline until);
  // Once only; later calls do nothing. Call it only after the host op
  // succeeded. `written` caps each copy back at that many bytes from the
  // start of its range: a receive writes back only what arrived (a shorter
  // message leaves the rest of the device tensor as it was).
  static constexpr std::size_t kAll = static_cast<std::size_t>(-1);
  void end(std::size_t written = kAll);
  // True once end()'s copies are complete (true at once when nothing is staged).
  bool done();
  // For an async Work: end() if not yet, then waits until done() or `until`.
  // Returns true when done, or when it failed (`until` reached the op's
  // deadline: the failure is then in error()).
  bool settle(Deadline until, Deadline op_deadline, std::size_t written = kAll);
  std::exception_ptr error();

 private:
  struct Block {
    void* data = nullptr;
    std::size_t capacity = 0;
  };
  bool poll_until(const cuda::Event& e, Deadline until);

  void* stream_;
  const char* op_;
  StagingLayout layout_;
  std::vector<Block> blocks_;  // one per region
  std::mutex mu_;              // end()/done()/settle() may race (Work::test vs wait)
  std::shared_ptr<cuda::Event> in_event_, out_event_;
  bool ended_ = false;
  std::exception_ptr error_;
};

}  // namespace braid::detail
