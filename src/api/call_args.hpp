// The collective ops' argument checks and buffer set-up, shared by
// collectives.cpp and all_to_all.cpp: they turn a caller's tensors into a
// Call (src/runtime/call.hpp) that meets the plan's buffer contract.
//
// The small checks every call makes are inline: the small-message path runs
// through them on every call.
#pragma once

#include <initializer_list>
#include <vector>

#include "braid/ops.hpp"
#include "src/common/errors.hpp"
#include "src/runtime/call.hpp"

namespace braid::detail {

inline void same_dtype(const Tensor& a, const Tensor& b, const char* a_name, const char* b_name, const char* op) {
  if (a.dtype != b.dtype)
    fail(ErrorCode::InvalidArgument, "{}: {} has dtype {} but {} has {}: expected the same dtype", op,
         a_name, dtype_name(a.dtype), b_name, dtype_name(b.dtype));
}

inline void need_count(std::int64_t got, std::int64_t want, const char* what, const char* why, const char* op) {
  if (got != want)
    fail(ErrorCode::InvalidArgument, "{}: {} has {} elements: expected {} ({})", op, what, got, want, why);
}

// Whether two tensors share any byte (device tensors: of one device).
inline bool overlaps(const Tensor& a, const Tensor& b) {
  const auto* x = static_cast<const char*>(a.data);
  const auto* y = static_cast<const char*>(b.data);
  return a.nbytes() > 0 && b.nbytes() > 0 && x < y + b.nbytes() && y < x + a.nbytes();
}

// In place is one tensor passed as both input and output. Any other
// overlap is refused: the plans read the input while they write the output
// (a broadcast root sends from its input and fills its output last; the
// reads_input all-reduce plans read every rank's input as peers write), so
// the result would depend on the timing. Checked on every rank, so that all
// of them fail before any message is sent.
inline void same_or_apart(const Tensor& input, const Tensor& output, const char* op) {
  if (input.data != output.data && overlaps(input, output))
    fail(ErrorCode::InvalidArgument,
         "{}: the input overlaps the output without being it (it starts at byte offset {} of the output): in place, "
         "pass one tensor as both; out of place, they must not share memory",
         op, static_cast<const char*>(input.data) - static_cast<const char*>(output.data));
}

inline int root_of(const Call& c, int global_root, const char* name) {
  check_member(*c.group, global_root, name, c.what);
  return c.group->group_of_global[static_cast<std::size_t>(global_root)];
}

inline Call make(Collective coll, const char* what, const OpOptions& o) {
  Call c;
  c.coll = coll;
  c.what = what;
  c.group = group_of(o, what).get();
  c.stream = o.stream;
  return c;
}

struct Named {
  const Tensor* t;
  const char* name;  // for error messages
};

// Whether c runs directly on device memory (see call_args.cpp); sets
// c.device and c.device_algorithm when it does.
bool direct_device(Call& c, const OpOptions& o, std::initializer_list<Named> tensors);

// dst = src on the call's device and stream, deferred: a direct device
// call's copy before its plan (the root's or own block into Output).
std::function<void()> device_copy(const Call& c, void* dst, const void* src, std::size_t bytes);

// The tensor the plan works on in t's place: t, or its pinned stand-in.
Tensor stage(Call& c, const Tensor& t, StageDir dir, const char* name);
std::vector<Tensor> stage_list(Call& c, const std::vector<Tensor>& list, StageDir dir, const char* name);

// A list of n tensors of `count` elements each, checked: whether it already
// is one contiguous block in order.
bool contiguous_list(Call& c, const std::vector<Tensor>& list, int n, std::int64_t count, const Tensor& like,
                     const char* name);
// The same list, used in place when contiguous, else staged.
struct ListView {
  char* base = nullptr;
  bool staged = false;
};
ListView list_view(Call& c, const std::vector<Tensor>& list, int n, std::int64_t count, const Tensor& like,
                   const char* name);
// Copies block i of a staged contiguous buffer out to list[i].
void scatter_out(const std::vector<Tensor>& list, const char* base, std::size_t bytes);
// Copies list[i] into block i of a staging buffer.
void gather_in(char* base, const std::vector<Tensor>& list, std::size_t bytes);

// ReduceOp::Avg: divides `out` by the group size after the plan, when
// `applies` (the ranks that hold a result).
void avg_after(Call& c, void* out, std::int64_t count, bool applies);

}  // namespace braid::detail
