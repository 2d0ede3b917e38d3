// Why this file: all_reduce_coalesced and Bucketer take a list of tensors and
// copy them into packed buffers themselves, so they must refuse what plain
// all_reduce would refuse, before anything is issued, and name the list entry.
#include "src/api/checks.hpp"

#include <algorithm>
#include <cstdint>

#include "braid/process_group.hpp"
#include "src/common/errors.hpp"

#include <fmt/format.h>

namespace braid::api {

void check_group(const Group* group, const char* what) {
  // A Communicator's group needs no default group; no group means the default.
  if (!group && !is_initialized())
    fail(ErrorCode::InvalidState, "{}: Braid is not initialised: expected init_process_group first", what);
  if (!group) return;
  if (!group->valid())
    fail(ErrorCode::InvalidArgument,
         "{}: the group is an invalid Group: expected one made by braid::new_group() or braid::world()", what);
  if (group->rank() < 0)
    fail(ErrorCode::InvalidArgument, "{}: {} is not a member of the group (ranks {}): expected a member", what,
         is_initialized() ? fmt::format("rank {}", get_rank()) : std::string("this process"),
         fmt::join(group->ranks(), ", "));
}

void check_list_tensor(const std::vector<Tensor>& tensors, std::size_t i, ReduceOp op, const char* what) {
  const Tensor& t = tensors[i];
  if (static_cast<unsigned>(t.dtype) >= static_cast<unsigned>(kNumDTypes))
    fail(ErrorCode::InvalidArgument, "{}: tensors[{}] has an unknown dtype ({}): expected one of braid::DType",
         what, i, static_cast<int>(t.dtype));
  if (!t.device.is_cpu())
    fail(ErrorCode::NotSupported,
         "{}: tensors[{}] is a CUDA tensor (device {}): expected host memory ({} packs tensors on the CPU; "
         "all_reduce takes device tensors one at a time)",
         what, i, t.device.index, what);
  if (t.count < 0)
    fail(ErrorCode::InvalidArgument, "{}: tensors[{}] has a negative element count ({}): expected 0 or more", what, i,
         t.count);
  if (t.count > 0 && t.data == nullptr)
    fail(ErrorCode::InvalidArgument, "{}: tensors[{}] has {} elements but a null data pointer", what, i, t.count);
  const bool floating = dtype_is_floating(t.dtype);
  if (op == ReduceOp::Avg && !floating)
    fail(ErrorCode::InvalidArgument,
         "{}: tensors[{}] is {}, and Avg needs a floating dtype (float16, bfloat16, float32, float64)", what, i,
         dtype_name(t.dtype));
  if ((op == ReduceOp::BAnd || op == ReduceOp::BOr || op == ReduceOp::BXor) && floating)
    fail(ErrorCode::InvalidArgument, "{}: tensors[{}] is {}, and {} needs an integer dtype (int8, uint8, int32, int64)",
         what, i, dtype_name(t.dtype), reduce_op_name(op));
}

void check_no_overlap(const std::vector<Tensor>& tensors, const char* what) {
  struct Span {
    std::uintptr_t begin, end;
    std::size_t index;
  };
  std::vector<Span> spans;
  spans.reserve(tensors.size());
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const auto b = reinterpret_cast<std::uintptr_t>(tensors[i].data);
    if (tensors[i].nbytes() > 0) spans.push_back({b, b + tensors[i].nbytes(), i});
  }
  std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) { return a.begin < b.begin; });
  for (std::size_t k = 1; k < spans.size(); ++k)
    if (spans[k].begin < spans[k - 1].end) {
      const auto [lo, hi] = std::minmax(spans[k - 1].index, spans[k].index);
      fail(ErrorCode::InvalidArgument,
           "{}: tensors[{}] and tensors[{}] share memory: expected separate tensors (each is written with its own "
           "result)",
           what, lo, hi);
    }
}

}  // namespace braid::api
