// braid::cuda with CUDA: the runtime wrappers and the kernels' host side.
// (~530 lines: one wrapper per CUDA runtime call the rest of Braid uses;
// CUDA IPC moved to transports/cuda_ipc.)
// Compiled by the host compiler against cuda_runtime_api.h; the CUDA runtime
// (libcudart_static.a) is linked into libbraid, and it loads the driver
// (libcuda.so.1) itself on first use, so a machine without a driver runs
// libbraid and available() says why there is no CUDA. See README.md.
#include <cuda.h>  // driver types only (CUresult, CUdeviceptr): libcuda is never linked
#include <cuda_runtime_api.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "src/common/errors.hpp"
#include "cuda_kernels/cuda.hpp"
#include "cuda_kernels/launch.hpp"
#include "src/reduce/cpu_reduce.hpp"

namespace braid::cuda {
namespace {

// --- the one-time probe ------------------------------------------------------------

struct Probe {
  bool ok = false;
  int devices = 0;
  std::string reason;
};

// CUDA encodes versions as 1000 * major + 10 * minor.
std::string version_text(int v) { return fmt::format("{}.{}", v / 1000, (v % 1000) / 10); }

Probe run_probe() {
  Probe p;
  int n = 0;
  const cudaError_t err = cudaGetDeviceCount(&n);
  if (err == cudaSuccess && n > 0) {
    p.ok = true;
    p.devices = n;
    return p;
  }
  int driver = 0;  // 0 when no driver could be loaded
  if (cudaDriverGetVersion(&driver) != cudaSuccess) driver = 0;
  const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
  if (driver == 0) {
    p.reason = fmt::format(
        "no CUDA driver: libcuda.so.1 could not be loaded (Braid carries CUDA runtime {} "
        "inside it; a machine with a GPU needs only the NVIDIA driver)",
        version_text(CUDART_VERSION));
  } else if (err == cudaErrorInsufficientDriver) {
    p.reason = fmt::format(
        "CUDA driver too old: it supports CUDA {}, Braid was built with CUDA {}: update the "
        "driver or build Braid with an older CUDA toolkit",
        version_text(driver), version_text(CUDART_VERSION));
  } else if (err == cudaErrorNoDevice || err == cudaSuccess) {
    p.reason = fmt::format("no CUDA device: the driver (CUDA {}) reports none{}",
                           version_text(driver),
                           visible != nullptr
                               ? fmt::format(" (CUDA_VISIBLE_DEVICES=\"{}\")", visible)
                               : std::string());
  } else {
    p.reason = fmt::format("CUDA initialisation failed: {} ({})", cudaGetErrorName(err),
                           cudaGetErrorString(err));
  }
  (void)cudaGetLastError();  // leave no error behind for a later launch check
  return p;
}

const Probe& probe() {
  static const Probe p = run_probe();  // thread-safe, once
  return p;
}

// --- errors ---------------------------------------------------------------------------

}  // namespace

namespace detail {

ErrorCode code_of(cudaError_t e) {
  switch (e) {
    case cudaErrorInvalidValue:
    case cudaErrorInvalidDevice:
    case cudaErrorInvalidDevicePointer:
    case cudaErrorInvalidResourceHandle:
    case cudaErrorInvalidMemcpyDirection: return ErrorCode::InvalidArgument;
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver: return ErrorCode::NotSupported;
    default: return ErrorCode::Internal;
  }
}

[[noreturn]] void fail_cuda(cudaError_t e, const char* what) {
  (void)cudaGetLastError();  // clear a non-sticky error so the next check is about itself
  fail(code_of(e), "{}: CUDA error {}: {}", what, cudaGetErrorName(e), cudaGetErrorString(e));
}

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) fail_cuda(e, what);
}

}  // namespace detail

