// CUDA IPC with CUDA: compiled against cuda_runtime_api.h where CUDA is built
// (ipc_stub.cpp elsewhere).
#include "transports/cuda_ipc/ipc.hpp"

#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>

#include "cuda_kernels/runtime_detail.hpp"
#include "src/common/errors.hpp"

namespace braid::cuda_ipc {

using cuda::available;
using cuda::require_available;
using cuda::MemoryKind;
using cuda::PointerInfo;
using cuda::memory_kind_name;
using cuda::pointer_info;
using cuda::detail::AddressRangeFn;
using cuda::detail::PointerAttributeFn;
using cuda::detail::address_range_fn;
using cuda::detail::check;
using cuda::detail::code_of;
using cuda::detail::fail_cuda;
using cuda::detail::pointer_attribute_fn;

namespace {

static_assert(sizeof(cudaIpcMemHandle_t) == sizeof(Handle::bytes));
static_assert(sizeof(cudaIpcEventHandle_t) == sizeof(Handle::bytes));

// Opened peer allocations, by handle bytes. cudaIpcOpenMemHandle may map a
// given handle only once per process (a second open fails), so every user in
// the process must share one mapping: this table is that sharing. A mapping
// keeps the exporter's memory alive after it frees it, so the table is
// bounded, by count and by bytes; to make room it closes the least recently
// used mapping that no enqueued work may still use (not pinned).
class IpcCache {
 public:
  static constexpr std::size_t kMaxOpen = 64;

  ~IpcCache() { close_all(); }  // at exit; errors are moot by then

  void* open(const Handle& h, bool pin) {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = open_.find(h.bytes); it != open_.end()) {
      it->second.last_use = ++clock_;
      it->second.pins += pin ? 1 : 0;
      return it->second.base;
    }
    cudaIpcMemHandle_t handle;
    std::memcpy(&handle, h.bytes.data(), sizeof handle);
    void* p = nullptr;
    const cudaError_t e = cudaIpcOpenMemHandle(&p, handle, cudaIpcMemLazyEnablePeerAccess);
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      fail(code_of(e), "cudaIpcOpenMemHandle: {}: {} (the handle must come from ipc_export in "
           "another process on this host, whose allocation is still alive)",
           cudaGetErrorName(e), cudaGetErrorString(e));
    }
    std::size_t bytes = 0;
    if (AddressRangeFn fn = address_range_fn()) {
      CUdeviceptr base = 0;
      if (fn(&base, &bytes, reinterpret_cast<CUdeviceptr>(p)) != CUDA_SUCCESS) bytes = 0;
    }
    make_room(bytes);
    open_.emplace(h.bytes, Mapping{p, ++clock_, bytes, pin ? 1 : 0});
    bytes_ += bytes;
    return p;
  }

  void unpin(const Handle& h) {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = open_.find(h.bytes); it != open_.end() && it->second.pins > 0) --it->second.pins;
  }

  bool evict(const Handle& h) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = open_.find(h.bytes);
    if (it == open_.end() || it->second.pins > 0) return false;
    const cudaError_t e = close(it);
    if (e != cudaSuccess) fail_cuda(e, "cudaIpcCloseMemHandle");
    return true;
  }

  void close_all() noexcept {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [bytes, m] : open_) (void)cudaIpcCloseMemHandle(m.base);
    open_.clear();
    bytes_ = 0;
    (void)cudaGetLastError();
  }

  std::size_t size() {
    std::lock_guard<std::mutex> lock(mu_);
    return open_.size();
  }

 private:
  struct Mapping {
    void* base;
    std::uint64_t last_use;
    std::size_t bytes;
    int pins;
  };
  using Map = std::map<std::array<unsigned char, 64>, Mapping>;

  cudaError_t close(Map::iterator it) {
    const cudaError_t e = cudaIpcCloseMemHandle(it->second.base);
    if (e != cudaSuccess) (void)cudaGetLastError();
    bytes_ -= it->second.bytes;
    open_.erase(it);
    return e;
  }

  // Closes unpinned mappings, least recently used first, until one more of
  // `incoming` bytes fits both bounds (or nothing unpinned is left).
  void make_room(std::size_t incoming) {
    if (byte_cap_ == 0) {
      std::size_t free_b = 0, total = 0;
      byte_cap_ = std::size_t{1} << 30;
      if (cudaMemGetInfo(&free_b, &total) == cudaSuccess) byte_cap_ = std::max(byte_cap_, total / 4);
      else (void)cudaGetLastError();
    }
    while (open_.size() >= kMaxOpen || (bytes_ + incoming > byte_cap_ && !open_.empty())) {
      auto oldest = open_.end();
      for (auto it = open_.begin(); it != open_.end(); ++it)
        if (it->second.pins == 0 && (oldest == open_.end() || it->second.last_use < oldest->second.last_use))
          oldest = it;
      if (oldest == open_.end()) return;  // all in use: go over the bounds rather than break a kernel
      (void)close(oldest);
    }
  }

  std::mutex mu_;
  std::uint64_t clock_ = 0;
  std::size_t bytes_ = 0, byte_cap_ = 0;
  Map open_;
};

