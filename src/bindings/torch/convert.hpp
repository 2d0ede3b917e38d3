// From torch's vocabulary to Braid's: tensors, dtypes and reduce ops.
//
// A torch tensor becomes a braid::Tensor view of its memory. Braid needs
// contiguous memory, so a non-contiguous tensor is carried by a contiguous
// stand-in (a copy) that is copied back into it when the op completes, if
// the op writes it. bool travels as uint8, complex as pairs of reals.
#pragma once

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include <string>
#include <vector>

#include "braid/ops.hpp"
#include "braid/tensor.hpp"

namespace braid_torch {

// What an op must do when it completes: copy stand-ins back into the
// tensors the caller passed, and keep every tensor alive until then.
struct Carry {
  std::vector<std::pair<at::Tensor, at::Tensor>> copy_back;  // (caller's, stand-in)
  std::vector<at::Tensor> keep;
  void finish();  // the copies back, in order
};

// The Braid view of `t` for an op named `op`. `written`: the op writes it
// (then a stand-in is copied back by carry.finish()). Refuses tensors Braid
// cannot carry, with a braid::Error saying which and why.
braid::Tensor view(const at::Tensor& t, bool written, Carry& carry, const char* op, const char* name);
std::vector<braid::Tensor> views(const std::vector<at::Tensor>& ts, bool written, Carry& carry, const char* op,
                                 const char* name);

// gather's outputs or scatter's inputs: one list on the root, none (or an
// empty one) elsewhere; the root's list as views.
std::vector<braid::Tensor> root_list(const std::vector<std::vector<at::Tensor>>& lists, bool is_root, int root,
                                     bool written, Carry& carry, const char* op, const char* name);

// The Braid reduce op for torch's `op` on tensors of `dtype`; bool's Sum and
// Product are its logical or and and (what they are on torch's bool).
braid::ReduceOp reduce_op(const c10d::ReduceOp& op, at::ScalarType dtype, const char* what);

// The one tensor of a per-device list (torch's multi-GPU form is not Braid's).
const at::Tensor& single(const std::vector<at::Tensor>& ts, const char* op);

std::string describe(const at::Tensor& t);  // "float32[4, 5]"

}  // namespace braid_torch
