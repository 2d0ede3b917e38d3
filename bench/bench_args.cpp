#include "bench_args.hpp"

#include <braid/version.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <stdexcept>

namespace bench {

using braid::DType;
using braid::ReduceOp;

const char* const kUsage =
    "usage: braidrun -n N braid-bench COLLECTIVE [options]\n"
    "COLLECTIVE: allreduce broadcast reduce allgather gather scatter reducescatter alltoall\n"
    "            sendrecv pingpong barrier all; bw (ranks 0 and 1, not part of all)\n"
    "  -b, --minbytes SIZE     smallest size (K/M/G suffixes; default 32M)\n"
    "  -e, --maxbytes SIZE     largest size (default 32M)\n"
    "  -f, --stepfactor F      multiply the size by F each step (default 2)\n"
    "  -i, --stepbytes SIZE    add SIZE each step instead of multiplying\n"
    "  -n, --iters N           timed iterations per size (default 20)\n"
    "  -w, --warmup_iters N    untimed iterations before them (default 5)\n"
    "  -c, --check 0|1         verify every output element (default 1)\n"
    "  -o, --op OP             sum prod min max avg all (default sum)\n"
    "  -d, --datatype TYPE     float half bfloat16 double int8 uint8 int32 int64 all (default float)\n"
    "  -r, --root R            root of broadcast, reduce, gather, scatter (default 0)\n"
    "  -a, --average 0|1|2|3   time reported: rank 0's, mean, min, max over ranks (default 3 = max)\n"
    "  --algo NAME             force an algorithm (OpOptions::algorithm); not with 'all', where\n"
    "                          BRAID_ALGO='allreduce:ring;broadcast:tree' does the same per collective\n"
    "  --backend NAME          InitOptions::backend (default auto)\n"
    "  -R, --register 0|1      1: buffers from braid::mem_alloc, which peers on the host read in\n"
    "                          place (zero copy), and OpOptions::shareable_buffers says so to the\n"
    "                          automatic choice; 0: aligned_alloc, read with one copy (default 0)\n"
    "  --window W              bw: messages in flight per iteration (default 64)\n"
    "  --timeout SECONDS       deadline for every wait, init included (default 300)\n"
    "  --json FILE, --csv FILE also write the figures there (rank 0)\n"
    "  -h, --help              show this help\n"
    "  --version               show braid-bench's version\n"
    "Sizes, counts and bus bandwidth follow nccl-tests: 'size' is the larger of a rank's input and\n"
    "output, algbw = size / time, busbw = algbw x (2(n-1)/n allreduce; (n-1)/n allgather,\n"
    "reducescatter, alltoall, gather, scatter; 1 otherwise). pingpong runs between ranks 0 and 1;\n"
    "its time is half a round trip.\n"
    "bw is osu_bw / ib_write_bw: per iteration rank 0 posts W isends of the size to rank 1, rank 1\n"
    "W irecvs, then rank 1 acks with 1 byte; time is per message, algbw = W x size x iters / time.\n";

namespace {

const std::vector<std::string> kAll = {"allreduce", "broadcast",     "reduce",   "allgather",
                                       "gather",    "scatter",       "reducescatter", "alltoall",
                                       "sendrecv",  "pingpong",      "barrier"};

[[noreturn]] void bad(const std::string& msg) { throw std::invalid_argument(msg); }

std::uint64_t parse_uint(const std::string& flag, const std::string& text, bool allow_suffix) {
  std::uint64_t v = 0;
  const char* first = text.data();
  const char* last = first + text.size();
  auto [p, ec] = std::from_chars(first, last, v);
  if (ec != std::errc() || p == first)
    bad(fmt::format("{} '{}': expected a non-negative integer{}", flag, text,
                    allow_suffix ? " with an optional K, M or G suffix" : ""));
  std::uint64_t mult = 1;
  if (p != last) {
    if (!allow_suffix || p + 1 != last)
      bad(fmt::format("{} '{}': unexpected '{}' after the number", flag, text, std::string(p, last)));
    switch (*p) {
      case 'k': case 'K': mult = 1ull << 10; break;
      case 'm': case 'M': mult = 1ull << 20; break;
      case 'g': case 'G': mult = 1ull << 30; break;
      default: bad(fmt::format("{} '{}': unknown suffix '{}': expected K, M or G", flag, text, *p));
    }
  }
  if (v > UINT64_MAX / mult) bad(fmt::format("{} '{}': too large", flag, text));
  return v * mult;
}

int parse_int(const std::string& flag, const std::string& text, int lo, int hi) {
  const std::uint64_t v = parse_uint(flag, text, false);
  if (v < static_cast<std::uint64_t>(lo) || v > static_cast<std::uint64_t>(hi))
    bad(fmt::format("{} {}: expected {}..{}", flag, text, lo, hi));
  return static_cast<int>(v);
}

std::vector<DType> parse_dtype(const std::string& s) {
  // nccl-tests' spellings, plus the torch-style ones.
  if (s == "float" || s == "float32" || s == "f32") return {DType::Float32};
  if (s == "half" || s == "float16" || s == "f16" || s == "fp16") return {DType::Float16};
  if (s == "bfloat16" || s == "bf16") return {DType::BFloat16};
  if (s == "double" || s == "float64" || s == "f64") return {DType::Float64};
  if (s == "int8" || s == "char") return {DType::Int8};
  if (s == "uint8") return {DType::UInt8};
  if (s == "int32" || s == "int") return {DType::Int32};
  if (s == "int64") return {DType::Int64};
  if (s == "all")
    return {DType::Int8, DType::UInt8, DType::Int32, DType::Int64,
            DType::Float16, DType::Float32, DType::Float64, DType::BFloat16};
  if (s == "uint32" || s == "uint64")
    bad(fmt::format("-d {}: Braid has no {} dtype: expected float, half, bfloat16, double, int8, uint8, "
                    "int32, int64 or all", s, s));
  bad(fmt::format("-d {}: unknown dtype: expected float, half, bfloat16, double, int8, uint8, int32, "
                  "int64 or all", s));
}

std::vector<ReduceOp> parse_op(const std::string& s) {
  if (s == "sum") return {ReduceOp::Sum};
  if (s == "prod") return {ReduceOp::Product};
  if (s == "min") return {ReduceOp::Min};
  if (s == "max") return {ReduceOp::Max};
  if (s == "avg") return {ReduceOp::Avg};
  if (s == "all") return {ReduceOp::Sum, ReduceOp::Product, ReduceOp::Max, ReduceOp::Min, ReduceOp::Avg};
  bad(fmt::format("-o {}: unknown op: expected sum, prod, min, max, avg or all", s));
}

}  // namespace

const char* type_name(DType dt) {
  switch (dt) {
    case DType::Int8: return "int8";
    case DType::UInt8: return "uint8";
    case DType::Int32: return "int32";
    case DType::Int64: return "int64";
    case DType::Float16: return "half";
    case DType::BFloat16: return "bfloat16";
    case DType::Float32: return "float";
    case DType::Float64: return "double";
  }
  return "?";
}

const char* op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return "sum";
    case ReduceOp::Product: return "prod";
    case ReduceOp::Min: return "min";
    case ReduceOp::Max: return "max";
    case ReduceOp::Avg: return "avg";
    default: return "?";
  }
}