namespace {

using detail::check;
using detail::code_of;
using detail::fail_cuda;

cudaStream_t as_stream(void* s) { return static_cast<cudaStream_t>(s); }

// The same checks and messages as braid::reduction's (src/reduce/cpu_reduce.cpp).
void check_count(std::int64_t count, bool null_pointer, const char* what) {
  if (count < 0)
    fail(ErrorCode::InvalidArgument, "{}: count {} is negative: expected an element count >= 0",
         what, count);
  if (count > 0 && null_pointer)
    fail(ErrorCode::InvalidArgument, "{}: null buffer with count {}: expected valid memory",
         what, count);
}

void check_divisor(DType dt, int divisor) {
  if (!dtype_is_floating(dt))
    fail(ErrorCode::InvalidArgument, "scale_avg on {}: averaging needs a floating dtype "
         "(float16, bfloat16, float32, float64)", dtype_name(dt));
  if (divisor < 1)
    fail(ErrorCode::InvalidArgument, "scale_avg: divisor {} is not positive: expected the "
         "number of contributions (>= 1)", divisor);
}

// Multiprocessor counts by device ordinal; 0 = not read yet. Devices past the
// table are read every time (no machine has that many).
constexpr int kCachedDevices = 64;
std::array<std::atomic<int>, kCachedDevices> g_multiprocessors{};

int multiprocessors_of_current() {
  int device = 0;
  check(cudaGetDevice(&device), "cudaGetDevice");
  return multiprocessor_count(device);
}

}  // namespace

// --- availability -------------------------------------------------------------------

bool built_with_cuda() noexcept { return true; }
bool available() { return probe().ok; }
const std::string& unavailable_reason() { return probe().reason; }
int device_count() { return probe().devices; }

void require_available(const char* what) {
  if (!probe().ok) fail(ErrorCode::NotSupported, "{}: {}", what, probe().reason);
}

// --- devices ---------------------------------------------------------------------------

int current_device() {
  require_available("braid::cuda::current_device");
  int device = 0;
  check(cudaGetDevice(&device), "cudaGetDevice");
  return device;
}

void set_device(int device) {
  require_available("braid::cuda::set_device");
  if (device < 0 || device >= device_count())
    fail(ErrorCode::InvalidArgument, "CUDA device {} does not exist: expected 0..{}", device,
         device_count() - 1);
  check(cudaSetDevice(device), "cudaSetDevice");
}

DeviceGuard::DeviceGuard(int device) {
  if (device < 0) return;
  const int current = current_device();
  if (current == device) return;
  set_device(device);
  previous_ = current;
}

DeviceGuard::~DeviceGuard() {
  if (previous_ >= 0) (void)cudaSetDevice(previous_);
}

std::string device_name(int device) {
  require_available("braid::cuda::device_name");
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties");
  return prop.name;
}

std::string pci_bus_id(int device) {
  require_available("braid::cuda::pci_bus_id");
  char id[64] = {};
  check(cudaDeviceGetPCIBusId(id, sizeof id, device), "cudaDeviceGetPCIBusId");
  return id;
}

int multiprocessor_count(int device) {
  require_available("braid::cuda::multiprocessor_count");
  const bool cached = device >= 0 && device < kCachedDevices;
  if (cached) {
    const int v = g_multiprocessors[device].load(std::memory_order_relaxed);
    if (v > 0) return v;
  }
  // One attribute rather than cudaGetDeviceProperties, which fills ~100
  // fields and is far slower; the value is the same.
  int v = 0;
  check(cudaDeviceGetAttribute(&v, cudaDevAttrMultiProcessorCount, device),
        "cudaDeviceGetAttribute(multiProcessorCount)");
  if (cached) g_multiprocessors[device].store(v, std::memory_order_relaxed);
  return v;
}

// --- kernels ------------------------------------------------------------------------------

