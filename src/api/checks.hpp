// Argument checks shared by the training helpers in src/api (coalesced
// all_reduce, Bucketer): each names the offending tensor by its index in the
// caller's list.
#pragma once

#include <cstddef>
#include <vector>

#include "braid/group.hpp"
#include "braid/ops.hpp"
#include "braid/tensor.hpp"

namespace braid::api {

// Braid is initialised, and `group` (null: the default group) is valid and
// has this rank as a member.
void check_group(const Group* group, const char* what);
// tensors[i] is a usable host tensor whose dtype supports `op`.
void check_list_tensor(const std::vector<Tensor>& tensors, std::size_t i, ReduceOp op, const char* what);
// No two tensors of the list share a byte.
void check_no_overlap(const std::vector<Tensor>& tensors, const char* what);

}  // namespace braid::api
