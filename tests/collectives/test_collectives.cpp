// Every collective x every algorithm that implements it x dtypes x ops, on
// real rank processes at world sizes 1..8, on the world and on a subgroup
// with a shuffled rank order, blocking and async. One launch of the ranks
// runs every case for its size; each rank checks its output against the
// reference, and results meant to be identical everywhere are compared across
// ranks bit for bit at the end.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdio>
#include <numeric>

#include <fmt/core.h>

#include "tests/mp/harness.hpp"
#include "tests/collectives/reference.hpp"
#include "algorithms/registry.hpp"

using namespace braid_test;
using braid::DType;
using braid::ReduceOp;
using braid::Tensor;
namespace plan = braid::plan;

namespace {

constexpr DType kDTypes[] = {DType::Float32, DType::Int32, DType::BFloat16, DType::Float64,
                             DType::Int8, DType::Float16, DType::Int64, DType::UInt8};
constexpr ReduceOp kOps[] = {ReduceOp::Sum, ReduceOp::Max, ReduceOp::Product, ReduceOp::Min,
                             ReduceOp::Avg, ReduceOp::BXor, ReduceOp::BAnd, ReduceOp::BOr};

struct Buf {
  DType dt;
  std::vector<unsigned char> bytes;
  Buf(DType d, std::int64_t n) : dt(d), bytes(static_cast<std::size_t>(std::max<std::int64_t>(n, 0)) * braid::dtype_size(d) + 1, 0xA5) {}
  std::int64_t count() const { return static_cast<std::int64_t>((bytes.size() - 1) / braid::dtype_size(dt)); }
  Tensor t(std::int64_t off = 0, std::int64_t n = -1) {
    return braid::tensor(bytes.data() + static_cast<std::size_t>(off) * braid::dtype_size(dt), n < 0 ? count() - off : n, dt);
  }
  double at(std::int64_t i) const { return get(dt, bytes.data(), i); }
  void set(std::int64_t i, double v) { put(dt, bytes.data(), i, v); }
};

// The context a rank runs cases in: which group, its members in order.
struct Ctx {
  const braid::Group* group = nullptr;  // null: world
  std::vector<int> members;             // global ranks in group order
  int me = 0;                           // my group rank
  int global = 0;
  std::uint64_t hash = 1469598103934665603ULL;  // over outputs equal on every rank
  int salt = 0;
  long cases = 0;
  int n() const { return static_cast<int>(members.size()); }
  braid::OpOptions opts(const std::string& algo, bool async) const {
    braid::OpOptions o;
    o.group = group;
    o.async_op = async;
    o.algorithm = algo.empty() ? nullptr : algo.c_str();
    return o;
  }
  void mix(const Buf& b, std::int64_t n) {
    for (std::size_t i = 0; i < static_cast<std::size_t>(n) * braid::dtype_size(b.dt); ++i)
      hash = (hash ^ b.bytes[i]) * 1099511628211ULL;
  }
};

std::string label(const Ctx& c, const char* coll, const std::string& algo, DType dt, ReduceOp op,
                  std::int64_t count, int root) {
  return fmt::format("{} algo={} dtype={} op={} count={} root={} n={} group={}", coll,
                     algo.empty() ? "auto" : algo, braid::dtype_name(dt), braid::reduce_op_name(op), count,
                     root, c.n(), c.group ? "sub" : "world");
}

void expect_eq(DType dt, double got, double want_raw, ReduceOp op, const std::string& what, std::int64_t i) {
  // The expected value as the dtype holds it (e.g. -8 as uint8 is 248).
  unsigned char tmp[8];
  put(dt, tmp, 0, want_raw);
  const double want = get(dt, tmp, 0);
  const bool ok = op == ReduceOp::Avg ? std::fabs(got - want) <= 1e-2 * std::fabs(want) + 1e-2 : got == want;
  RANK_CHECK_MSG(ok, what << ": element " << i << " is " << got << ", expected " << want);
}

void wait(braid::Work& w) { w.wait(); }

// Every algorithm of `coll` this backend can run: one-sided ones (oneshot,
// peer_read, ...) need a one-sided window: shared memory ("auto", "shm":
// every rank here is on one host) or RDMA ("verbs"); "tcp" has none.
std::vector<std::string> algos_for(plan::Collective coll) {
  const std::string backend = test_backend();
  const bool shared = backend == "auto" || backend == "shm" || backend == "verbs";
  std::vector<std::string> names{""};  // automatic choice
  for (const auto& name : plan::algorithm_names(coll)) {
    const plan::Algorithm* a = plan::find_algorithm(coll, name);
    plan::PlanArgs probe;
    probe.coll = coll;
    probe.nranks = 2;
    probe.count = 1;
    const bool one_host_only = a->supports && !a->supports(probe);
    if (one_host_only && !shared) continue;
    names.push_back(name);
  }
  return names;
}

void case_allreduce(Ctx& c, const std::string& algo, DType dt, ReduceOp op, std::int64_t count, bool async, bool inplace) {
  const auto what = label(c, "all_reduce", algo, dt, op, count, -1) + (inplace ? " in-place" : "");
  Buf in(dt, count), out(dt, count);
  for (std::int64_t i = 0; i < count; ++i) in.set(i, input_value(c.global, i, op, c.salt));
  auto w = inplace ? braid::all_reduce(in.t(), op, c.opts(algo, async))
                   : braid::all_reduce(in.t(), out.t(), op, c.opts(algo, async));
  wait(w);
  Buf& res = inplace ? in : out;
  for (std::int64_t i = 0; i < count; ++i)
    expect_eq(dt, res.at(i), reduce_ref(dt, op, c.members, i, c.salt), op, what, i);
  RANK_CHECK_MSG(res.bytes.back() == 0xA5, what << ": wrote past the end");
  c.mix(res, count);
}

void case_reduce(Ctx& c, const std::string& algo, DType dt, ReduceOp op, std::int64_t count, int root, bool async) {
  const auto what = label(c, "reduce", algo, dt, op, count, root);
  Buf in(dt, count), out(dt, count);
  for (std::int64_t i = 0; i < count; ++i) in.set(i, input_value(c.global, i, op, c.salt));
  Buf keep = in;
  auto w = braid::reduce(in.t(), out.t(), root, op, c.opts(algo, async));
  wait(w);
  if (c.global == root)
    for (std::int64_t i = 0; i < count; ++i)
      expect_eq(dt, out.at(i), reduce_ref(dt, op, c.members, i, c.salt), op, what, i);
  RANK_CHECK_MSG(in.bytes == keep.bytes, what << ": the input was modified");
}

// Out of place, the root's input stays as it was and its output gets the
// data (the message plans copy it there after their sends, in pieces when
// it is large: PlanBuilder::root_reads_input).
void case_broadcast(Ctx& c, const std::string& algo, DType dt, std::int64_t count, int root, bool async,
                    bool inplace = true) {
  const auto what = label(c, "broadcast", algo, dt, ReduceOp::Sum, count, root) + (inplace ? "" : " out of place");
  Buf b(dt, count), in(dt, count);
  Buf& src = inplace ? b : in;
  if (c.global == root)
    for (std::int64_t i = 0; i < count; ++i) src.set(i, input_value(root, i, ReduceOp::Sum, c.salt));
  const Buf keep = src;
  auto w = inplace ? braid::broadcast(b.t(), root, c.opts(algo, async))
                   : braid::broadcast(in.t(), b.t(), root, c.opts(algo, async));
  wait(w);
  for (std::int64_t i = 0; i < count; ++i) expect_eq(dt, b.at(i), input_value(root, i, ReduceOp::Sum, c.salt), ReduceOp::Sum, what, i);
  RANK_CHECK_MSG(b.bytes.back() == 0xA5, what << ": wrote past the end");
  if (!inplace) RANK_CHECK_MSG(in.bytes == keep.bytes, what << ": the input was modified");
  c.mix(b, count);
}

void case_allgather(Ctx& c, const std::string& algo, DType dt, std::int64_t count, bool async, bool list) {
  const auto what = label(c, list ? "all_gather(list)" : "all_gather_into_tensor", algo, dt, ReduceOp::Sum, count, -1);
  const int n = c.n();
  Buf in(dt, count), out(dt, count * n);
  for (std::int64_t i = 0; i < count; ++i) in.set(i, input_value(c.global, i, ReduceOp::Sum, c.salt));
  braid::Work w;
  std::vector<Buf> outs;
  if (list) {
    // Separate buffers: written block by block where the plan allows
    // (CompiledPlan::output_in_blocks), else staged and copied out.
    for (int r = 0; r < n; ++r) outs.emplace_back(dt, count);
    std::vector<Tensor> ts;
    for (auto& o : outs) ts.push_back(o.t());
    w = braid::all_gather(ts, in.t(), c.opts(algo, async));
  } else {
    w = braid::all_gather_into_tensor(out.t(), in.t(), c.opts(algo, async));
  }
  wait(w);
  for (int r = 0; r < n; ++r)
    for (std::int64_t i = 0; i < count; ++i) {
      const double got = list ? outs[static_cast<std::size_t>(r)].at(i) : out.at(r * count + i);
      expect_eq(dt, got, input_value(c.members[static_cast<std::size_t>(r)], i, ReduceOp::Sum, c.salt), ReduceOp::Sum, what, r * count + i);
    }
  for (const Buf& o : outs) RANK_CHECK_MSG(o.bytes.back() == 0xA5, what << ": wrote past the end of a block");
  if (!list) c.mix(out, count * n);
}

void case_gather_scatter(Ctx& c, const std::string& algo, DType dt, std::int64_t count, int root, bool async, bool gather) {
  const int n = c.n();
  if (gather) {
    const auto what = label(c, "gather", algo, dt, ReduceOp::Sum, count, root);
    Buf in(dt, count);
    for (std::int64_t i = 0; i < count; ++i) in.set(i, input_value(c.global, i, ReduceOp::Sum, c.salt));
    std::vector<Buf> outs;
    std::vector<Tensor> ts;
    for (int r = 0; r < n; ++r) outs.emplace_back(dt, count);
    for (auto& o : outs) ts.push_back(o.t());
    auto w = braid::gather(in.t(), c.global == root ? &ts : nullptr, root, c.opts(algo, async));
    wait(w);
    if (c.global == root)
      for (int r = 0; r < n; ++r)
        for (std::int64_t i = 0; i < count; ++i)
          expect_eq(dt, outs[static_cast<std::size_t>(r)].at(i), input_value(c.members[static_cast<std::size_t>(r)], i, ReduceOp::Sum, c.salt), ReduceOp::Sum, what, i);
  } else {
    const auto what = label(c, "scatter", algo, dt, ReduceOp::Sum, count, root);
    Buf out(dt, count), all(dt, count * n);
    std::vector<Tensor> ts;
    for (int r = 0; r < n; ++r) {
      for (std::int64_t i = 0; i < count; ++i) all.set(r * count + i, input_value(c.members[static_cast<std::size_t>(r)], i + 5, ReduceOp::Sum, c.salt));
      ts.push_back(all.t(r * count, count));  // contiguous: used in place
    }
    auto w = braid::scatter(out.t(), c.global == root ? &ts : nullptr, root, c.opts(algo, async));
    wait(w);
    for (std::int64_t i = 0; i < count; ++i)
      expect_eq(dt, out.at(i), input_value(c.global, i + 5, ReduceOp::Sum, c.salt), ReduceOp::Sum, what, i);
  }
}

void case_reduce_scatter(Ctx& c, const std::string& algo, DType dt, ReduceOp op, std::int64_t count, bool async, bool list) {
  const auto what = label(c, list ? "reduce_scatter(list)" : "reduce_scatter_tensor", algo, dt, op, count, -1);
  const int n = c.n();
  Buf in(dt, count * n), out(dt, count);
  for (std::int64_t i = 0; i < count * n; ++i) in.set(i, input_value(c.global, i, op, c.salt));
  braid::Work w;
  std::vector<Buf> ins;
  if (list) {
    for (int r = 0; r < n; ++r) {
      ins.emplace_back(dt, count);
      for (std::int64_t i = 0; i < count; ++i) ins.back().set(i, in.at(r * count + i));
    }
    std::vector<Tensor> ts;
    for (auto& b : ins) ts.push_back(b.t());
    w = braid::reduce_scatter(out.t(), ts, op, c.opts(algo, async));
  } else if (c.salt % 2) {
    w = braid::reduce_scatter_tensor(out.t(), in.t(), op, c.opts(algo, async));
  } else {
    // In place: the output is this rank's block of the input (NCCL's form).
    w = braid::reduce_scatter_tensor(in.t(c.me * count, count), in.t(), op, c.opts(algo, async));
  }
  wait(w);
  const Buf& res = (list || c.salt % 2) ? out : in;
  const std::int64_t base = (list || c.salt % 2) ? 0 : c.me * count;
  for (std::int64_t i = 0; i < count; ++i)
    expect_eq(dt, res.at(base + i), reduce_ref(dt, op, c.members, c.me * count + i, c.salt), op, what, i);
}

void case_alltoall(Ctx& c, const std::string& algo, DType dt, std::int64_t count, bool async, bool uneven) {
  const auto what = label(c, uneven ? "all_to_all_single(uneven)" : "all_to_all_single", algo, dt, ReduceOp::Sum, count, -1);
  const int n = c.n();
  // split(i, j): elements group rank i sends group rank j.
  auto split = [&](int i, int j) -> std::int64_t { return uneven ? (i * 3 + j * 5 + count) % 4 : count; };
  std::vector<std::int64_t> in_s, out_s;
  for (int j = 0; j < n; ++j) in_s.push_back(split(c.me, j));
  for (int i = 0; i < n; ++i) out_s.push_back(split(i, c.me));
  const auto in_n = std::accumulate(in_s.begin(), in_s.end(), std::int64_t{0});
  const auto out_n = std::accumulate(out_s.begin(), out_s.end(), std::int64_t{0});
  Buf in(dt, in_n), out(dt, out_n);
  // Element k of the block i -> j carries (i, j, k).
  auto val = [&](int i, int j, std::int64_t k) { return static_cast<double>((i * 11 + j * 5 + k + c.salt) % 23 - 11); };
  std::int64_t off = 0;
  for (int j = 0; j < n; ++j)
    for (std::int64_t k = 0; k < in_s[static_cast<std::size_t>(j)]; ++k) in.set(off++, val(c.me, j, k));
  auto w = uneven ? braid::all_to_all_single(out.t(), in.t(), out_s, in_s, c.opts(algo, async))
                  : braid::all_to_all_single(out.t(), in.t(), c.opts(algo, async));
  wait(w);
  off = 0;
  for (int i = 0; i < n; ++i)
    for (std::int64_t k = 0; k < out_s[static_cast<std::size_t>(i)]; ++k, ++off)
      expect_eq(dt, out.at(off), val(i, c.me, k), ReduceOp::Sum, what, off);
}

// Runs the whole matrix in context c. `big` adds counts past the eager limit
// and past the pipeline chunk (slower; done at a few sizes only).
void run_matrix(Ctx& c, bool big) {
  const int n = c.n();
  std::vector<std::int64_t> counts = {0, 1, n + 1, 1000};
  if (big) counts.push_back(150001);
  std::vector<int> roots = {c.members[0], c.members[static_cast<std::size_t>(n - 1)]};
  int k = 0;
  for (const auto& algo : algos_for(plan::Collective::AllReduce))
    for (auto count : counts)
      for (DType dt : kDTypes) {
        ReduceOp op = kOps[static_cast<std::size_t>(k++) % 8];
        while (!op_valid(dt, op)) op = kOps[static_cast<std::size_t>(k++) % 8];
        if (count > 1000 && dt != DType::Float32 && dt != DType::BFloat16) continue;
        ++c.salt;
        case_allreduce(c, algo, dt, op, count, (k % 3) == 0, (k % 2) == 0);
        ++c.cases;
      }
  for (const auto& algo : algos_for(plan::Collective::Reduce))
    for (auto count : counts)
      for (int root : roots) {
        DType dt = kDTypes[static_cast<std::size_t>(k++) % 8];
        ReduceOp op = kOps[static_cast<std::size_t>(k) % 8];
        while (!op_valid(dt, op)) op = kOps[static_cast<std::size_t>(k++) % 8];
        ++c.salt;
        case_reduce(c, algo, dt, op, count, root, (k % 4) == 0);
        ++c.cases;
      }
  for (const auto& algo : algos_for(plan::Collective::Broadcast))
    for (auto count : counts)
      for (int root : roots) {
        ++c.salt;
        const DType dt = kDTypes[static_cast<std::size_t>(k++) % 8];
        case_broadcast(c, algo, dt, count, root, (k % 3) == 0, (k % 2) == 0);
        ++c.cases;
      }
  // Out of place, large enough that the root's copy goes in pieces between
  // progress passes (2.4 MB of float64).
  if (big)
    for (const auto& algo : algos_for(plan::Collective::Broadcast)) {
      ++c.salt;
      case_broadcast(c, algo, DType::Float64, 300001, roots.back(), (k++ % 2) == 0, false);
      ++c.cases;
    }
  for (const auto& algo : algos_for(plan::Collective::AllGather))
    for (auto count : counts) {
      ++c.salt;
      const DType dt = kDTypes[static_cast<std::size_t>(k++) % 8];
      case_allgather(c, algo, dt, count, (k % 3) == 0, (k % 2) == 0);
      ++c.cases;
    }
  for (const auto& algo : algos_for(plan::Collective::Gather))
    for (auto count : counts)
      for (int root : roots) {
        ++c.salt;
        const DType dt = kDTypes[static_cast<std::size_t>(k++) % 8];
        case_gather_scatter(c, algo, dt, count, root, (k % 3) == 0, true);
        ++c.cases;
      }
  for (const auto& algo : algos_for(plan::Collective::Scatter))
    for (auto count : counts)
      for (int root : roots) {
        ++c.salt;
        const DType dt = kDTypes[static_cast<std::size_t>(k++) % 8];
        case_gather_scatter(c, algo, dt, count, root, (k % 3) == 0, false);
        ++c.cases;
      }
  for (const auto& algo : algos_for(plan::Collective::ReduceScatter))
    for (auto count : counts)
      for (DType dt : {DType::Float32, DType::Int64, DType::BFloat16, DType::Int8}) {
        ReduceOp op = kOps[static_cast<std::size_t>(k++) % 8];
        while (!op_valid(dt, op)) op = kOps[static_cast<std::size_t>(k++) % 8];
        if (count > 1000 && dt != DType::Float32) continue;
        ++c.salt;
        case_reduce_scatter(c, algo, dt, op, count, (k % 3) == 0, (k % 2) == 0);
        ++c.cases;
      }
  for (const auto& algo : algos_for(plan::Collective::AllToAll))
    for (auto count : counts)
      for (bool uneven : {false, true}) {
        if (uneven && (algo == "bruck" || algo == "peer_read")) continue;  // even splits only
        ++c.salt;
        const DType dt = kDTypes[static_cast<std::size_t>(k++) % 8];
        case_alltoall(c, algo, dt, count, (k % 3) == 0, uneven);
        ++c.cases;
      }
  braid::barrier(c.opts("", false));
  ++c.cases;
}

// Everyone sends its hash to the group's first member, which compares.
void check_identical(Ctx& c) {
  std::uint64_t h = c.hash;
  braid::OpOptions o{.group = c.group, .tag = 4242};
  if (c.me == 0) {
    for (int r = 1; r < c.n(); ++r) {
      std::uint64_t other = 0;
      const int from = braid::recv(braid::tensor(reinterpret_cast<std::int64_t*>(&other), 1), c.members[static_cast<std::size_t>(r)], o);
      RANK_CHECK_MSG(other == h, "rank " << from << "'s results differ from rank " << c.global << "'s");
    }
  } else {
    braid::send(braid::tensor(reinterpret_cast<std::int64_t*>(&h), 1), c.members[0], o);
  }
}

void run_world(int n, bool big) {
  auto res = run_ranks(n, [big](int rank, int world) {
    init_env();
    Ctx w;
    w.members.resize(static_cast<std::size_t>(world));
    std::iota(w.members.begin(), w.members.end(), 0);
    w.me = w.global = rank;
    run_matrix(w, big);
    check_identical(w);
    if (rank == 0) std::printf("world %d: %ld cases on the world group\n", world, w.cases);
    if (world >= 3) {
      // A subgroup of all ranks but one, in reverse order.
      std::vector<int> members;
      for (int r = world - 1; r >= 1; --r) members.push_back(r);
      braid::Group g = braid::new_group(members);
      if (g.rank() >= 0) {
        Ctx s;
        s.group = &g;
        s.members = members;
        s.me = g.rank();
        s.global = rank;
        run_matrix(s, false);
        check_identical(s);
      }
    }
    braid::barrier();
  }, {.timeout_s = 280, .env = {}});
  INFO("world " << n << ": " << describe(res));
  REQUIRE(all_ok(res));
}

}  // namespace

TEST_CASE("collectives at 1 rank", "[collectives]") { run_world(1, true); }
TEST_CASE("collectives at 2 ranks", "[collectives]") { run_world(2, true); }
TEST_CASE("collectives at 3 ranks", "[collectives]") { run_world(3, true); }
TEST_CASE("collectives at 4 ranks", "[collectives]") { run_world(4, false); }
TEST_CASE("collectives at 5 ranks", "[collectives]") { run_world(5, false); }
TEST_CASE("collectives at 6 ranks", "[collectives]") { run_world(6, false); }
TEST_CASE("collectives at 7 ranks", "[collectives]") { run_world(7, false); }
TEST_CASE("collectives at 8 ranks", "[collectives]") { run_world(8, true); }
