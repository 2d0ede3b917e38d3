// The training helpers on real rank processes: all_reduce_coalesced (mixed
// dtypes and sizes, blocking and async, on a subgroup, errors), Bucketer
// (bucket formation, several rounds marked in different orders on different
// ranks, Avg, a subgroup, errors) and DistributedSampler's defaults from the
// process group.
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <numeric>
#include <random>
#include <thread>

#include "tests/mp/harness.hpp"

using namespace braid_test;
using braid::DType;
using braid::ErrorCode;
using braid::ReduceOp;
using braid::Tensor;
using Layout = std::vector<std::vector<std::size_t>>;

namespace {

// A tensor of any dtype whose elements are small integers (exact in every
// dtype, bfloat16 included, for the sums these tests make).
struct Buf {
  DType dt;
  std::vector<unsigned char> bytes;
  Buf(DType d, std::int64_t n) : dt(d), bytes(static_cast<std::size_t>(n) * braid::dtype_size(d)) {}
  std::int64_t count() const { return static_cast<std::int64_t>(bytes.size() / braid::dtype_size(dt)); }
  Tensor t() { return braid::tensor(bytes.data(), count(), dt); }
  void set(std::int64_t i, double v) {
    unsigned char* p = bytes.data() + static_cast<std::size_t>(i) * braid::dtype_size(dt);
    switch (dt) {
      case DType::Int8: { auto x = static_cast<std::int8_t>(v); std::memcpy(p, &x, 1); break; }
      case DType::UInt8: { auto x = static_cast<std::uint8_t>(v); std::memcpy(p, &x, 1); break; }
      case DType::Int32: { auto x = static_cast<std::int32_t>(v); std::memcpy(p, &x, 4); break; }
      case DType::Int64: { auto x = static_cast<std::int64_t>(v); std::memcpy(p, &x, 8); break; }
      case DType::Float32: { auto x = static_cast<float>(v); std::memcpy(p, &x, 4); break; }
      case DType::Float64: { std::memcpy(p, &v, 8); break; }
      case DType::BFloat16: {
        auto f = static_cast<float>(v);
        std::uint32_t u;
        std::memcpy(&u, &f, 4);
        auto h = static_cast<std::uint16_t>(u >> 16);  // exact for small integers
        std::memcpy(p, &h, 2);
        break;
      }
      default: fail_rank("Buf::set: dtype not used by these tests");
    }
  }
  double at(std::int64_t i) const {
    const unsigned char* p = bytes.data() + static_cast<std::size_t>(i) * braid::dtype_size(dt);
    switch (dt) {
      case DType::Int8: { std::int8_t x; std::memcpy(&x, p, 1); return x; }
      case DType::UInt8: { std::uint8_t x; std::memcpy(&x, p, 1); return x; }
      case DType::Int32: { std::int32_t x; std::memcpy(&x, p, 4); return x; }
      case DType::Int64: { std::int64_t x; std::memcpy(&x, p, 8); return static_cast<double>(x); }
      case DType::Float32: { float x; std::memcpy(&x, p, 4); return x; }
      case DType::Float64: { double x; std::memcpy(&x, p, 8); return x; }
      case DType::BFloat16: {
        std::uint16_t h;
        std::memcpy(&h, p, 2);
        std::uint32_t u = std::uint32_t{h} << 16;
        float f;
        std::memcpy(&f, &u, 4);
        return f;
      }
      default: fail_rank("Buf::at: dtype not used by these tests");
    }
  }
};

// Element j of tensor i on `rank` in round `round`, and its sum over ranks.
double value(int rank, std::size_t i, std::int64_t j, int round = 0) {
  return (rank + 1) * (round + 1) + static_cast<double>(i) + static_cast<double>(j % 5);
}
double sum_over(const std::vector<int>& ranks, std::size_t i, std::int64_t j, int round = 0) {
  double s = 0;
  for (int r : ranks) s += value(r, i, j, round);
  return s;
}
std::vector<int> all_ranks(int world) {
  std::vector<int> v(static_cast<std::size_t>(world));
  std::iota(v.begin(), v.end(), 0);
  return v;
}

std::vector<Buf> make_bufs(const std::vector<std::pair<DType, std::int64_t>>& spec) {
  std::vector<Buf> bufs;
  for (auto [dt, n] : spec) bufs.emplace_back(dt, n);
  return bufs;
}
void fill(std::vector<Buf>& bufs, int rank, int round = 0) {
  for (std::size_t i = 0; i < bufs.size(); ++i)
    for (std::int64_t j = 0; j < bufs[i].count(); ++j) bufs[i].set(j, value(rank, i, j, round));
}
std::vector<Tensor> views(std::vector<Buf>& bufs) {
  std::vector<Tensor> v;
  for (Buf& b : bufs) v.push_back(b.t());
  return v;
}
// Every element of every tensor is `want(i, j)`.
template <class F>
void check(const std::vector<Buf>& bufs, F want, const char* what) {
  for (std::size_t i = 0; i < bufs.size(); ++i)
    for (std::int64_t j = 0; j < bufs[i].count(); ++j)
      RANK_CHECK_MSG(bufs[i].at(j) == want(i, j), what << ": tensor " << i << " (" << braid::dtype_name(bufs[i].dt)
                                                       << ") element " << j << " is " << bufs[i].at(j)
                                                       << ", expected " << want(i, j));
}

// Mixed dtypes and sizes, an empty tensor, two dtypes with one tensor each.
const std::vector<std::pair<DType, std::int64_t>> kMixed = {
    {DType::Float32, 5},  {DType::Int32, 3},     {DType::Float64, 1}, {DType::Float32, 1000},
    {DType::Int64, 7},    {DType::BFloat16, 9},  {DType::Int32, 0},   {DType::Float32, 1},
    {DType::Int32, 4096}, {DType::UInt8, 2},
};

void expect_all_ok(const std::vector<RankResult>& res) {
  INFO(describe(res));
  REQUIRE(all_ok(res));
}

}  // namespace

