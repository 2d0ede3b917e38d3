#include "src/api/call_args.hpp"

#include <cstring>

#include "cuda_kernels/cuda.hpp"
#include "src/reduce/cpu_reduce.hpp"

namespace braid::detail {

namespace {

// Device tensors on a group whose ranks share a host run a one-sided plan
// directly on device memory: peers open each other's buffers through CUDA
// IPC and the plan's steps become kernels (device_steps.hpp). This is the
// algorithm each collective uses there by default, and the ones a caller
// may name; anything else (and groups spanning hosts) goes through pinned
// host stand-ins instead. Plans here must need no Scratch.
struct DeviceAlgorithms {
  Collective coll;
  const char* fallback;                   // when the caller names none
  std::initializer_list<const char*> named;  // also accepted by name
};
constexpr DeviceAlgorithms kDeviceAlgorithms[] = {
    {Collective::AllReduce, "push", {"push", "twoshot"}},
    {Collective::Broadcast, "peer_read", {"peer_read"}},
    {Collective::AllGather, "peer_read", {"peer_read"}},
    {Collective::ReduceScatter, "peer_read", {"peer_read"}},
};

}  // namespace

// Whether c runs directly on device memory (see above); sets c.device and
// c.device_algorithm when it does. Every rank decides alike when the ranks
// pass alike arguments (tensor kinds, algorithm name); a rank passing host
// memory where a peer passes device memory gets an error naming the peer.
bool direct_device(Call& c, const OpOptions& o, std::initializer_list<Named> tensors) {
  const auto& g = *c.group;
  if (!g.shared_memory || g.ranks.size() < 2) return false;
  int device = -1;
  for (const auto& [t, name] : tensors) {
    if (!t->device.is_cuda() || t->count <= 0) return false;
    if (device >= 0 && t->device.index != device) return false;  // staging names the mismatch
    device = t->device.index;
  }
  for (const auto& d : kDeviceAlgorithms) {
    if (d.coll != c.coll) continue;
    const char* name = d.fallback;
    if (o.algorithm) {
      name = nullptr;
      for (const char* n : d.named)
        if (std::strcmp(n, o.algorithm) == 0) name = n;
      if (!name) return false;
    }
    for (const auto& [t, tname] : tensors) {
      check_tensor(*t, tname, c.what);
      // Memory CUDA IPC cannot share (managed, a stream-ordered pool's, the
      // virtual memory API's) is staged. A peer that goes direct meanwhile
      // gets an error naming this rank (one_sided.cpp checks every buffer).
      const cuda::PointerInfo info = detail::check_device_memory(*t, tname, c.what);
      if (info.kind != cuda::MemoryKind::Device || !info.ipc_capable) return false;
    }
    c.device = device;
    c.device_algorithm = name;
    return true;
  }
  return false;
}


std::function<void()> device_copy(const Call& c, void* dst, const void* src, std::size_t bytes) {
  if (dst == src) return {};
  return [dst, src, bytes, device = c.device, stream = c.stream] { copy_on_device(device, stream, dst, src, bytes); };
}

namespace {

DeviceStaging& staging_of(Call& c) {
  if (!c.staging) c.staging = std::make_shared<DeviceStaging>(c.stream, c.what);
  return *c.staging;
}
}  // namespace

Tensor stage(Call& c, const Tensor& t, StageDir dir, const char* name) {
  if (t.device.is_cpu()) return t;
  return staging_of(c).stage(t, dir, name);
}

std::vector<Tensor> stage_list(Call& c, const std::vector<Tensor>& list, StageDir dir, const char* name) {
  bool host = true;
  for (const Tensor& t : list) host = host && t.device.is_cpu();
  if (host) return list;
  return staging_of(c).stage_list(list, dir, name);
}

bool contiguous_list(Call& c, const std::vector<Tensor>& list, int n, std::int64_t count, const Tensor& like,
                     const char* name) {
  if (static_cast<int>(list.size()) != n)
    fail(ErrorCode::InvalidArgument, "{}: {} has {} tensors: expected {} (the group size)", c.what, name,
         list.size(), n);
  bool contiguous = true;
  const std::size_t bytes = static_cast<std::size_t>(count) * dtype_size(like.dtype);
  for (int i = 0; i < n; ++i) {
    const Tensor& t = list[static_cast<std::size_t>(i)];
    check_tensor(t, name, c.what);
    same_dtype(t, like, name, "the other tensor", c.what);
    need_count(t.count, count, name, "every entry matches the single tensor", c.what);
    if (static_cast<char*>(t.data) != static_cast<char*>(list[0].data) + static_cast<std::size_t>(i) * bytes)
      contiguous = false;
  }
  return contiguous && n > 0;
}

ListView list_view(Call& c, const std::vector<Tensor>& list, int n, std::int64_t count, const Tensor& like,
                   const char* name) {
  if (contiguous_list(c, list, n, count, like, name)) return {static_cast<char*>(list[0].data), false};
  const std::size_t bytes = static_cast<std::size_t>(count) * dtype_size(like.dtype);
  auto b = alloc(bytes * static_cast<std::size_t>(n));
  c.keep.push_back(b);
  return {b.get(), true};
}

void scatter_out(const std::vector<Tensor>& list, const char* base, std::size_t bytes) {
  for (std::size_t i = 0; i < list.size(); ++i) copy_bytes(list[i].data, base + i * bytes, bytes);
}

void gather_in(char* base, const std::vector<Tensor>& list, std::size_t bytes) {
  for (std::size_t i = 0; i < list.size(); ++i) copy_bytes(base + i * bytes, list[i].data, bytes);
}

void avg_after(Call& c, void* out, std::int64_t count, bool applies) {
  if (c.op != ReduceOp::Avg || !applies) return;
  const int n = static_cast<int>(c.group->ranks.size());
  const DType dt = c.dtype;
  auto prev = c.after;
  c.after = [prev, out, count, dt, n, device = c.device, stream = c.stream] {
    if (prev) prev();
    if (device < 0) return reduction::scale_avg(out, count, dt, n);
    cuda::DeviceGuard on(device);
    cuda::scale_avg(out, count, dt, n, stream);
  };
}

}  // namespace braid::detail