void reduce3(void* dst, const void* a, const void* b, std::int64_t count, DType dt,
             ReduceOp op, void* stream) {
  require_available("CUDA reduce");
  reduction::check_op(dt, op);
  check_count(count, dst == nullptr || a == nullptr || b == nullptr, "reduce");
  if (count == 0) return;
  check(detail::launch_reduce3(dst, a, b, count, dt, op, multiprocessors_of_current(),
                               as_stream(stream)),
        "CUDA reduce kernel launch");
}

void reduce_fan(void* const* dsts, int ndst, const void* const* srcs, int nsrc, std::int64_t count,
                DType dt, ReduceOp op, void* stream) {
  require_available("CUDA reduce_fan");
  reduction::check_op(dt, op);
  if (nsrc < 1 || nsrc > kMaxFanPointers || ndst < 1 || ndst > kMaxFanPointers)
    fail(ErrorCode::InvalidArgument, "CUDA reduce_fan: {} sources and {} destinations: expected 1 to {} of each",
         nsrc, ndst, kMaxFanPointers);
  FanArgs fan{};
  fan.nsrc = nsrc;
  fan.ndst = ndst;
  bool null = false;
  for (int k = 0; k < nsrc; ++k) null = null || srcs[k] == nullptr, fan.src[k] = srcs[k];
  for (int d = 0; d < ndst; ++d) null = null || dsts[d] == nullptr, fan.dst[d] = dsts[d];
  check_count(count, null, "reduce_fan");
  if (count == 0) return;
  check(detail::launch_fan(fan, count, dt, op, multiprocessors_of_current(), as_stream(stream)),
        "CUDA reduce_fan kernel launch");
}

void reduce_into(void* dst, const void* src, std::int64_t count, DType dt, ReduceOp op,
                 void* stream) {
  reduce3(dst, dst, src, count, dt, op, stream);
}

void scale_avg(void* data, std::int64_t count, DType dt, int divisor, void* stream) {
  require_available("CUDA scale_avg");
  check_divisor(dt, divisor);
  check_count(count, data == nullptr, "scale_avg");
  if (count == 0) return;
  check(detail::launch_scale(data, count, dt, divisor, multiprocessors_of_current(),
                             as_stream(stream)),
        "CUDA scale_avg kernel launch");
}

// --- memory ---------------------------------------------------------------------------------

void copy(void* dst, const void* src, std::size_t bytes, void* stream) {
  require_available("CUDA copy");
  if (bytes == 0) return;
  if (dst == nullptr || src == nullptr)
    fail(ErrorCode::InvalidArgument, "CUDA copy: null buffer with {} bytes: expected valid "
         "memory", bytes);
  check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, as_stream(stream)),
        "cudaMemcpyAsync");
}

void fill_bytes(void* dst, int value, std::size_t bytes, void* stream) {
  require_available("CUDA fill_bytes");
  if (bytes == 0) return;
  if (dst == nullptr)
    fail(ErrorCode::InvalidArgument, "CUDA fill_bytes: null buffer with {} bytes", bytes);
  check(cudaMemsetAsync(dst, value, bytes, as_stream(stream)), "cudaMemsetAsync");
}

void* malloc_device(std::size_t bytes) {
  require_available("CUDA malloc_device");
  void* p = nullptr;
  const cudaError_t e = cudaMalloc(&p, bytes);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    fail(code_of(e), "cudaMalloc of {} bytes on device {}: {}: {}", bytes, current_device(),
         cudaGetErrorName(e), cudaGetErrorString(e));
  }
  return p;
}

void free_device(void* p) noexcept {
  if (p != nullptr) (void)cudaFree(p);
}

