// braid-bench's command line: nccl-tests' flags with nccl-tests' meanings,
// plus the Braid-specific --algo, --backend, --json and --csv.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "braid/ops.hpp"
#include "braid/tensor.hpp"

namespace bench {

struct Args {
  std::vector<std::string> collectives;  // "all" already expanded, in run order
  std::string command_line;              // as typed, for the header and the JSON
  std::uint64_t min_bytes = 32u << 20;   // nccl-tests' defaults: 32M .. 32M
  std::uint64_t max_bytes = 32u << 20;
  std::uint64_t step_factor = 2;         // > 1: multiply; else add step_bytes
  std::uint64_t step_bytes = 1u << 20;
  int iters = 20;
  int warmup = 5;
  bool check = true;
  std::vector<braid::ReduceOp> ops{braid::ReduceOp::Sum};  // -o all: several
  std::vector<braid::DType> dtypes{braid::DType::Float32};  // -d all: several
  int root = 0;
  // -a, nccl-tests' codes: 0 rank 0's time, 1 mean, 2 min, 3 max over ranks.
  // The default is max (the slowest rank bounds a collective), not nccl-tests' mean.
  int average = 3;
  std::string algo;          // empty: the library chooses
  std::string backend = "auto";
  std::string json_path, csv_path;
  int timeout_s = 300;
  int window = 64;  // bw: messages in flight per iteration
  bool shareable = false;  // -R 1: buffers from braid::mem_alloc
};

// Parses argv. On -h prints the usage and returns nullopt (exit 0); on a bad
// flag throws std::invalid_argument whose message says what was expected.
std::optional<Args> parse_args(int argc, char** argv);

// The size sequence -b..-e as nccl-tests walks it.
std::vector<std::uint64_t> sizes_of(const Args& a);

// nccl-tests' names: "float", "half", "bfloat16", "double", "int8", ...
const char* type_name(braid::DType dt);
const char* op_name(braid::ReduceOp op);  // "sum", "prod", "min", "max", "avg"

extern const char* const kUsage;

}  // namespace bench
