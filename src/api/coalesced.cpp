// all_reduce_coalesced: many small tensors (a model's gradients, of several
// dtypes) reduced in one call. One all_reduce per tensor would pay each
// collective's fixed cost (a few microseconds, more between hosts) once per
// tensor; packing each dtype's tensors into one buffer pays it once per
// dtype. Built on the public all_reduce; the async form hands back one Work
// that covers every dtype's all_reduce and the copy back (src/runtime/work_chain).
#include <cstring>
#include <memory>
#include <vector>

#include "src/api/checks.hpp"
#include "braid/ops.hpp"
#include "src/runtime/context.hpp"
#include "src/runtime/work_chain.hpp"

namespace braid {

namespace {

constexpr const char* kWhat = "all_reduce_coalesced";

// The tensors of one dtype, and (for more than one) their packed buffer.
struct DTypeGroup {
  DType dtype;
  std::vector<std::size_t> members;  // indices into the caller's list, in list order
  std::int64_t count = 0;            // elements over all members
  std::shared_ptr<std::byte[]> packed;
};

void pack(const DTypeGroup& g, const std::vector<Tensor>& tensors) {
  std::byte* at = g.packed.get();
  for (std::size_t i : g.members) {
    if (tensors[i].nbytes()) std::memcpy(at, tensors[i].data, tensors[i].nbytes());
    at += tensors[i].nbytes();
  }
}

void unpack(const DTypeGroup& g, const std::vector<Tensor>& tensors) {
  const std::byte* at = g.packed.get();
  for (std::size_t i : g.members) {
    if (tensors[i].nbytes()) std::memcpy(tensors[i].data, at, tensors[i].nbytes());
    at += tensors[i].nbytes();
  }
}

}  // namespace

Work all_reduce_coalesced(const std::vector<Tensor>& tensors, ReduceOp op, const OpOptions& options) {
  // Everything is checked before anything is issued: every rank fails alike
  // on alike arguments, and no all_reduce is left half issued.
  for (std::size_t i = 0; i < tensors.size(); ++i) api::check_list_tensor(tensors, i, op, kWhat);
  api::check_no_overlap(tensors, kWhat);
  if (tensors.empty()) return Work();
  api::check_group(options.group, kWhat);

  std::vector<DTypeGroup> groups;  // in order of first appearance
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    DTypeGroup* g = nullptr;
    for (DTypeGroup& x : groups)
      if (x.dtype == tensors[i].dtype) g = &x;
    if (!g) g = &groups.emplace_back(DTypeGroup{tensors[i].dtype, {}, 0, nullptr});
    g->members.push_back(i);
    g->count += tensors[i].count;
  }
  for (DTypeGroup& g : groups)
    if (g.members.size() > 1) {
      g.packed = std::shared_ptr<std::byte[]>(new std::byte[static_cast<std::size_t>(g.count) * dtype_size(g.dtype)]);
      pack(g, tensors);  // at issue: the call reduces what the tensors hold now
    }
  auto reduced = [&](const DTypeGroup& g) {
    return g.packed ? tensor(g.packed.get(), g.count, g.dtype) : tensors[g.members[0]];
  };

  if (!options.async_op) {
    for (const DTypeGroup& g : groups) all_reduce(reduced(g), op, options);
    for (const DTypeGroup& g : groups)
      if (g.packed) unpack(g, tensors);
    return Work();
  }

  std::vector<Work> parts;
  parts.reserve(groups.size());
  try {
    for (const DTypeGroup& g : groups) parts.push_back(all_reduce(reduced(g), op, options));
  } catch (...) {
    // A later dtype's issue failed (group, timeout option): the issued ones
    // still use the packed buffers, which die with this frame.
    for (Work& p : parts) {
      try {
        p.wait();
      } catch (...) {
      }
    }
    throw;
  }
  const Deadline deadline = Deadline::after(op_timeout(options));  // after every part's
  // The tensor views are copied: the caller's vector may be gone when the
  // copy back runs (the memory they point to must not be).
  return detail::chain_after(std::move(parts),
                             [groups = std::move(groups), tensors] {
                               for (const DTypeGroup& g : groups)
                                 if (g.packed) unpack(g, tensors);
                             },
                             deadline, options);
}

}  // namespace braid