// --- all_reduce_coalesced -----------------------------------------------------

TEST_CASE("all_reduce_coalesced: mixed dtypes and sizes, blocking and async", "[train][coalesced]") {
  expect_all_ok(run_ranks(3, [](int rank, int world) {
    init_env();
    const auto everyone = all_ranks(world);
    auto bufs = make_bufs(kMixed);
    // Blocking.
    fill(bufs, rank);
    braid::Work w = braid::all_reduce_coalesced(views(bufs), ReduceOp::Sum);
    RANK_CHECK(w.is_completed());
    check(bufs, [&](std::size_t i, std::int64_t j) { return sum_over(everyone, i, j); }, "blocking");
    // Async, waited for.
    fill(bufs, rank, 1);
    w = braid::all_reduce_coalesced(views(bufs), ReduceOp::Sum, {.async_op = true});
    w.wait();
    RANK_CHECK(w.is_success());
    check(bufs, [&](std::size_t i, std::int64_t j) { return sum_over(everyone, i, j, 1); }, "async");
    // Async, never waited for: once is_completed() says so, the results are
    // back in the tensors (the copy out of the packed buffers is part of it).
    fill(bufs, rank, 2);
    w = braid::all_reduce_coalesced(views(bufs), ReduceOp::Sum, {.async_op = true});
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (!w.is_completed()) {
      RANK_CHECK_MSG(std::chrono::steady_clock::now() < until, "async all_reduce_coalesced did not complete");
      std::this_thread::yield();
    }
    RANK_CHECK(w.exception() == nullptr);
    check(bufs, [&](std::size_t i, std::int64_t j) { return sum_over(everyone, i, j, 2); }, "async, polled");
    // Several in flight at once, then an ordinary collective behind them.
    auto other = make_bufs(kMixed);
    fill(bufs, rank, 3);
    fill(other, rank, 4);
    braid::Work a = braid::all_reduce_coalesced(views(bufs), ReduceOp::Max, {.async_op = true});
    braid::Work b = braid::all_reduce_coalesced(views(other), ReduceOp::Min, {.async_op = true});
    std::vector<float> plain(3, static_cast<float>(rank));
    braid::all_reduce(braid::tensor(plain), ReduceOp::Sum);
    b.wait();
    a.wait();
    check(bufs, [&](std::size_t i, std::int64_t j) { return value(world - 1, i, j, 3); }, "max");
    check(other, [&](std::size_t i, std::int64_t j) { return value(0, i, j, 4); }, "min");
    RANK_CHECK(plain[0] == static_cast<float>(world * (world - 1) / 2));
    // An empty list is a completed Work.
    RANK_CHECK(braid::all_reduce_coalesced({}, ReduceOp::Sum, {.async_op = true}).is_completed());
  }));
}

