// RAII owners for libibverbs objects: each one is destroyed exactly once, in
// the reverse order of its dependencies when members are declared in the
// order of creation (context, pd, channel, cq, mr, qp).
#pragma once

#include <infiniband/verbs.h>

#include <memory>

namespace braid::verbs {

struct ContextDeleter {
  void operator()(ibv_context* p) const { ibv_close_device(p); }
};
struct PdDeleter {
  void operator()(ibv_pd* p) const { ibv_dealloc_pd(p); }
};
struct ChannelDeleter {
  void operator()(ibv_comp_channel* p) const { ibv_destroy_comp_channel(p); }
};
struct CqDeleter {
  void operator()(ibv_cq* p) const { ibv_destroy_cq(p); }
};
struct MrDeleter {
  void operator()(ibv_mr* p) const { ibv_dereg_mr(p); }
};
struct QpDeleter {
  void operator()(ibv_qp* p) const { ibv_destroy_qp(p); }
};
struct DeviceListDeleter {
  void operator()(ibv_device** p) const { ibv_free_device_list(p); }
};

using ContextPtr = std::unique_ptr<ibv_context, ContextDeleter>;
using PdPtr = std::unique_ptr<ibv_pd, PdDeleter>;
using ChannelPtr = std::unique_ptr<ibv_comp_channel, ChannelDeleter>;
using CqPtr = std::unique_ptr<ibv_cq, CqDeleter>;
using MrPtr = std::unique_ptr<ibv_mr, MrDeleter>;
using QpPtr = std::unique_ptr<ibv_qp, QpDeleter>;
using DeviceListPtr = std::unique_ptr<ibv_device*, DeviceListDeleter>;

// Page-aligned memory for buffers the HCA reads and writes.
struct FreeDeleter {
  void operator()(void* p) const;
};
using AlignedBuffer = std::unique_ptr<std::uint8_t[], FreeDeleter>;
AlignedBuffer allocate_aligned(std::size_t bytes);

}  // namespace braid::verbs
