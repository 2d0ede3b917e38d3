// braid::cuda: what the rest of Braid (and its tests and benchmarks) use of
// CUDA. A plain C++ header: no CUDA type appears here (streams and events are
// void*, i.e. cudaStream_t / cudaEvent_t cast to void*), so everything that
// includes it compiles with the host compiler alone, with or without CUDA.
//
// Two builds of the same interface (see cuda_kernels/README.md):
// - with CUDA (nvcc found at configure time): the reduction kernels in
//   reduce.cu and the runtime wrappers in runtime.cpp, the CUDA runtime linked
//   in statically, so libbraid needs no libcudart.so and loads on a machine
//   with no driver. available() probes the driver once, on first use.
// - without CUDA: runtime_stub.cpp. available() is false ("built without
//   CUDA support") and every other call throws Error(NotSupported).
//
// Probing initialises the CUDA driver in this process, and a process that
// forks after that cannot use CUDA in the child: call available() (or any
// function here) lazily, when the first device tensor turns up, never at init.
//
// Device and stream: every call works on the calling thread's current device
// (cudaSetDevice; see DeviceGuard), and a stream passed in must belong to that
// device. stream == nullptr is CUDA's default stream (the legacy one, which
// synchronises with other blocking streams).
//
// Kernel calls are stream-ordered and asynchronous: they return once the work
// is enqueued; it starts after the stream's earlier work and the stream's later
// work sees its result. Argument errors are thrown at once (braid::Error,
// InvalidArgument, with the same messages as braid::reduction's); a fault on
// the device (a bad pointer, say) shows up later, at the next synchronising
// call, as an Error from that call.
//
// Threads: every function may be called from any thread at once (the CUDA
// runtime is thread-safe; the probe and the multiprocessor cache are
// initialised once, atomically). The objects below are not shared: one owner.
//
// Pointers: anything the current device can address (cudaMalloc'd memory,
// managed memory, mapped pinned host memory). They need no alignment: 16-byte
// vector accesses are used where dst and the sources share their offset
// within 16 bytes, element accesses otherwise, byte accesses for pointers not
// aligned to their element. A destination is identical to or disjoint from
// each source (as in braid::reduction).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

#include "braid/ops.hpp"
#include "braid/tensor.hpp"

namespace braid::cuda {

// --- availability -------------------------------------------------------------

// True when this build has CUDA (compile-time fact, no driver call).
bool built_with_cuda() noexcept;

// True when a CUDA driver loads and reports at least one device. Probed once,
// on the first call from any thread; the answer is cached.
bool available();

// Why available() is false, for error messages: "no CUDA driver: ...",
// "no CUDA device: ...", "CUDA driver too old: ...", "built without CUDA
// support". Empty when available() is true.
const std::string& unavailable_reason();

// Number of devices the driver reports; 0 when !available().
int device_count();

// Throws Error(NotSupported) "<what>: <unavailable_reason()>" unless available().
void require_available(const char* what);

// --- devices ----------------------------------------------------------------------

int current_device();
void set_device(int device);  // checked: 0 <= device < device_count()

// Makes `device` current for its lifetime and restores the previous device
// after; does nothing when device is already current (or is -1).
class DeviceGuard {
 public:
  explicit DeviceGuard(int device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = -1;
};

// The device's name, e.g. "NVIDIA H100 80GB HBM3", for logs and reports.
std::string device_name(int device);
// The device's PCI bus id ("0000:65:00.0"): the same string in every process
// on the host that uses that GPU, whatever its CUDA_VISIBLE_DEVICES.
std::string pci_bus_id(int device);

// Streaming multiprocessors of a device (what the kernels' grids are sized
// from); read once per device and cached.
int multiprocessor_count(int device);

// --- reduction kernels (stream-ordered; semantics of braid::reduction) -----------

// dst[i] = dst[i] op src[i] for i in [0, count). Avg accumulates as Sum.
void reduce_into(void* dst, const void* src, std::int64_t count, DType dt, ReduceOp op,
                 void* stream);

// dst[i] = a[i] op b[i]; dst may be a or b (or both).
void reduce3(void* dst, const void* a, const void* b, std::int64_t count, DType dt,
             ReduceOp op, void* stream);

// One pass over `count` elements: acc = srcs[0] op srcs[1] op ... (in that
// order, one rounding per step), stored to every dsts[j]. 1..8 of each
// (kMaxFanPointers); any may be a peer's memory opened with ipc_open, and a
// destination may also be a source. With one source it copies to every
// destination.
void reduce_fan(void* const* dsts, int ndst, const void* const* srcs, int nsrc, std::int64_t count,
                DType dt, ReduceOp op, void* stream);

// data[i] /= divisor, Avg's final step. Floating dtypes only, divisor >= 1.
void scale_avg(void* data, std::int64_t count, DType dt, int divisor, void* stream);

// --- memory -----------------------------------------------------------------------

// Copies bytes in any direction the addresses imply (host or device, unified
// addressing), ordered on stream. Asynchronous with respect to the host only
// for device or pinned host memory; pageable host memory is copied through a
// staging buffer before the call returns (CUDA's rule for cudaMemcpyAsync).
void copy(void* dst, const void* src, std::size_t bytes, void* stream);

// Sets bytes to value (0..255), ordered on stream.
void fill_bytes(void* dst, int value, std::size_t bytes, void* stream);

// cudaMalloc / cudaFree on the current device. free_device(nullptr) is a no-op.
void* malloc_device(std::size_t bytes);
void free_device(void* p) noexcept;

// True when p is device or managed memory (cudaPointerGetAttributes); false
// for host memory, registered or not. Returns false when !available().
bool is_device_pointer(const void* p);

// What the driver knows of an address (cudaPointerGetAttributes), and for
// device memory the allocation it lies in (cuMemGetAddressRange, reached
// through cudaGetDriverEntryPointByVersion: the runtime API has no call for
// it, and linking libcuda would make libbraid unloadable without a driver).
enum class MemoryKind : std::uint8_t { Host, PinnedHost, Device, Managed };
const char* memory_kind_name(MemoryKind k);

struct PointerInfo {
  MemoryKind kind = MemoryKind::Host;
  int device = -1;           // ordinal for Device/Managed (and pinned host), -1 for Host
  void* base = nullptr;      // Device: start of the allocation holding p; else nullptr
  std::size_t size = 0;      // Device: that allocation's size in bytes; else 0
  // Device: cudaIpcGetMemHandle can share it (cudaMalloc'd; not memory from
  // a stream-ordered pool or the virtual memory API). True where the driver
  // cannot say.
  bool ipc_capable = false;
};

// Never throws for an address the driver does not know (that is Host);
// returns Host when !available(), so callers need no probe of their own.
PointerInfo pointer_info(const void* p);

// --- pinned (page-locked) host memory ------------------------------------------------
//
// cudaHostAlloc(cudaHostAllocPortable): copies between it and device memory
// are DMA'd directly and are asynchronous for the host (pageable memory goes
// through the driver's own staging buffer, synchronously). Portable: usable
// with every device's streams, not just the current one's. Expensive to
// allocate (it pins pages, ~ms per MiB): pool it (src/device/device_staging).
void* malloc_pinned(std::size_t bytes);
void free_pinned(void* p) noexcept;  // nullptr is a no-op

class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  explicit PinnedBuffer(std::size_t bytes);
  ~PinnedBuffer();
  PinnedBuffer(PinnedBuffer&& other) noexcept;
  PinnedBuffer& operator=(PinnedBuffer&& other) noexcept;
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;