TEST_CASE("all_reduce_coalesced: Avg, on a subgroup with its own rank order", "[train][coalesced]") {
  expect_all_ok(run_ranks(4, [](int rank, int) {
    init_env();
    braid::Group g = braid::new_group({3, 1});
    if (g.rank() >= 0) {
      auto bufs = make_bufs({{DType::Float32, 33}, {DType::Float64, 2}, {DType::BFloat16, 4}, {DType::Float32, 7}});
      fill(bufs, rank);
      braid::all_reduce_coalesced(views(bufs), ReduceOp::Avg, {.group = &g, .async_op = true}).wait();
      check(bufs, [&](std::size_t i, std::int64_t j) { return sum_over({1, 3}, i, j) / 2; }, "avg on {3, 1}");
      fill(bufs, rank, 1);
      braid::all_reduce_coalesced(views(bufs), ReduceOp::Sum, {.group = &g});
      check(bufs, [&](std::size_t i, std::int64_t j) { return sum_over({1, 3}, i, j, 1); }, "sum on {3, 1}");
    } else {
      std::vector<float> v(4, 1.0f);
      expect_error([&] { braid::all_reduce_coalesced({braid::tensor(v)}, ReduceOp::Sum, {.group = &g}); },
                   ErrorCode::InvalidArgument, "all_reduce_coalesced: rank " + std::to_string(rank) +
                                                   " is not a member of the group (ranks 3, 1)");
    }
    braid::barrier();
  }));
}

TEST_CASE("all_reduce_coalesced: bad arguments are braid::Error naming the tensor", "[train][coalesced][errors]") {
  expect_all_ok(run_ranks(2, [](int, int) {
    init_env();
    std::vector<float> a(8, 1.0f), b(4, 2.0f);
    std::vector<std::int32_t> ints(4, 3);
    auto ta = braid::tensor(a), tb = braid::tensor(b), ti = braid::tensor(ints);
    expect_error([&] { braid::all_reduce_coalesced({ta, ti}, ReduceOp::Avg); }, ErrorCode::InvalidArgument,
                 "tensors[1] is int32, and Avg needs a floating dtype");
    expect_error([&] { braid::all_reduce_coalesced({ta, tb}, ReduceOp::BXor); }, ErrorCode::InvalidArgument,
                 "tensors[0] is float32, and bxor needs an integer dtype");
    expect_error([&] { braid::all_reduce_coalesced({ta, Tensor{nullptr, 3, DType::Float32}}, ReduceOp::Sum); },
                 ErrorCode::InvalidArgument, "tensors[1] has 3 elements but a null data pointer");
    expect_error([&] { braid::all_reduce_coalesced({Tensor{a.data(), -2, DType::Float32}}, ReduceOp::Sum); },
                 ErrorCode::InvalidArgument, "tensors[0] has a negative element count (-2)");
    expect_error([&] { braid::all_reduce_coalesced({ta, tb, ta.slice(2, 3)}, ReduceOp::Sum); },
                 ErrorCode::InvalidArgument, "tensors[0] and tensors[2] share memory");
    Tensor dev{a.data(), 8, DType::Float32, braid::Device::cuda(0)};
    expect_error([&] { braid::all_reduce_coalesced({tb, dev}, ReduceOp::Sum, {.async_op = true}); },
                 ErrorCode::NotSupported, "tensors[1] is a CUDA tensor");
    // Nothing was issued by those: the ranks are still in step.
    braid::all_reduce_coalesced({ta, tb, ti}, ReduceOp::Sum);
    RANK_CHECK(a[7] == 2.0f && b[0] == 4.0f && ints[3] == 6);
  }));
}

