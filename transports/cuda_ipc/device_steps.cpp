#include "transports/cuda_ipc/device_steps.hpp"

#include <thread>

#include "src/common/errors.hpp"
#include "cuda_kernels/cuda.hpp"
#include "transports/cuda_ipc/ipc.hpp"

namespace braid::detail {

DeviceSteps::DeviceSteps(void* stream, DType dtype, ReduceOp op) : stream_(stream), dtype_(dtype), op_(op) {}

shm::BufDesc DeviceSteps::describe(const void* p, std::size_t bytes, int device, shm::IpcDesc* ipc) {
  shm::BufDesc d;
  d.addr = reinterpret_cast<std::uint64_t>(p);
  d.bytes = bytes;
  d.cuda = device + 1;
  *ipc = shm::IpcDesc{};
  if (p && bytes) {
    const cuda_ipc::Export e = cuda_ipc::export_memory(p);
    ipc->handle = e.handle.bytes;
    ipc->offset = e.offset;
    ipc->buffer_id = e.buffer_id;
    d.base = d.addr - e.offset;
    d.size = e.size;
  }
  return d;
}

char* DeviceSteps::open_peer(shm::Window& w, int peer, const shm::BufDesc& d, const shm::IpcDesc& ipc,
                             std::uint64_t off) {
  if (off > d.bytes || !onesided::span_inside(0, d.size, ipc.offset, d.bytes))
    fail_peer(ErrorCode::Transport, w.world_rank(peer), "rank {} described a device buffer outside its allocation",
              w.world_rank(peer));
  auto& seen = w.ipc_seen(peer);
  bool known = false;
  for (std::size_t i = 0; i < seen.size();) {
    if (seen[i].buffer_id == ipc.buffer_id && seen[i].handle == ipc.handle) {
      known = true;
      ++i;
    } else if (seen[i].base < d.base + d.size && d.base < seen[i].base + seen[i].size) {
      cuda_ipc::Handle old;
      old.bytes = seen[i].handle;
      (void)cuda_ipc::evict(old);  // the peer freed it; a pinned one goes later, with the cache
      seen[i] = seen.back();
      seen.pop_back();
    } else {
      ++i;
    }
  }
  if (!known) seen.push_back({ipc.handle, d.base, d.size, ipc.buffer_id});
  cuda_ipc::Handle h;
  h.bytes = ipc.handle;
  char* base = static_cast<char*>(cuda_ipc::open_pinned(h));
  pinned_.push_back(ipc.handle);
  return base + ipc.offset + off;
}

void DeviceSteps::release_pins() {
  for (const auto& bytes : pinned_) {
    cuda_ipc::Handle h;
    h.bytes = bytes;
    cuda_ipc::unpin(h);
  }
  pinned_.clear();
}

DeviceSteps::~DeviceSteps() {
  if (pinned_.empty()) return;
  // Work that may read or write a peer's memory could still be running: the
  // mappings must outlive it (an error brought us here, or a plan ended
  // with a peer access after its last signal).
  try {
    flush();
    cuda::stream_synchronize(stream_);
  } catch (...) {
    return;  // keep them pinned: leaking a mapping beats closing one in use
  }
  release_pins();
}

bool DeviceSteps::wait_once(Clock::time_point from, Deadline until, const char* what) {
  // Spin (yielding) for the first milliseconds: a kernel of a large
  // collective takes hundreds of microseconds, and a sleep would add its
  // own latency. Then poll every 50 us.
  if (cuda::stream_done(stream_)) return true;
  if (Clock::now() - from < std::chrono::milliseconds(2)) {
    std::this_thread::yield();
    return false;
  }
  if (until.expired())
    fail(ErrorCode::Timeout, "{}: the work on its CUDA stream (the caller's earlier work, or this call's kernels) "
         "did not finish before the timeout", what);
  std::this_thread::sleep_for(std::chrono::microseconds(50));
  return false;
}

bool DeviceSteps::overlaps_a_source(const void* p, std::int64_t count) const {
  const auto bytes = static_cast<std::uintptr_t>(count) * dtype_size(dtype_);
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  for (int k = 0; k < fan_.nsrc; ++k) {
    const auto b = reinterpret_cast<std::uintptr_t>(fan_.src[k]);
    if (b != a && b < a + bytes && a < b + bytes) return true;
  }
  return false;
}

bool DeviceSteps::builds(const void* dst, std::int64_t count) const {
  return fan_.nsrc > 0 && fan_.ndst == 1 && fan_.dst[0] == dst && fan_.count == count;
}

void DeviceSteps::start(std::initializer_list<const void*> srcs, void* dst, std::int64_t count) {
  flush();
  for (const void* s : srcs) fan_.src[fan_.nsrc++] = s;
  fan_.dst[fan_.ndst++] = dst;
  fan_.count = count;
}

void DeviceSteps::copy(char* dst, const char* src, std::int64_t count) {
  if (count > 0 && dst != src) start({src}, dst, count);
}

void DeviceSteps::reduce(char* dst, const char* src, std::int64_t count) {
  if (count <= 0) return;
  if (builds(dst, count) && fan_.nsrc < kMax) fan_.src[fan_.nsrc++] = src;
  else start({dst, src}, dst, count);
}

void DeviceSteps::get(char* dst, const char* peer_src, std::int64_t count) {
  if (count > 0) start({peer_src}, dst, count);
}

void DeviceSteps::get_reduce(char* dst, const char* acc, const char* peer_src, std::int64_t count) {
  if (count <= 0) return;
  if (acc == dst && builds(dst, count) && fan_.nsrc < kMax) fan_.src[fan_.nsrc++] = peer_src;
  else start({acc, peer_src}, dst, count);
}

void DeviceSteps::put(char* peer_dst, const char* src, std::int64_t count) {
  if (count <= 0) return;
  // The held kernel computes src: store its result to the peer as well,
  // unless the destination overlaps a source at another offset (one thread
  // would write what another still reads).
  if (fan_.nsrc > 0 && fan_.dst[0] == src && fan_.count == count && fan_.ndst < kMax &&
      !overlaps_a_source(peer_dst, count)) {
    fan_.dst[fan_.ndst++] = peer_dst;
    return;
  }
  start({src}, peer_dst, count);
}

void DeviceSteps::flush() {
  if (fan_.nsrc == 0) return;
  Fan f = fan_;
  fan_ = Fan{};
  cuda::reduce_fan(f.dst, f.ndst, f.src, f.nsrc, f.count, dtype_, op_, stream_);
  dirty_ = true;
}

}  // namespace braid::detail