bool is_device_pointer(const void* p) {
  if (p == nullptr || !available()) return false;
  cudaPointerAttributes attr{};
  if (cudaPointerGetAttributes(&attr, p) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return attr.type == cudaMemoryTypeDevice || attr.type == cudaMemoryTypeManaged;
}

const char* memory_kind_name(MemoryKind k) {
  switch (k) {
    case MemoryKind::Host: return "host";
    case MemoryKind::PinnedHost: return "pinned host";
    case MemoryKind::Device: return "device";
    case MemoryKind::Managed: return "managed";
  }
  return "unknown";
}

namespace detail {

// A driver function from the driver the runtime already loaded, by name, at
// its ABI as of CUDA 12.0 (version 12000); null when the driver lacks it.
void* driver_entry_point(const char* name) {
  void* f = nullptr;
  cudaDriverEntryPointQueryResult found{};
  if (cudaGetDriverEntryPointByVersion(name, &f, 12000, cudaEnableDefault, &found) != cudaSuccess ||
      found != cudaDriverEntryPointSuccess) {
    (void)cudaGetLastError();
    return nullptr;
  }
  return f;
}

// cuMemGetAddressRange, found once. Null when the driver lacks it (it has
// had it since CUDA 3.2, so only a broken install): then pointer_info
// leaves base/size empty.
using AddressRangeFn = CUresult (*)(CUdeviceptr*, std::size_t*, CUdeviceptr);
AddressRangeFn address_range_fn() {
  static const auto fn = reinterpret_cast<AddressRangeFn>(driver_entry_point("cuMemGetAddressRange"));
  return fn;
}

// cuPointerGetAttribute: the allocation's unique buffer id (never reused by
// a later allocation at the same address), which keys the export cache, and
// whether CUDA IPC can share it.
using PointerAttributeFn = CUresult (*)(void*, CUpointer_attribute, CUdeviceptr);
PointerAttributeFn pointer_attribute_fn() {
  static const auto fn = reinterpret_cast<PointerAttributeFn>(driver_entry_point("cuPointerGetAttribute"));
  return fn;
}

}  // namespace detail

using detail::address_range_fn;
using detail::pointer_attribute_fn;
using detail::AddressRangeFn;
using detail::PointerAttributeFn;

PointerInfo pointer_info(const void* p) {
  PointerInfo info;
  if (p == nullptr || !available()) return info;
  cudaPointerAttributes attr{};
  if (cudaPointerGetAttributes(&attr, p) != cudaSuccess) {
    (void)cudaGetLastError();  // an address CUDA does not know is plain host memory
    return info;
  }
  switch (attr.type) {
    case cudaMemoryTypeDevice: info.kind = MemoryKind::Device; break;
    case cudaMemoryTypeManaged: info.kind = MemoryKind::Managed; break;
    case cudaMemoryTypeHost: info.kind = MemoryKind::PinnedHost; break;
    default: return info;  // unregistered: pageable host memory
  }
  info.device = attr.device;
  if (info.kind == MemoryKind::Device || info.kind == MemoryKind::Managed) {
    if (AddressRangeFn fn = address_range_fn()) {
      CUdeviceptr base = 0;
      std::size_t size = 0;
      CUresult r = fn(&base, &size, reinterpret_cast<CUdeviceptr>(p));
      if (r == CUDA_ERROR_INVALID_CONTEXT) {
        // A driver call needs a current context, which a thread that made
        // no runtime call yet (a background runner) lacks: cudaFree(nullptr)
        // binds the current device's primary context to it.
        (void)cudaFree(nullptr);
        r = fn(&base, &size, reinterpret_cast<CUdeviceptr>(p));
      }
      if (r == CUDA_SUCCESS) {
        info.base = reinterpret_cast<void*>(base);
        info.size = size;
      }
    }
  }
  if (info.kind == MemoryKind::Device) {
    int capable = 1;  // where the driver cannot say, assume cudaMalloc's memory
    if (PointerAttributeFn attr = pointer_attribute_fn())
      if (attr(&capable, CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE, reinterpret_cast<CUdeviceptr>(p)) !=
          CUDA_SUCCESS)
        capable = 1;
    info.ipc_capable = capable != 0;
  }
  return info;
}

void* malloc_pinned(std::size_t bytes) {
  require_available("CUDA malloc_pinned");
  void* p = nullptr;
  const cudaError_t e = cudaHostAlloc(&p, bytes == 0 ? 1 : bytes, cudaHostAllocPortable);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    fail(code_of(e), "cudaHostAlloc of {} bytes of pinned host memory: {}: {}", bytes,
         cudaGetErrorName(e), cudaGetErrorString(e));
  }
  return p;
}

