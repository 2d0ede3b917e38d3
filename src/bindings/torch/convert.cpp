#include "convert.hpp"

#include "braid/error.hpp"

namespace braid_torch {

namespace {

[[noreturn]] void refuse(braid::ErrorCode code, const std::string& msg) { throw braid::Error(code, msg); }

// Braid's dtype for the storage of a (real-viewed) tensor.
braid::DType dtype_of(at::ScalarType s, const char* op, const char* name) {
  switch (s) {
    case at::kFloat: return braid::DType::Float32;
    case at::kDouble: return braid::DType::Float64;
    case at::kHalf: return braid::DType::Float16;
    case at::kBFloat16: return braid::DType::BFloat16;
    case at::kInt: return braid::DType::Int32;
    case at::kLong: return braid::DType::Int64;
    case at::kChar: return braid::DType::Int8;
    case at::kByte: return braid::DType::UInt8;
    case at::kBool: return braid::DType::UInt8;
    default:
      refuse(braid::ErrorCode::NotSupported,
             std::string(op) + ": " + name + " has dtype " + c10::toString(s) +
                 ", which Braid does not carry: expected float32, float64, float16, bfloat16, int8, uint8, "
                 "int32, int64, bool or complex64/complex128");
  }
}

}  // namespace

void Carry::finish() {
  for (auto& [mine, standin] : copy_back) mine.copy_(standin);
  copy_back.clear();
}

std::string describe(const at::Tensor& t) {
  std::string s = std::string(c10::toString(t.scalar_type())) + "[";
  for (int64_t i = 0; i < t.dim(); ++i) s += (i ? ", " : "") + std::to_string(t.size(i));
  return s + "]";
}

braid::Tensor view(const at::Tensor& t, bool written, Carry& carry, const char* op, const char* name) {
  if (!t.defined()) refuse(braid::ErrorCode::InvalidArgument, std::string(op) + ": " + name + " is undefined");
  braid::Device dev = braid::Device::cpu();
  if (t.is_cuda()) {
    // Braid's device path (CUDA IPC between local ranks, staging otherwise),
    // ordered on the legacy default stream, which torch's default stream is.
    dev = braid::Device::cuda(t.get_device());
  } else if (!t.device().is_cpu()) {
    refuse(braid::ErrorCode::NotSupported, std::string(op) + ": " + name + " is on " + t.device().str() +
                                               ": Braid carries CPU tensors (and CUDA ones where torch has CUDA)");
  }
  if (t.is_sparse()) refuse(braid::ErrorCode::NotSupported, std::string(op) + ": " + name + " is sparse: expected a dense tensor");
  at::Tensor c = t.is_contiguous() ? t : t.contiguous();
  if (written && !c.is_same(t)) carry.copy_back.emplace_back(t, c);
  carry.keep.push_back(c);
  at::Tensor r = c.is_complex() ? at::view_as_real(c) : c;
  return braid::Tensor{r.data_ptr(), r.numel(), dtype_of(r.scalar_type(), op, name), dev};
}

std::vector<braid::Tensor> views(const std::vector<at::Tensor>& ts, bool written, Carry& carry, const char* op,
                                 const char* name) {
  std::vector<braid::Tensor> out;
  out.reserve(ts.size());
  for (const auto& t : ts) out.push_back(view(t, written, carry, op, name));
  return out;
}

std::vector<braid::Tensor> root_list(const std::vector<std::vector<at::Tensor>>& lists, bool is_root, int root,
                                     bool written, Carry& carry, const char* op, const char* name) {
  if (is_root) {
    if (lists.size() != 1)
      refuse(braid::ErrorCode::InvalidArgument, std::string(op) + ": the root expects one " + name + ", got " +
                                                    std::to_string(lists.size()) + " lists");
    return views(lists[0], written, carry, op, name);
  }
  if (!lists.empty() && !lists[0].empty())
    refuse(braid::ErrorCode::InvalidArgument,
           std::string(op) + ": only the root (rank " + std::to_string(root) + ") passes " + name);
  return {};
}

braid::ReduceOp reduce_op(const c10d::ReduceOp& op, at::ScalarType dtype, const char* what) {
  const bool is_bool = dtype == at::kBool;
  const bool complex = at::isComplexType(dtype);
  auto no = [&](const char* name) -> braid::ReduceOp {
    refuse(braid::ErrorCode::NotSupported, std::string(what) + ": ReduceOp " + name + " is not supported on " +
                                               c10::toString(dtype) + " by the braid backend");
  };
  switch (op.op_) {
    case c10d::ReduceOp::SUM: return is_bool ? braid::ReduceOp::Max : braid::ReduceOp::Sum;
    case c10d::ReduceOp::AVG: return is_bool ? no("AVG") : braid::ReduceOp::Avg;
    case c10d::ReduceOp::PRODUCT:
      return is_bool ? braid::ReduceOp::Min : complex ? no("PRODUCT") : braid::ReduceOp::Product;
    case c10d::ReduceOp::MIN: return complex ? no("MIN") : braid::ReduceOp::Min;
    case c10d::ReduceOp::MAX: return complex ? no("MAX") : braid::ReduceOp::Max;
    case c10d::ReduceOp::BAND: return complex ? no("BAND") : braid::ReduceOp::BAnd;
    case c10d::ReduceOp::BOR: return complex ? no("BOR") : braid::ReduceOp::BOr;
    case c10d::ReduceOp::BXOR: return complex ? no("BXOR") : braid::ReduceOp::BXor;
    case c10d::ReduceOp::PREMUL_SUM: return no("PREMUL_SUM (NCCL only)");
    default: return no("UNUSED");
  }
}

const at::Tensor& single(const std::vector<at::Tensor>& ts, const char* op) {
  if (ts.size() != 1)
    refuse(braid::ErrorCode::InvalidArgument, std::string(op) + ": got " + std::to_string(ts.size()) +
                                                  " tensors: the braid backend takes exactly one per call "
                                                  "(one device per process)");
  return ts[0];
}

}  // namespace braid_torch
