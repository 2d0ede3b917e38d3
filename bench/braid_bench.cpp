// braid-bench: "the nccl-tests of Braid". For each size it times an operation
// out of place and in place (mean over -n iterations after -w warm-ups, a
// barrier before the timed loop, the time combined over ranks with a Braid
// collective), then, outside the timing, fills fresh inputs, runs the op once
// more and checks every output element against what this rank computes it
// must be. Rank 0 prints nccl-tests' table; the exit status is 1 if any
// element was wrong.
//
//   braidrun -n 4 braid-bench allreduce -b 8 -e 128M -f 2
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "braid/braid.hpp"
#include "bench_args.hpp"
#include "bench_ops.hpp"
#include "bench_report.hpp"
#include "src/common/progress.hpp"

namespace bench {
namespace {

bool is_integer(braid::DType d) {
  return d == braid::DType::Int8 || d == braid::DType::UInt8 || d == braid::DType::Int32 || d == braid::DType::Int64;
}

// This rank's seconds combined over ranks as -a asks (nccl-tests' codes).
double combine(double local, int average) {
  double v = local;
  const braid::Tensor t = braid::tensor(&v, 1);
  switch (average) {
    case 0: braid::broadcast(t, 0); return v;
    case 1: braid::all_reduce(t, braid::ReduceOp::Sum); return v / braid::get_world_size();
    case 2: braid::all_reduce(t, braid::ReduceOp::Min); return v;
    default: braid::all_reduce(t, braid::ReduceOp::Max); return v;
  }
}

std::int64_t sum_over_ranks(std::int64_t local) {
  std::int64_t v = local;
  braid::all_reduce(braid::tensor(&v, 1), braid::ReduceOp::Sum);
  return v;
}

Figures measure(const Op& op, Ctx& c, bool in_place, const Args& a) {
  using Clock = std::chrono::steady_clock;
  Figures f;
  f.present = true;
  op.fill(c, in_place);  // sane inputs for the timed runs too
  for (int i = 0; i < a.warmup; ++i) op.run(c, in_place);
  braid::barrier();
  const auto t0 = Clock::now();
  for (int i = 0; i < a.iters; ++i) op.run(c, in_place);
  const std::chrono::duration<double> dt = Clock::now() - t0;
  const double sec = combine(dt.count() / a.iters / op.time_divisor(), a.average);
  f.time_us = sec * 1e6;
  f.algbw = sec > 0 ? static_cast<double>(c.lay.bytes) / 1e9 / sec : 0;
  f.busbw = f.algbw * op.bus_factor(c.nranks);
  if (a.check) {
    op.fill(c, in_place);
    op.run(c, in_place);
    f.wrong = sum_over_ranks(op.check(c, in_place));
  }
  return f;
}

// "#  Rank  0 Pid  12345 on host" for every rank, gathered to all. Hosts
// emulated on one machine (network namespaces, tools/cluster) may share a
// hostname; where two ranks on different namespaces do, each line also
// names its network namespace, as Braid tells the hosts apart by it.
std::vector<std::string> rank_lines(int n, const std::string& backend) {
  constexpr std::size_t kLine = 160;
  char host[64] = {};
  ::gethostname(host, sizeof host - 1);
  struct stat ns{};
  const unsigned long long netns = ::stat("/proc/self/ns/net", &ns) == 0 ? ns.st_ino : 0;
  std::vector<char> mine(kLine, '\0');
  const std::string key = fmt::format("{}|{}|{}", ::getpid(), netns, host);
  std::memcpy(mine.data(), key.data(), std::min(key.size(), kLine - 1));
  std::vector<char> all(kLine * static_cast<std::size_t>(n));
  braid::all_gather_into_tensor(braid::tensor(all), braid::tensor(mine));
  struct Where {
    std::string pid, netns, host;
  };
  std::vector<Where> where;
  for (int r = 0; r < n; ++r) {
    const std::string k(all.data() + static_cast<std::size_t>(r) * kLine);
    const auto a = k.find('|'), b = k.find('|', a + 1);
    where.push_back({k.substr(0, a), k.substr(a + 1, b - a - 1), k.substr(b + 1)});
  }
  std::vector<std::string> out;
  for (const Where& w : where) {
    const bool collides = std::any_of(where.begin(), where.end(),
                                      [&](const Where& o) { return o.host == w.host && o.netns != w.netns; });
    out.push_back(fmt::format("#  Rank {:>2} Pid {:>6} on {:>10}{} backend {}", out.size(), w.pid, w.host,
                              collides ? " netns " + w.netns : "", backend));
  }
  return out;
}

int run(const Args& a) {
  const int rank = braid::get_rank();
  const int n = braid::get_world_size();
  const bool lead = rank == 0;
  std::FILE* out = stdout;
  braid::Progress progress(lead);  // on a terminal: the size being measured

  std::vector<std::unique_ptr<Op>> ops;
  for (const auto& name : a.collectives) ops.push_back(make_op(name, a.window));
  const bool any_rooted = std::any_of(ops.begin(), ops.end(), [](const auto& o) { return o->rooted(); });
  if (any_rooted && a.root >= n) {
    if (lead) fmt::print(stderr, "braid-bench: -r {}: expected a root rank in 0..{}\n", a.root, n - 1);
    return 2;
  }
  if (ops.size() == 1 && n < ops[0]->min_ranks()) {
    if (lead) fmt::print(stderr, "braid-bench: {} needs at least {} ranks, this job has {}\n", ops[0]->name(),
                         ops[0]->min_ranks(), n);
    return 2;
  }

  RunInfo info;
  info.command_line = a.command_line;
  info.version = BRAID_VERSION;
  info.nranks = n;
  info.backend = fmt::format("{} (requested {}); buffers: {}", braid::get_backend(), a.backend,
                             a.shareable ? "braid::mem_alloc (-R 1)" : "aligned_alloc");
  bench::Buffer::shareable = a.shareable;
  const char* env_algo = std::getenv("BRAID_ALGO");
  info.algorithm = !a.algo.empty() ? a.algo
                   : (env_algo && *env_algo) ? fmt::format("BRAID_ALGO={}", env_algo)
                                             : std::string("auto (cost model)");
  info.min_bytes = a.min_bytes;
  info.max_bytes = a.max_bytes;
  info.step_is_factor = a.step_factor > 1;
  info.step = info.step_is_factor ? a.step_factor : a.step_bytes;
  info.warmup = a.warmup;
  info.iters = a.iters;
  info.check = a.check ? 1 : 0;
  info.average = a.average;
  info.rank_lines = rank_lines(n, braid::get_backend());
  if (lead) print_run_header(out, info);

  const std::vector<std::uint64_t> sizes = sizes_of(a);
  // The first call of a shape builds its plan (the cost model prices every
  // algorithm: up to a millisecond at 8 ranks). The call that combines the
  // times is a shape of its own, and a rank that left its timed loop first
  // would build its plan while slower ranks are still in theirs: with more
  // ranks than CPUs that stalls them, and the time they report. Built here.
  combine(0.0, a.average);
  std::vector<Row> all_rows;
  std::vector<std::string> failures;
  const char* algo = a.algo.empty() ? nullptr : a.algo.c_str();

  for (const auto& op : ops) {
    if (n < op->min_ranks()) {
      if (lead) fmt::print(out, "#\n# {} skipped: it needs at least {} ranks\n", op->name(), op->min_ranks());
      continue;
    }
    if (lead) print_table_header(out, op->name());
    std::vector<Row> rows;
    // barrier moves no data: one row, whatever -d and -o say.
    const std::vector<braid::DType> dtypes =
        op->sized() ? a.dtypes : std::vector<braid::DType>{a.dtypes.front()};
    const std::vector<braid::ReduceOp> rops =
        op->reduces() ? a.ops : std::vector<braid::ReduceOp>{braid::ReduceOp::Sum};
    for (const braid::DType dt : dtypes) {
      for (const braid::ReduceOp rop : rops) {
        if (op->reduces() && rop == braid::ReduceOp::Avg && is_integer(dt)) continue;  // Braid: floats only
        Ctx c(dt, rop, op->rooted() ? a.root : 0, rank, n, op->reduces(), algo);
        const std::vector<std::uint64_t> my_sizes = op->sized() ? sizes : std::vector<std::uint64_t>{0};
        std::int64_t max_send = 0, max_recv = 0;
        for (auto s : my_sizes) {
          const Layout l = op->layout(s, c.esize, n);
          max_send = std::max(max_send, l.send_elems);
          max_recv = std::max(max_recv, l.recv_elems);
        }
        c.send.reserve(static_cast<std::size_t>(max_send) * c.esize);
        c.recv.reserve(static_cast<std::size_t>(max_recv) * c.esize);
        std::size_t done = 0;
        for (auto s : my_sizes) {
          c.lay = op->layout(s, c.esize, n);
          progress.show(fmt::format("braid-bench: {} {} {}: size {} of {} ({} bytes)", op->name(),
                                    op->sized() ? type_name(dt) : "", op->reduces() ? op_name(rop) : "", ++done,
                                    my_sizes.size(), c.lay.bytes));
          Row r;
          r.collective = op->name();
          r.size = c.lay.bytes;
          r.count = c.lay.count;
          r.type = op->sized() ? type_name(dt) : "none";
          r.redop = op->reduces() ? op_name(rop) : "none";
          r.root = op->rooted() ? a.root : -1;
          r.out_of_place = measure(*op, c, false, a);
          if (op->has_in_place()) r.in_place = measure(*op, c, true, a);
          progress.done();
          if (lead) print_row(out, r);
          for (const auto& [place, f] : {std::pair{"out-of-place", &r.out_of_place}, std::pair{"in-place", &r.in_place}})
            if (f->present && f->wrong > 0)
              failures.push_back(fmt::format("{} {} {} size {} (count {}) {}: {} wrong elements", r.collective, r.type,
                                             r.redop, r.size, r.count, place, f->wrong));
          rows.push_back(std::move(r));
        }
      }
    }
    if (lead) print_table_footer(out, op->name(), rows);
    all_rows.insert(all_rows.end(), rows.begin(), rows.end());
  }

  if (lead) {
    if (!a.json_path.empty()) write_json(a.json_path, info, all_rows);
    if (!a.csv_path.empty()) write_csv(a.csv_path, all_rows);
    for (const auto& f : failures) fmt::print(out, "# FAILED: {}\n", f);
    std::fflush(out);
  }
  braid::barrier();  // nobody tears down while rank 0 still writes
  return failures.empty() ? 0 : 1;
}

}  // namespace
}  // namespace bench

int main(int argc, char** argv) {
  const char* env_rank = std::getenv("RANK");
  const bool lead = !env_rank || std::strcmp(env_rank, "0") == 0;
  std::optional<bench::Args> args;
  try {
    args = bench::parse_args(argc, argv);
  } catch (const std::invalid_argument& e) {
    if (lead) fmt::print(stderr, "braid-bench: {}\n", e.what());
    return 2;
  }
  if (!args) return 0;
  int rank = -1;
  try {
    braid::init_process_group({.backend = args->backend, .timeout = std::chrono::seconds(args->timeout_s)});
    rank = braid::get_rank();
    const int rc = bench::run(*args);
    braid::destroy_process_group();
    return rc;
  } catch (const braid::Error& e) {
    fmt::print(stderr, "braid-bench: rank {}: {} error: {}\n", rank, braid::error_code_name(e.code()), e.what());
  } catch (const std::exception& e) {
    fmt::print(stderr, "braid-bench: rank {}: {}\n", rank, e.what());
  }
  return 1;
}