void free_pinned(void* p) noexcept {
  if (p != nullptr) (void)cudaFreeHost(p);
}

PinnedBuffer::PinnedBuffer(std::size_t bytes) : data_(malloc_pinned(bytes)), size_(bytes) {}
PinnedBuffer::~PinnedBuffer() { free_pinned(data_); }
PinnedBuffer::PinnedBuffer(PinnedBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}
PinnedBuffer& PinnedBuffer::operator=(PinnedBuffer&& other) noexcept {
  if (this != &other) {
    free_pinned(data_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

DeviceBuffer::DeviceBuffer(std::size_t bytes) : data_(malloc_device(bytes)), size_(bytes) {}
DeviceBuffer::~DeviceBuffer() { free_device(data_); }
DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}
DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    free_device(data_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

// --- streams and events ---------------------------------------------------------------------

void stream_synchronize(void* stream) {
  require_available("CUDA stream_synchronize");
  check(cudaStreamSynchronize(as_stream(stream)), "cudaStreamSynchronize");
}

bool stream_done(void* stream) {
  require_available("CUDA stream_done");
  const cudaError_t e = cudaStreamQuery(as_stream(stream));
  if (e == cudaErrorNotReady) {
    (void)cudaGetLastError();
    return false;
  }
  check(e, "cudaStreamQuery");
  return true;
}

void stream_wait_event(void* stream, const Event& event) { event.wait_on(stream); }

Stream::Stream() {
  require_available("CUDA stream");
  cudaStream_t s = nullptr;
  check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  stream_ = s;
}

Stream::~Stream() {
  if (stream_ != nullptr) (void)cudaStreamDestroy(as_stream(stream_));
}

void Stream::synchronize() const { stream_synchronize(stream_); }

Event::Event(bool timing) {
  require_available("CUDA event");
  cudaEvent_t e = nullptr;
  check(cudaEventCreateWithFlags(&e, timing ? cudaEventDefault : cudaEventDisableTiming),
        "cudaEventCreateWithFlags");
  event_ = e;
}

Event::~Event() {
  if (event_ != nullptr) (void)cudaEventDestroy(static_cast<cudaEvent_t>(event_));
}

void Event::record(void* stream) {
  check(cudaEventRecord(static_cast<cudaEvent_t>(event_), as_stream(stream)), "cudaEventRecord");
}

bool Event::query() const {
  const cudaError_t e = cudaEventQuery(static_cast<cudaEvent_t>(event_));
  if (e == cudaSuccess) return true;
  if (e == cudaErrorNotReady) return false;
  fail_cuda(e, "cudaEventQuery");
}

void Event::synchronize() const {
  check(cudaEventSynchronize(static_cast<cudaEvent_t>(event_)), "cudaEventSynchronize");
}

void Event::wait_on(void* stream) const {
  check(cudaStreamWaitEvent(as_stream(stream), static_cast<cudaEvent_t>(event_), 0),
        "cudaStreamWaitEvent");
}

Event::Event(Event&& other) noexcept : event_(std::exchange(other.event_, nullptr)) {}
Event& Event::operator=(Event&& other) noexcept {
  if (this != &other) {
    if (event_ != nullptr) (void)cudaEventDestroy(static_cast<cudaEvent_t>(event_));
    event_ = std::exchange(other.event_, nullptr);
  }
  return *this;
}

float Event::elapsed_ms(const Event& start, const Event& end) {
  float ms = 0.0f;
  check(cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(start.event_),
                             static_cast<cudaEvent_t>(end.event_)),
        "cudaEventElapsedTime");
  return ms;
}

}  // namespace braid::cuda