// --- Bucketer -------------------------------------------------------------------

namespace {

// Sum over the ranks, mixed dtypes; bucket_bytes = 48 gives (see
// bucketer.hpp), in reverse registration order:
//   7 int32 40 B -> bucket 0 (int32)          6 f32 20 B -> bucket 1 (f32)
//   5 f64 64 B   -> bucket 2 (larger than 48 B: alone)
//   4 int32 4 B  -> bucket 0 (44 B)           3 f32 80 B -> bucket 3 (alone)
//   2 f32 12 B   -> bucket 4 (bucket 3 full)  1 int32 32 B -> bucket 5 (0 full)
//   0 f32 16 B   -> bucket 4 (28 B)
const std::vector<std::pair<DType, std::int64_t>> kBucketed = {
    {DType::Float32, 4}, {DType::Int32, 8},  {DType::Float32, 3},  {DType::Float32, 20},
    {DType::Int32, 1},   {DType::Float64, 8}, {DType::Float32, 5}, {DType::Int32, 10},
};
const Layout kBucketedLayout = {{7, 4}, {6}, {5}, {3}, {2, 0}, {1}};

}  // namespace

TEST_CASE("Bucketer: buckets by dtype and size, rounds marked in any order on each rank", "[train][bucketer]") {
  expect_all_ok(run_ranks(3, [](int rank, int world) {
    init_env();
    const auto everyone = all_ranks(world);
    auto bufs = make_bufs(kBucketed);
    braid::Bucketer bk(views(bufs), {.bucket_bytes = 48, .op = ReduceOp::Sum});
    RANK_CHECK(bk.buckets() == kBucketedLayout);
    const std::size_t n = bufs.size();
    for (int round = 0; round < 6; ++round) {
      fill(bufs, rank, round);
      std::vector<std::size_t> order(n);
      std::iota(order.begin(), order.end(), std::size_t{0});
      if (round % 3 == 0) std::reverse(order.begin(), order.end());  // as a backward pass
      if (round % 3 == 1) std::shuffle(order.begin(), order.end(), std::mt19937(rank * 10 + round));  // differs per rank
      // round % 3 == 2: registration order, the last bucket ready first.
      for (std::size_t i : order) bk.mark_ready(i);
      bk.wait();
      check(bufs, [&](std::size_t i, std::int64_t j) { return sum_over(everyone, i, j, round); }, "bucketer round");
    }
  }));
}

TEST_CASE("Bucketer: a bucket's all_reduce starts when its tensors are ready, before wait()", "[train][bucketer]") {
  expect_all_ok(run_ranks(2, [](int rank, int world) {
    init_env();
    const auto everyone = all_ranks(world);
    auto bufs = make_bufs(kBucketed);
    braid::Bucketer bk(views(bufs), {.bucket_bytes = 48, .op = ReduceOp::Sum});
    fill(bufs, rank);
    // Buckets 0 and 1 ({7, 4} and {6}) ready; bucket 1 is one tensor,
    // reduced in place, so its result appears in tensor 6 without wait().
    for (std::size_t i : {7, 4, 6}) bk.mark_ready(i);
#if !defined(__SANITIZE_THREAD__)
    // Watching tensor 6 while the runner thread writes it is a data race by
    // design (the point is to see the result before wait()); under TSan
    // (tools/sanitize tsan) that watch is left out and the rest runs.
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    for (std::int64_t j = 0; j < bufs[6].count(); ++j) {
      auto* p = reinterpret_cast<float*>(bufs[6].bytes.data()) + j;
      while (std::atomic_ref<float>(*p).load() != static_cast<float>(sum_over(everyone, 6, j))) {
        RANK_CHECK_MSG(std::chrono::steady_clock::now() < until, "bucket 1 was not reduced before wait()");
        std::this_thread::yield();
      }
    }
#endif
    for (std::size_t i : {5, 3, 2, 1, 0}) bk.mark_ready(i);
    bk.wait();
    check(bufs, [&](std::size_t i, std::int64_t j) { return sum_over(everyone, i, j); }, "after wait");
  }));
}