IpcCache& ipc_cache() {
  static IpcCache cache;
  return cache;
}

}  // namespace

Export export_memory(const void* p) {
  require_available("CUDA ipc_export");
  const PointerInfo info = pointer_info(p);
  if (info.kind != MemoryKind::Device)
    fail(ErrorCode::InvalidArgument, "CUDA ipc_export: {} is {} memory: expected memory from "
         "cudaMalloc (only that can be shared through CUDA IPC)", p, memory_kind_name(info.kind));
  if (info.base == nullptr)
    fail(ErrorCode::NotSupported, "CUDA ipc_export: the driver gave no cuMemGetAddressRange, so "
         "the allocation holding {} cannot be found", p);
  Export out;
  // Exporting is slow next to a small collective, and a program passes the
  // same buffers call after call: handles are cached by allocation, keyed
  // by the driver's buffer id so a new allocation at a freed one's address
  // gets its own handle, never the stale one.
  std::uint64_t id = 0;
  const PointerAttributeFn attr = pointer_attribute_fn();
  if (!info.ipc_capable)
    fail(ErrorCode::InvalidArgument, "CUDA ipc_export: {} is device memory CUDA IPC cannot share (a stream-ordered "
         "pool's or the virtual memory API's): expected memory from cudaMalloc", p);
  // (pointer_info above made sure a context is current for driver calls.)
  const bool keyed = attr && attr(&id, CU_POINTER_ATTRIBUTE_BUFFER_ID, reinterpret_cast<CUdeviceptr>(info.base)) ==
                                 CUDA_SUCCESS;
  static std::mutex mu;
  static std::map<std::uint64_t, Handle> exported;  // buffer id -> handle
  {
    std::lock_guard<std::mutex> lock(mu);
    auto it = keyed ? exported.find(id) : exported.end();
    if (it != exported.end()) {
      out.handle = it->second;
    } else {
      cudaIpcMemHandle_t handle;
      check(cudaIpcGetMemHandle(&handle, info.base), "cudaIpcGetMemHandle");
      std::memcpy(out.handle.bytes.data(), &handle, sizeof handle);
      if (keyed) {
        if (exported.size() >= 1024) exported.clear();  // bounded; ids of freed buffers never return
        exported.emplace(id, out.handle);
      }
    }
  }
  out.offset = static_cast<std::size_t>(static_cast<const char*>(p) -
                                        static_cast<const char*>(info.base));
  out.size = info.size;
  out.device = info.device;
  out.buffer_id = keyed ? id : 0;
  return out;
}

void* open(const Handle& h) {
  require_available("CUDA ipc_open");
  return ipc_cache().open(h, false);
}

void* open_pinned(const Handle& h) {
  require_available("CUDA ipc_open");
  return ipc_cache().open(h, true);
}

void unpin(const Handle& h) {
  if (available()) ipc_cache().unpin(h);
}

bool evict(const Handle& h) {
  require_available("CUDA ipc_evict");
  return ipc_cache().evict(h);
}

void evict_all() noexcept {
  if (available()) ipc_cache().close_all();
}

std::size_t open_count() { return available() ? ipc_cache().size() : 0; }

cuda::Event interprocess_event() {
  require_available("CUDA interprocess event");
  cudaEvent_t e = nullptr;
  check(cudaEventCreateWithFlags(&e, cudaEventInterprocess | cudaEventDisableTiming),
        "cudaEventCreateWithFlags(interprocess)");
  return cuda::Event::adopt(e);
}

Handle event_handle(const cuda::Event& event) {
  cudaIpcEventHandle_t handle;
  check(cudaIpcGetEventHandle(&handle, static_cast<cudaEvent_t>(event.get())),
        "cudaIpcGetEventHandle (the event must come from interprocess_event())");
  Handle h;
  std::memcpy(h.bytes.data(), &handle, sizeof handle);
  return h;
}

cuda::Event open_event(const Handle& h) {
  require_available("CUDA open interprocess event");
  cudaIpcEventHandle_t handle;
  std::memcpy(&handle, h.bytes.data(), sizeof handle);
  cudaEvent_t e = nullptr;
  check(cudaIpcOpenEventHandle(&e, handle), "cudaIpcOpenEventHandle");
  return cuda::Event::adopt(e);
}

}  // namespace braid::cuda_ipc
