// braid::cuda in a build without CUDA (nvcc not found, or -Dcuda=disabled):
// the same interface, reporting "built without CUDA support". Nothing here
// touches a device; every call that would throws Error(NotSupported).
#include <string>
#include <utility>

#include "src/common/errors.hpp"
#include "cuda_kernels/cuda.hpp"

namespace braid::cuda {
namespace {

const std::string& reason() {
  static const std::string r =
      "built without CUDA support (configured with -Dcuda=disabled, or nvcc or "
      "libcudart_static.a not found: reconfigure with nvcc on the PATH)";
  return r;
}

[[noreturn]] void unsupported(const char* what) {
  fail(ErrorCode::NotSupported, "{}: {}", what, reason());
}

}  // namespace

bool built_with_cuda() noexcept { return false; }
bool available() { return false; }
const std::string& unavailable_reason() { return reason(); }
int device_count() { return 0; }

void require_available(const char* what) { unsupported(what); }

int current_device() { unsupported("braid::cuda::current_device"); }
void set_device(int) { unsupported("braid::cuda::set_device"); }
DeviceGuard::DeviceGuard(int device) {
  if (device >= 0) unsupported("braid::cuda::DeviceGuard");
}
DeviceGuard::~DeviceGuard() = default;
std::string device_name(int) { unsupported("braid::cuda::device_name"); }
std::string pci_bus_id(int) { unsupported("braid::cuda::pci_bus_id"); }
int multiprocessor_count(int) { unsupported("braid::cuda::multiprocessor_count"); }

void reduce_into(void*, const void*, std::int64_t, DType, ReduceOp, void*) {
  unsupported("CUDA reduce");
}
void reduce3(void*, const void*, const void*, std::int64_t, DType, ReduceOp, void*) {
  unsupported("CUDA reduce");
}
void scale_avg(void*, std::int64_t, DType, int, void*) { unsupported("CUDA scale_avg"); }
void reduce_fan(void* const*, int, const void* const*, int, std::int64_t, DType, ReduceOp, void*) {
  unsupported("CUDA reduce_fan");
}

void copy(void*, const void*, std::size_t, void*) { unsupported("CUDA copy"); }
void fill_bytes(void*, int, std::size_t, void*) { unsupported("CUDA fill_bytes"); }
void* malloc_device(std::size_t) { unsupported("CUDA malloc_device"); }
void free_device(void*) noexcept {}
bool is_device_pointer(const void*) { return false; }

const char* memory_kind_name(MemoryKind k) {
  switch (k) {
    case MemoryKind::Host: return "host";
    case MemoryKind::PinnedHost: return "pinned host";
    case MemoryKind::Device: return "device";
    case MemoryKind::Managed: return "managed";
  }
  return "unknown";
}
PointerInfo pointer_info(const void*) { return {}; }  // without CUDA all memory is host memory

void* malloc_pinned(std::size_t) { unsupported("CUDA malloc_pinned"); }
void free_pinned(void*) noexcept {}
PinnedBuffer::PinnedBuffer(std::size_t) { unsupported("CUDA malloc_pinned"); }
PinnedBuffer::~PinnedBuffer() = default;
PinnedBuffer::PinnedBuffer(PinnedBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}
PinnedBuffer& PinnedBuffer::operator=(PinnedBuffer&& other) noexcept {
  data_ = std::exchange(other.data_, nullptr);
  size_ = std::exchange(other.size_, 0);
  return *this;
}

DeviceBuffer::DeviceBuffer(std::size_t) { unsupported("CUDA malloc_device"); }
DeviceBuffer::~DeviceBuffer() = default;
DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}
DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  data_ = std::exchange(other.data_, nullptr);
  size_ = std::exchange(other.size_, 0);
  return *this;
}

void stream_synchronize(void*) { unsupported("CUDA stream_synchronize"); }
bool stream_done(void*) { unsupported("CUDA stream_done"); }
void stream_wait_event(void*, const Event&) { unsupported("CUDA event"); }
Stream::Stream() { unsupported("CUDA stream"); }
Stream::~Stream() = default;
void Stream::synchronize() const { unsupported("CUDA stream_synchronize"); }

Event::Event(bool) { unsupported("CUDA event"); }
Event::~Event() = default;
void Event::record(void*) { unsupported("CUDA event"); }
bool Event::query() const { unsupported("CUDA event"); }
void Event::synchronize() const { unsupported("CUDA event"); }
void Event::wait_on(void*) const { unsupported("CUDA event"); }
float Event::elapsed_ms(const Event&, const Event&) { unsupported("CUDA event"); }
Event::Event(Event&& other) noexcept : event_(std::exchange(other.event_, nullptr)) {}
Event& Event::operator=(Event&& other) noexcept {
  event_ = std::exchange(other.event_, nullptr);
  return *this;
}

}  // namespace braid::cuda