  void* data() const { return data_; }
  std::size_t size() const { return size_; }

 private:
  void* data_ = nullptr;
  std::size_t size_ = 0;
};

// A cudaMalloc'd buffer, freed on destruction (on the device it was made on).
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(std::size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* data() const { return data_; }
  std::size_t size() const { return size_; }

 private:
  void* data_ = nullptr;
  std::size_t size_ = 0;
};

// --- streams and events ------------------------------------------------------------

// A non-blocking stream (cudaStreamNonBlocking) on the current device.
class Stream {
 public:
  Stream();
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  void* get() const { return stream_; }  // a cudaStream_t
  void synchronize() const;

 private:
  void* stream_ = nullptr;
};

void stream_synchronize(void* stream);
// True once every piece of work enqueued on the stream is done (no wait).
bool stream_done(void* stream);

class Event;
// stream's work enqueued after this call waits for `event` (cudaStreamWaitEvent).
void stream_wait_event(void* stream, const Event& event);

// An event (cudaEventCreateWithFlags / cudaEventDestroy) with timing
// disabled unless asked for (cheaper to record and query). The pattern for
// "an async Work completes when the device work has": record on the op's
// stream after the last kernel, then query() from the progress loop (it never
// blocks) or synchronize(). An event belongs to the device current when it
// was made: record() takes a stream of that device; query(), synchronize()
// and wait_on() work from any.
class Event {
 public:
  explicit Event(bool timing = false);
  ~Event();
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;

  void record(void* stream);
  bool query() const;           // true once all work before record() is done
  void synchronize() const;     // blocks until then
  void wait_on(void* stream) const;  // stream's later work waits for this event
  void* get() const { return event_; }  // a cudaEvent_t

  // Milliseconds between two recorded, completed timing events.
  static float elapsed_ms(const Event& start, const Event& end);

  // Takes ownership of a cudaEvent_t made elsewhere (interprocess events:
  // transports/cuda_ipc).
  static Event adopt(void* event) { return Event(Adopt{}, event); }

  Event(Event&& other) noexcept;
  Event& operator=(Event&& other) noexcept;

 private:
  struct Adopt {};
  Event(Adopt, void* event) : event_(event) {}
  void* event_ = nullptr;
};

}  // namespace braid::cuda