TEST_CASE("Bucketer: Avg, one bucket for everything, empty tensors, a subgroup", "[train][bucketer]") {
  expect_all_ok(run_ranks(4, [](int rank, int world) {
    init_env();
    const auto everyone = all_ranks(world);
    // Default bucket_bytes (25 MiB): every float32 in one bucket.
    auto bufs = make_bufs({{DType::Float32, 300}, {DType::Float32, 0}, {DType::Float32, 17}, {DType::Float32, 1}});
    braid::Bucketer bk(views(bufs));
    RANK_CHECK(bk.buckets() == (Layout{{3, 2, 1, 0}}));
    for (int round = 0; round < 3; ++round) {
      fill(bufs, rank, round);
      for (std::size_t i : {3, 1, 2, 0}) bk.mark_ready(i);
      bk.wait();
      check(bufs, [&](std::size_t i, std::int64_t j) { return sum_over(everyone, i, j, round) / world; }, "avg");
    }
    // On a subgroup, ranks 2 and 0 only; bucket_bytes 0: a bucket per
    // tensor, the empty one included.
    braid::Group g = braid::new_group({2, 0});
    if (g.rank() >= 0) {
      auto sub = make_bufs({{DType::Float64, 3}, {DType::Float64, 0}, {DType::BFloat16, 6}, {DType::Float64, 2}});
      braid::Bucketer bs(views(sub), {.bucket_bytes = 0, .group = &g});
      RANK_CHECK(bs.buckets() == (Layout{{3}, {2}, {1}, {0}}));
      for (int round = 0; round < 2; ++round) {
        fill(sub, rank, round);
        for (std::size_t i = 0; i < sub.size(); ++i) bs.mark_ready(i);
        bs.wait();
        check(sub, [&](std::size_t i, std::int64_t j) { return sum_over({0, 2}, i, j, round) / 2; }, "avg on {2, 0}");
      }
    }
    braid::barrier();
  }));
}

TEST_CASE("Bucketer: eight ranks, many tensors, small buckets", "[train][bucketer]") {
  expect_all_ok(run_ranks(8, [](int rank, int world) {
    init_env();
    const auto everyone = all_ranks(world);
    std::vector<std::pair<DType, std::int64_t>> spec;
    for (int i = 0; i < 40; ++i) spec.push_back({i % 3 == 0 ? DType::Float64 : DType::Float32, 1 + (i * 37) % 300});
    auto bufs = make_bufs(spec);
    braid::Bucketer bk(views(bufs), {.bucket_bytes = 1024, .op = ReduceOp::Sum});
    // Every tensor in exactly one bucket; each bucket one dtype, at most
    // 1024 bytes or a single tensor.
    std::vector<int> seen(bufs.size(), 0);
    for (const auto& b : bk.buckets()) {
      std::size_t bytes = 0;
      for (std::size_t i : b) {
        ++seen[i];
        bytes += bufs[i].bytes.size();
        RANK_CHECK(bufs[i].dt == bufs[b[0]].dt);
      }
      RANK_CHECK(bytes <= 1024 || b.size() == 1);
    }
    RANK_CHECK(std::all_of(seen.begin(), seen.end(), [](int k) { return k == 1; }));
    RANK_CHECK(bk.buckets().front().front() == bufs.size() - 1);  // the last registered leads
    for (int round = 0; round < 2; ++round) {
      fill(bufs, rank, round);
      for (std::size_t i = bufs.size(); i-- > 0;) bk.mark_ready(i);
      bk.wait();
      check(bufs, [&](std::size_t i, std::int64_t j) { return sum_over(everyone, i, j, round); }, "8 ranks");
    }
  }));
}