std::optional<Args> parse_args(int argc, char** argv) {
  Args a;
  a.command_line = "braid-bench";
  for (int i = 1; i < argc; ++i) a.command_line += fmt::format(" {}", argv[i]);

  std::vector<std::string> v(argv + 1, argv + argc);
  if (std::find(v.begin(), v.end(), "-h") != v.end() || std::find(v.begin(), v.end(), "--help") != v.end()) {
    std::fputs(kUsage, stdout);
    return std::nullopt;
  }
  if (std::find(v.begin(), v.end(), "--version") != v.end()) {
    std::printf("braid-bench (Braid) %s\n", BRAID_VERSION);
    return std::nullopt;
  }
  if (v.empty() || v[0].starts_with("-"))
    bad("the first argument must name the collective: allreduce, broadcast, reduce, allgather, gather, "
        "scatter, reducescatter, alltoall, sendrecv, pingpong, barrier, bw or all (see --help)");
  const std::string coll = v[0];
  if (coll == "all") {
    a.collectives = kAll;
  } else if (coll == "bw" || std::find(kAll.begin(), kAll.end(), coll) != kAll.end()) {
    a.collectives = {coll};
  } else {
    bad(fmt::format("unknown collective '{}': expected one of allreduce, broadcast, reduce, allgather, "
                    "gather, scatter, reducescatter, alltoall, sendrecv, pingpong, barrier, bw, all", coll));
  }

  for (std::size_t i = 1; i < v.size(); ++i) {
    const std::string& f = v[i];
    auto value = [&]() -> const std::string& {
      if (i + 1 >= v.size()) bad(fmt::format("{} needs a value", f));
      return v[++i];
    };
    if (f == "-b" || f == "--minbytes") a.min_bytes = parse_uint(f, value(), true);
    else if (f == "-e" || f == "--maxbytes") a.max_bytes = parse_uint(f, value(), true);
    else if (f == "-f" || f == "--stepfactor") {
      a.step_factor = parse_uint(f, value(), false);
      if (a.step_factor < 2) bad(fmt::format("-f {}: expected a factor of 2 or more", a.step_factor));
    } else if (f == "-i" || f == "--stepbytes") {
      a.step_bytes = parse_uint(f, value(), true);
      if (a.step_bytes == 0) bad("-i 0: expected a positive step");
      a.step_factor = 1;  // as nccl-tests: -i switches to additive steps
    } else if (f == "-n" || f == "--iters") a.iters = parse_int(f, value(), 1, 1 << 30);
    else if (f == "-w" || f == "--warmup_iters") a.warmup = parse_int(f, value(), 0, 1 << 30);
    else if (f == "-c" || f == "--check") a.check = parse_int(f, value(), 0, 1) != 0;
    else if (f == "-o" || f == "--op") a.ops = parse_op(value());
    else if (f == "-d" || f == "--datatype") a.dtypes = parse_dtype(value());
    else if (f == "-r" || f == "--root") a.root = parse_int(f, value(), 0, 1 << 20);
    else if (f == "-a" || f == "--average") a.average = parse_int(f, value(), 0, 3);
    else if (f == "--algo") a.algo = value();
    else if (f == "--backend") a.backend = value();
    else if (f == "--window") a.window = parse_int(f, value(), 1, 1 << 16);
    else if (f == "-R" || f == "--register") a.shareable = parse_int(f, value(), 0, 1) != 0;
    else if (f == "--timeout") a.timeout_s = parse_int(f, value(), 1, 1 << 24);
    else if (f == "--json") a.json_path = value();
    else if (f == "--csv") a.csv_path = value();
    else bad(fmt::format("unknown flag '{}' (see --help)", f));
  }
  if (a.min_bytes > a.max_bytes)
    bad(fmt::format("-b {} is larger than -e {}: expected minbytes <= maxbytes", a.min_bytes, a.max_bytes));
  if (!a.algo.empty() && a.collectives.size() > 1)
    bad("--algo names one algorithm of one collective; with 'all' set BRAID_ALGO instead "
        "(e.g. BRAID_ALGO='allreduce:ring;broadcast:tree')");
  const bool int_type = std::any_of(a.dtypes.begin(), a.dtypes.end(), [](DType d) {
    return d == DType::Int8 || d == DType::UInt8 || d == DType::Int32 || d == DType::Int64;
  });
  // -o avg with an integer dtype named explicitly is a mistake; with -o all or
  // -d all the bench just skips the pairs Braid does not define.
  if (int_type && a.dtypes.size() == 1 && a.ops.size() == 1 && a.ops[0] == ReduceOp::Avg)
    bad(fmt::format("-o avg -d {}: Braid defines avg only for floating dtypes (half, bfloat16, float, "
                    "double)", type_name(a.dtypes[0])));
  return a;
}

std::vector<std::uint64_t> sizes_of(const Args& a) {
  std::vector<std::uint64_t> out;
  for (std::uint64_t s = a.min_bytes; s <= a.max_bytes;) {
    out.push_back(s);
    const std::uint64_t next = a.step_factor > 1 ? s * a.step_factor : s + a.step_bytes;
    if (next <= s) break;  // 0 * factor, or overflow
    s = next;
  }
  return out;
}

}  // namespace bench
