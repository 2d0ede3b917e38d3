#include "core/device_steps.hpp"

#include "common/errors.hpp"
#include "cuda_kernels/cuda.hpp"

namespace braid::detail {


DeviceSteps::DeviceSteps(void* stream, DType dtype, ReduceOp op) : stream_(stream), dtype_(dtype), op_(op) {}

shm::BufDesc DeviceSteps::describe(const void* p, std::size_t bytes, int device, shm::IpcDesc* ipc) {
  shm::BufDesc d;
  d.addr = reinterpret_cast<std::uint64_t>(p);
  d.bytes = bytes;
  d.cuda = device + 1;
  *ipc = shm::IpcDesc{};
  if (p && bytes) {
    const cuda::IpcExport e = cuda::ipc_export(p);
    ipc->handle = e.handle.bytes;
    ipc->offset = e.offset;
    d.base = d.addr - e.offset;
    d.size = e.size;
  }
  return d;
}

char* DeviceSteps::open_peer(const shm::BufDesc& d, const shm::IpcDesc& ipc, std::uint64_t off) {
  cuda::IpcHandle h;
  h.bytes = ipc.handle;
  return static_cast<char*>(cuda::ipc_open(h)) + ipc.offset + off;
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
  // The held kernel computes src: store its result to the peer as well.
  if (fan_.nsrc > 0 && fan_.dst[0] == src && fan_.count == count && fan_.ndst < kMax) {
    fan_.dst[fan_.ndst++] = peer_dst;
    return;
  }
  start({src}, peer_dst, count);
}

void DeviceSteps::flush() {
  if (fan_.nsrc == 0) return;
  const Fan f = fan_;
  fan_ = Fan{};
  cuda::reduce_fan(const_cast<void* const*>(f.dst), f.ndst, f.src, f.nsrc, f.count, dtype_, op_, stream_);
  dirty_ = true;
}

void DeviceSteps::settle() {
  flush();
  if (!dirty_) return;
  // A host-side wait, not an event: recording one is GPU work, and ranks
  // sharing a GPU pay a context switch for every piece of GPU work each
  // submits (time-slicing between processes), however small.
  cuda::stream_synchronize(stream_);
  dirty_ = false;
}

}  // namespace braid::detail