TEST_CASE("Bucketer: misuse is braid::Error naming the tensor and its bucket", "[train][bucketer][errors]") {
  expect_all_ok(run_ranks(2, [](int rank, int world) {
    std::vector<float> f(4);
    expect_error([&] { braid::Bucketer({braid::tensor(f)}); }, ErrorCode::InvalidState,
                 "Braid is not initialised");
    init_env();
    const auto everyone = all_ranks(world);
    auto bufs = make_bufs(kBucketed);
    std::vector<std::int32_t> ints(3);
    expect_error([&] { braid::Bucketer({braid::tensor(f), braid::tensor(ints)}); }, ErrorCode::InvalidArgument,
                 "tensors[1] is int32, and Avg needs a floating dtype");
    expect_error([&] { braid::Bucketer({braid::tensor(f), Tensor{f.data(), 4, DType::Float32, braid::Device::cuda(0)}}); },
                 ErrorCode::NotSupported, "tensors[1] is a CUDA tensor");
    expect_error([&] { braid::Bucketer({braid::tensor(f), braid::tensor(f.data() + 3, 1)}); },
                 ErrorCode::InvalidArgument, "tensors[0] and tensors[1] share memory");
    braid::Bucketer bk(views(bufs), {.bucket_bytes = 48, .op = ReduceOp::Sum});
    fill(bufs, rank);
    expect_error([&] { bk.mark_ready(8); }, ErrorCode::InvalidArgument, "mark_ready(8): index out of range: expected 0 to 7");
    bk.mark_ready(3);
    expect_error([&] { bk.mark_ready(3); }, ErrorCode::InvalidState, "tensor 3 (bucket 3) was already marked ready");
    for (std::size_t i : {7, 6, 5, 4, 2, 1}) bk.mark_ready(i);
    expect_error([&] { bk.wait(); }, ErrorCode::InvalidState, "wait() with tensor 0 (bucket 4) not marked ready (1 of 8");
    // Nothing changed: mark the last one and the round completes.
    bk.mark_ready(0);
    bk.wait();
    check(bufs, [&](std::size_t i, std::int64_t j) { return sum_over(everyone, i, j); }, "after the errors");
    // And the next round starts fresh: tensor 3 may be marked again.
    fill(bufs, rank, 1);
    for (std::size_t i = 0; i < bufs.size(); ++i) bk.mark_ready(i);
    bk.wait();
    check(bufs, [&](std::size_t i, std::int64_t j) { return sum_over(everyone, i, j, 1); }, "next round");
    // An empty Bucketer has nothing to wait for.
    braid::Bucketer none({});
    none.wait();
  }));
}

// --- DistributedSampler with the process group ------------------------------------

TEST_CASE("DistributedSampler: -1 takes the default group's size and rank", "[train][sampler]") {
  expect_all_ok(run_ranks(3, [](int rank, int world) {
    init_env();
    braid::DistributedSampler s(100, {.seed = 11});
    s.set_epoch(2);
    braid::DistributedSampler same(100, {.num_replicas = world, .rank = rank, .seed = 11});
    same.set_epoch(2);
    RANK_CHECK(s.size() == 34);
    RANK_CHECK(s.indices() == same.indices());
    // The ranks' indices together cover the dataset (gathered to check).
    std::vector<std::int64_t> mine = s.indices(), all(static_cast<std::size_t>(34 * world));
    braid::all_gather_into_tensor(braid::tensor(all), braid::tensor(mine));
    std::sort(all.begin(), all.end());
    all.erase(std::unique(all.begin(), all.end()), all.end());
    RANK_CHECK(all.size() == 100);
    expect_error([&] { braid::DistributedSampler(10, {.rank = world}); }, ErrorCode::InvalidArgument,
                 "expected 0 to 2");
  }));
}
