// Names and small helpers of the public value types.
#include "braid/error.hpp"
#include "braid/ops.hpp"
#include "braid/tensor.hpp"
#include "src/common/errors.hpp"

namespace braid {

const char* error_code_name(ErrorCode code) {
  switch (code) {
    case ErrorCode::InvalidArgument: return "invalid argument";
    case ErrorCode::InvalidState: return "invalid state";
    case ErrorCode::Timeout: return "timeout";
    case ErrorCode::PeerFailure: return "peer failure";
    case ErrorCode::Transport: return "transport error";
    case ErrorCode::Store: return "store error";
    case ErrorCode::NotSupported: return "not supported";
    case ErrorCode::Internal: return "internal error";
  }
  return "?";
}

std::size_t dtype_size(DType dt) {
  switch (dt) {
    case DType::Int8:
    case DType::UInt8: return 1;
    case DType::Float16:
    case DType::BFloat16: return 2;
    case DType::Int32:
    case DType::Float32: return 4;
    case DType::Int64:
    case DType::Float64: return 8;
  }
  fail(ErrorCode::InvalidArgument, "unknown dtype {}: expected one of int8, uint8, int32, int64, "
       "float16, bfloat16, float32, float64", static_cast<int>(dt));
}

const char* dtype_name(DType dt) {
  switch (dt) {
    case DType::Int8: return "int8";
    case DType::UInt8: return "uint8";
    case DType::Int32: return "int32";
    case DType::Int64: return "int64";
    case DType::Float16: return "float16";
    case DType::BFloat16: return "bfloat16";
    case DType::Float32: return "float32";
    case DType::Float64: return "float64";
  }
  return "?";
}

bool dtype_is_floating(DType dt) {
  return dt == DType::Float16 || dt == DType::BFloat16 || dt == DType::Float32 ||
         dt == DType::Float64;
}

Tensor Tensor::slice(std::int64_t offset, std::int64_t n) const {
  if (offset < 0 || n < 0 || offset > count || n > count - offset)
    fail(ErrorCode::InvalidArgument,
         "slice [{}, {}) is outside the tensor of {} elements", offset, offset + n, count);
  Tensor t = *this;
  t.data = static_cast<char*>(data) + static_cast<std::size_t>(offset) * element_size();
  t.count = n;
  return t;
}

const char* reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return "sum";
    case ReduceOp::Product: return "prod";
    case ReduceOp::Min: return "min";
    case ReduceOp::Max: return "max";
    case ReduceOp::Avg: return "avg";
    case ReduceOp::BAnd: return "band";
    case ReduceOp::BOr: return "bor";
    case ReduceOp::BXor: return "bxor";
  }
  return "?";
}

}  // namespace braid
