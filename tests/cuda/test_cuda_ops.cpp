// Every op on device tensors, on this machine's GPUs (several ranks share one
// GPU when there is one): every collective x each algorithm that implements
// it x float32, bfloat16, int32 (x sum, max for reductions), blocking and
// async, at 1, 2 and 4 ranks, counts from 0 to 256 MiB; point-to-point;
// CUDA IPC between two rank processes (export, cached open, interprocess
// event, evict); stream order (work enqueued on the op's stream before it is
// seen by it, work after it sees the result); an async Work completing only
// once its device copies have; argument errors about device memory.
//
// Every output, with 64 guard bytes after it, is poisoned on the device
// before each run; results are compared with the CPU reference of
// tests/collectives/reference.hpp (every rank can compute every rank's input),
// and the guards must come back untouched.
//
// Without a usable GPU it prints "no CUDA device: <reason>" and exits 77
// (meson: skipped). The parent never touches CUDA (a probed driver does not
// survive fork): a child answers whether CUDA is usable, the ranks use it.
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include <fmt/core.h>

#include "tests/collectives/reference.hpp"
#include "cuda_kernels/cuda.hpp"
#include "transports/cuda_ipc/ipc.hpp"
#include "tests/mp/harness.hpp"
#include "tests/cuda/usable_in_child.hpp"
#include "algorithms/registry.hpp"

using namespace braid_test;
using braid::DType;
using braid::ReduceOp;
using braid::Tensor;
namespace bc = braid::cuda;
namespace plan = braid::plan;

namespace {

constexpr std::size_t kGuard = 64;
constexpr unsigned char kPoison = 0xA5;  // as float32/bfloat16/int32: never a reference value
constexpr DType kDTypes[] = {DType::Float32, DType::BFloat16, DType::Int32};
constexpr ReduceOp kOps[] = {ReduceOp::Sum, ReduceOp::Max};
// The largest cases: 256 MiB (16 MiB under BRAID_CUDA_OPS_QUICK=1).
std::int64_t big_bytes() {
  const char* quick = std::getenv("BRAID_CUDA_OPS_QUICK");
  return (quick != nullptr && std::string(quick) == "1" ? std::int64_t{16} : std::int64_t{256}) << 20;
}

// Host bytes of n elements (+ guard) read and written through reference.hpp.
struct Host {
  DType dt;
  std::vector<unsigned char> bytes;
  Host(DType d, std::int64_t n)
      : dt(d), bytes(static_cast<std::size_t>(n) * braid::dtype_size(d) + kGuard, kPoison) {}
  double at(std::int64_t i) const { return get(dt, bytes.data(), i); }
  void set(std::int64_t i, double v) { put(dt, bytes.data(), i, v); }
};

// A device buffer of n elements with a guard after them.
struct DBuf {
  DType dt;
  std::int64_t n;
  int device;
  bc::DeviceBuffer mem;
  DBuf(DType d, std::int64_t count, int dev)
      : dt(d), n(count), device(dev), mem(bytes() + kGuard) {}
  std::size_t bytes() const { return static_cast<std::size_t>(n) * braid::dtype_size(dt); }
  char* ptr(std::int64_t off = 0) const {
    return static_cast<char*>(mem.data()) + static_cast<std::size_t>(off) * braid::dtype_size(dt);
  }
  Tensor t(std::int64_t off = 0, std::int64_t count = -1) const {
    return braid::tensor(ptr(off), count < 0 ? n - off : count, dt, braid::Device::cuda(device));
  }
  void poison(void* s) { bc::fill_bytes(mem.data(), kPoison, bytes() + kGuard, s); }
  void upload(const Host& h, void* s) { bc::copy(mem.data(), h.bytes.data(), bytes(), s); }
  Host download(void* s) const {
    Host h(dt, n);
    bc::copy(h.bytes.data(), mem.data(), bytes() + kGuard, s);
    bc::stream_synchronize(s);
    return h;
  }
};

struct Rank {
  int me = 0, n = 1, device = 0;
  std::vector<int> members;
  bc::Stream* stream = nullptr;
  int salt = 0;
  long cases = 0;
  void* s() const { return stream->get(); }
  braid::OpOptions opts(const std::string& algo, bool async) const {
    braid::OpOptions o;
    o.async_op = async;
    o.stream = s();
    o.algorithm = algo.empty() ? nullptr : algo.c_str();
    return o;
  }
  Host inputs(DType dt, std::int64_t count, ReduceOp op, int rank, std::int64_t shift = 0) const {
    Host h(dt, count);
    for (std::int64_t i = 0; i < count; ++i) h.set(i, input_value(rank, i + shift, op, salt));
    return h;
  }
  DBuf upload(const Host& h, std::int64_t count) const {
    DBuf d(h.dt, count, device);
    d.poison(s());  // the guard after it too
    d.upload(h, s());
    return d;
  }
};

std::string label(const Rank& r, const char* coll, const std::string& algo, DType dt, ReduceOp op,
                  std::int64_t count, bool async) {
  return fmt::format("{} algo={} dtype={} op={} count={} n={}{}", coll, algo.empty() ? "auto" : algo,
                     braid::dtype_name(dt), braid::reduce_op_name(op), count, r.n,
                     async ? " async" : "");
}

// got[first + i] == want(i) for i < count, exactly (as the dtype holds it);
// and the guard after the buffer is still poison.
void check(const std::string& what, const Host& got, std::int64_t count,
           const std::function<double(std::int64_t)>& want, std::int64_t first = 0) {
  for (std::int64_t i = 0; i < count; ++i) {
    unsigned char tmp[8];
    put(got.dt, tmp, 0, want(i));
    const double w = get(got.dt, tmp, 0);
    RANK_CHECK_MSG(got.at(first + i) == w, what << ": element " << first + i << " is "
                                               << got.at(first + i) << ", expected " << w);
  }
  for (std::size_t b = got.bytes.size() - kGuard; b < got.bytes.size(); ++b)
    RANK_CHECK_MSG(got.bytes[b] == kPoison, what << ": wrote past the end (guard byte "
                                                 << b - (got.bytes.size() - kGuard) << ")");
}

void finish(braid::Work& w, bool async, const std::string& what) {
  w.wait();
  if (async) RANK_CHECK_MSG(w.is_completed(), what << ": not completed after wait()");
}

std::vector<std::string> algos_for(plan::Collective coll) {
  auto names = plan::algorithm_names(coll);
  names.insert(names.begin(), "");  // the automatic choice
  return names;
}

// --- one case per collective form ---------------------------------------------------------

void case_all_reduce(Rank& r, const std::string& algo, DType dt, ReduceOp op, std::int64_t count,
                     bool async, bool inplace) {
  const auto what = label(r, "all_reduce", algo, dt, op, count, async) + (inplace ? " in-place" : "");
  DBuf in = r.upload(r.inputs(dt, count, op, r.me), count);
  DBuf out(dt, count, r.device);
  out.poison(r.s());
  auto w = inplace ? braid::all_reduce(in.t(), op, r.opts(algo, async))
                   : braid::all_reduce(in.t(), out.t(), op, r.opts(algo, async));
  finish(w, async, what);
  check(what, (inplace ? in : out).download(r.s()), count,
        [&](std::int64_t i) { return reduce_ref(dt, op, r.members, i, r.salt); });
}

void case_reduce(Rank& r, const std::string& algo, DType dt, ReduceOp op, std::int64_t count,
                 int root, bool async) {
  const auto what = label(r, "reduce", algo, dt, op, count, async) + fmt::format(" root={}", root);
  const Host mine = r.inputs(dt, count, op, r.me);
  DBuf in = r.upload(mine, count);
  DBuf out(dt, count, r.device);
  out.poison(r.s());
  auto w = braid::reduce(in.t(), out.t(), root, op, r.opts(algo, async));
  finish(w, async, what);
  if (r.me == root)
    check(what, out.download(r.s()), count,
          [&](std::int64_t i) { return reduce_ref(dt, op, r.members, i, r.salt); });
  check(what + " (input unchanged)", in.download(r.s()), count,
        [&](std::int64_t i) { return mine.at(i); });
}

void case_broadcast(Rank& r, const std::string& algo, DType dt, std::int64_t count, int root,
                    bool async) {
  const auto what = label(r, "broadcast", algo, dt, ReduceOp::Sum, count, async) +
                    fmt::format(" root={}", root);
  DBuf b(dt, count, r.device);
  b.poison(r.s());
  if (r.me == root) b.upload(r.inputs(dt, count, ReduceOp::Sum, root), r.s());
  auto w = braid::broadcast(b.t(), root, r.opts(algo, async));
  finish(w, async, what);
  check(what, b.download(r.s()), count,
        [&](std::int64_t i) { return input_value(root, i, ReduceOp::Sum, r.salt); });
}

void case_all_gather(Rank& r, const std::string& algo, DType dt, std::int64_t count, bool async,
                     bool list) {
  const auto what =
      label(r, list ? "all_gather(list)" : "all_gather_into_tensor", algo, dt, ReduceOp::Sum, count, async);
  DBuf in = r.upload(r.inputs(dt, count, ReduceOp::Sum, r.me), count);
  auto want = [&](int k) {
    return [&, k](std::int64_t i) { return input_value(k, i, ReduceOp::Sum, r.salt); };
  };
  if (list) {  // separate allocations: each entry staged on its own
    std::vector<DBuf> outs;
    std::vector<Tensor> ts;
    for (int k = 0; k < r.n; ++k) outs.emplace_back(dt, count, r.device);
    for (auto& o : outs) o.poison(r.s()), ts.push_back(o.t());
    auto w = braid::all_gather(ts, in.t(), r.opts(algo, async));
    finish(w, async, what);
    for (int k = 0; k < r.n; ++k) check(what, outs[static_cast<std::size_t>(k)].download(r.s()), count, want(k));
  } else {
    DBuf out(dt, count * r.n, r.device);
    out.poison(r.s());
    auto w = braid::all_gather_into_tensor(out.t(), in.t(), r.opts(algo, async));
    finish(w, async, what);
    const Host got = out.download(r.s());
    for (int k = 0; k < r.n; ++k)
      check(what, got, count, want(k), static_cast<std::int64_t>(k) * count);
  }
}

void case_gather(Rank& r, const std::string& algo, DType dt, std::int64_t count, int root, bool async) {
  const auto what = label(r, "gather", algo, dt, ReduceOp::Sum, count, async) + fmt::format(" root={}", root);
  DBuf in = r.upload(r.inputs(dt, count, ReduceOp::Sum, r.me), count);
  std::vector<DBuf> outs;
  std::vector<Tensor> ts;
  if (r.me == root)
    for (int k = 0; k < r.n; ++k) outs.emplace_back(dt, count, r.device);
  for (auto& o : outs) o.poison(r.s()), ts.push_back(o.t());
  auto w = braid::gather(in.t(), r.me == root ? &ts : nullptr, root, r.opts(algo, async));
  finish(w, async, what);
  for (std::size_t k = 0; k < outs.size(); ++k)
    check(what, outs[k].download(r.s()), count, [&](std::int64_t i) {
      return input_value(static_cast<int>(k), i, ReduceOp::Sum, r.salt);
    });
}

void case_scatter(Rank& r, const std::string& algo, DType dt, std::int64_t count, int root, bool async) {
  const auto what = label(r, "scatter", algo, dt, ReduceOp::Sum, count, async) + fmt::format(" root={}", root);
  // The root's list: slices of one allocation (staged as one contiguous block).
  Host all(dt, count * r.n);
  for (int k = 0; k < r.n; ++k)
    for (std::int64_t i = 0; i < count; ++i)
      all.set(k * count + i, input_value(k, i + 5, ReduceOp::Sum, r.salt));
  DBuf src = r.upload(all, count * r.n);
  std::vector<Tensor> ts;
  for (int k = 0; k < r.n; ++k) ts.push_back(src.t(k * count, count));
  DBuf out(dt, count, r.device);
  out.poison(r.s());
  auto w = braid::scatter(out.t(), r.me == root ? &ts : nullptr, root, r.opts(algo, async));
  finish(w, async, what);
  check(what, out.download(r.s()), count,
        [&](std::int64_t i) { return input_value(r.me, i + 5, ReduceOp::Sum, r.salt); });
}

void case_reduce_scatter(Rank& r, const std::string& algo, DType dt, ReduceOp op, std::int64_t count,
                         bool async, int form) {
  static const char* const kForm[] = {"reduce_scatter_tensor", "reduce_scatter_tensor(in-place)",
                                      "reduce_scatter(list)"};
  const auto what = label(r, kForm[form], algo, dt, op, count, async);
  const Host mine = r.inputs(dt, count * r.n, op, r.me);
  DBuf in = r.upload(mine, count * r.n);
  DBuf out(dt, count, r.device);
  out.poison(r.s());
  auto want = [&](std::int64_t i) { return reduce_ref(dt, op, r.members, r.me * count + i, r.salt); };
  braid::Work w;
  if (form == 0) {
    w = braid::reduce_scatter_tensor(out.t(), in.t(), op, r.opts(algo, async));
  } else if (form == 1) {  // the output is this rank's block of the input (NCCL's in-place form)
    w = braid::reduce_scatter_tensor(in.t(r.me * count, count), in.t(), op, r.opts(algo, async));
  } else {
    std::vector<Tensor> ts;
    for (int k = 0; k < r.n; ++k) ts.push_back(in.t(k * count, count));
    w = braid::reduce_scatter(out.t(), ts, op, r.opts(algo, async));
  }
  finish(w, async, what);
  if (form == 1) {
    // This rank's block holds the result; the other blocks are the input, untouched.
    const Host got = in.download(r.s());
    check(what, got, count, want, r.me * count);
    for (int k = 0; k < r.n; ++k)
      if (k != r.me)
        check(what + " (other blocks unchanged)", got, count,
              [&](std::int64_t i) { return mine.at(k * count + i); }, k * count);
  } else {
    check(what, out.download(r.s()), count, want);
  }
}

void case_all_to_all(Rank& r, const std::string& algo, DType dt, std::int64_t count, bool async,
                     bool list) {
  const auto what = label(r, list ? "all_to_all(list)" : "all_to_all_single", algo, dt,
                          ReduceOp::Sum, count, async);
  // Element k of the block i -> j carries (i, j, k).
  auto val = [&](int i, int j, std::int64_t k) {
    return static_cast<double>((i * 11 + j * 5 + k + r.salt) % 23 - 11);
  };
  Host hin(dt, count * r.n);
  for (int j = 0; j < r.n; ++j)
    for (std::int64_t k = 0; k < count; ++k) hin.set(j * count + k, val(r.me, j, k));
  DBuf in = r.upload(hin, count * r.n);
  DBuf out(dt, count * r.n, r.device);
  out.poison(r.s());
  braid::Work w;
  if (list) {
    std::vector<Tensor> ins, outs;
    for (int j = 0; j < r.n; ++j) ins.push_back(in.t(j * count, count)), outs.push_back(out.t(j * count, count));
    w = braid::all_to_all(outs, ins, r.opts(algo, async));
  } else {
    w = braid::all_to_all_single(out.t(), in.t(), r.opts(algo, async));
  }
  finish(w, async, what);
  const Host got = out.download(r.s());
  for (int i = 0; i < r.n; ++i)
    check(what, got, count, [&](std::int64_t k) { return val(i, r.me, k); }, i * count);
}

// --- the matrix ------------------------------------------------------------------------------

std::int64_t big_count(DType dt) { return big_bytes() / static_cast<std::int64_t>(braid::dtype_size(dt)); }

void run_matrix(Rank& r) {
  const std::vector<std::int64_t> counts = {0, 1, 1000, 65536 + 3};
  const std::vector<int> roots = {0, r.n - 1};
  int k = 0;  // varies async and forms across cases
  auto next = [&] { ++r.salt, ++r.cases, ++k; };
  for (const auto& algo : algos_for(plan::Collective::AllReduce)) {
    for (auto count : counts)
      for (DType dt : kDTypes)
        for (ReduceOp op : kOps) next(), case_all_reduce(r, algo, dt, op, count, k % 3 == 0, k % 2 == 0);
    // 256 MiB through every algorithm, once each.
    next(), case_all_reduce(r, algo, DType::Float32, ReduceOp::Sum, big_count(DType::Float32), k % 2 == 0, false);
  }
  for (const auto& algo : algos_for(plan::Collective::Reduce))
    for (auto count : counts)
      for (DType dt : kDTypes)
        for (ReduceOp op : kOps) next(), case_reduce(r, algo, dt, op, count, roots[k % 2], k % 3 == 0);
  for (const auto& algo : algos_for(plan::Collective::Broadcast))
    for (auto count : counts)
      for (DType dt : kDTypes) next(), case_broadcast(r, algo, dt, count, roots[k % 2], k % 3 == 0);
  next(), case_broadcast(r, "", DType::BFloat16, big_count(DType::BFloat16), 0, false);
  for (const auto& algo : algos_for(plan::Collective::AllGather))
    for (auto count : counts)
      for (DType dt : kDTypes) next(), case_all_gather(r, algo, dt, count, k % 3 == 0, k % 2 == 0);
  next(), case_all_gather(r, "", DType::Int32, big_count(DType::Int32) / r.n, true, false);
  for (const auto& algo : algos_for(plan::Collective::Gather))
    for (auto count : counts)
      for (DType dt : kDTypes) next(), case_gather(r, algo, dt, count, roots[k % 2], k % 3 == 0);
  for (const auto& algo : algos_for(plan::Collective::Scatter))
    for (auto count : counts)
      for (DType dt : kDTypes) next(), case_scatter(r, algo, dt, count, roots[k % 2], k % 3 == 0);
  for (const auto& algo : algos_for(plan::Collective::ReduceScatter))
    for (auto count : counts)
      for (DType dt : kDTypes)
        for (ReduceOp op : kOps) next(), case_reduce_scatter(r, algo, dt, op, count, k % 3 == 0, k % 3);
  next(), case_reduce_scatter(r, "", DType::Float32, ReduceOp::Sum, big_count(DType::Float32) / r.n, false, 0);
  for (const auto& algo : algos_for(plan::Collective::AllToAll))
    for (auto count : counts)
      for (DType dt : kDTypes) {
        // The list form counts as uneven (sizes may differ between ranks):
        // bruck and peer_read take even splits only, as in test_collectives.
        const bool list = (k + 1) % 2 == 0;
        if (list && (algo == "bruck" || algo == "peer_read")) { ++k; continue; }
        next(), case_all_to_all(r, algo, dt, count, k % 3 == 0, k % 2 == 0);
      }
  braid::barrier(r.opts("", false));
}

// --- stream order and async completion ---------------------------------------------------------

// Keeps the stream busy for a few milliseconds, so that anything not ordered
// after it (a copy on another stream, a read that does not wait) races it.
void keep_busy(const Rank& r, DBuf& scratch_a, const DBuf& scratch_b) {
  for (int i = 0; i < 40; ++i)
    bc::reduce_into(scratch_a.ptr(), scratch_b.ptr(), scratch_a.n, DType::Float32, ReduceOp::Sum, r.s());
}

void stream_order(Rank& r) {
  const std::int64_t count = 1 << 20;
  DBuf busy_a(DType::Float32, 16 << 20, r.device), busy_b(DType::Float32, 16 << 20, r.device);
  busy_a.poison(r.s()), busy_b.poison(r.s());
  Host ones_h(DType::Float32, count);
  for (std::int64_t i = 0; i < count; ++i) ones_h.set(i, 1.0);
  DBuf ones = r.upload(ones_h, count);
  for (bool async : {false, true}) {
    ++r.salt, ++r.cases;
    const auto what = fmt::format("stream order n={}{}", r.n, async ? " async" : "");
    DBuf x = r.upload(r.inputs(DType::Float32, count, ReduceOp::Sum, r.me), count);
    // Before the op, on its stream, behind a few ms of other work: x += 1.
    keep_busy(r, busy_a, busy_b);
    bc::reduce_into(x.ptr(), ones.ptr(), count, DType::Float32, ReduceOp::Sum, r.s());
    auto w = braid::all_reduce(x.t(), ReduceOp::Sum, r.opts("", async));
    if (async) w.wait();  // the result is the stream's to see after wait() (as with NCCL)
    // After the op, on its stream: x += 1 again; it must act on the result.
    bc::reduce_into(x.ptr(), ones.ptr(), count, DType::Float32, ReduceOp::Sum, r.s());
    check(what, x.download(r.s()), count, [&](std::int64_t i) {
      double s = 1.0;
      for (int m : r.members) s += input_value(m, i, ReduceOp::Sum, r.salt) + 1.0;
      return s;
    });
  }
}

// An async Work completes only once the result is in device memory: read it
// on another stream, with no order on the op's stream, once is_completed().
void async_completion(Rank& r) {
  bc::Stream other;
  const std::int64_t count = 4 << 20;
  for (bool poll : {true, false}) {
    ++r.salt, ++r.cases;
    const auto what = fmt::format("async completion n={} ({})", r.n, poll ? "is_completed" : "wait");
    DBuf x = r.upload(r.inputs(DType::Float32, count, ReduceOp::Sum, r.me), count);
    auto w = braid::all_reduce(x.t(), ReduceOp::Sum, r.opts("", true));
    if (poll) {
      const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
      while (!w.is_completed()) {
        RANK_CHECK_MSG(std::chrono::steady_clock::now() < give_up, what << ": never completed");
        std::this_thread::sleep_for(std::chrono::microseconds(200));
      }
    } else {
      w.wait();
    }
    check(what, x.download(other.get()), count,
          [&](std::int64_t i) { return reduce_ref(DType::Float32, ReduceOp::Sum, r.members, i, r.salt); });
  }
}

// --- point-to-point ----------------------------------------------------------------------------

void p2p(Rank& r) {
  const int peer = r.me ^ 1;
  if (peer >= r.n) return;
  const bool sender = r.me % 2 == 0;
  bc::Stream other;
  for (std::int64_t count : {std::int64_t{0}, std::int64_t{1}, std::int64_t{1000}, std::int64_t{1} << 22}) {
    for (int mode = 0; mode < 4; ++mode) {  // blocking, async, host->device, device->host
      ++r.salt, ++r.cases;
      const auto what = fmt::format("p2p mode {} count {}", mode, count);
      const DType dt = kDTypes[static_cast<std::size_t>(r.salt) % 3];
      const Host payload = r.inputs(dt, count, ReduceOp::Sum, 0);
      const braid::OpOptions o{.async_op = mode == 1, .tag = r.salt, .stream = r.s()};
      const bool host_side = (mode == 2 && sender) || (mode == 3 && !sender);
      if (sender) {
        Host h = payload;
        DBuf d = r.upload(payload, count);
        auto w = braid::send(host_side ? braid::tensor(h.bytes.data(), count, dt) : d.t(), peer, o);
        w.wait();
      } else {
        Host h(dt, count);
        DBuf d(dt, count, r.device);
        d.poison(r.s());
        auto w = braid::irecv(host_side ? braid::tensor(h.bytes.data(), count, dt) : d.t(), peer, o);
        w.wait();
        RANK_CHECK_MSG(w.source_rank() == peer, what << ": source " << w.source_rank());
        // After wait() the data is in device memory, whatever stream reads it.
        // (A zero-element op enqueues nothing on the stream, so only the
        // stream itself orders the poisoning before the guard check.)
        check(what, host_side ? h : d.download(count ? other.get() : r.s()), count,
              [&](std::int64_t i) { return payload.at(i); });
      }
    }
  }
  // A shorter message into a longer device tensor: the rest keeps its bytes.
  ++r.salt, ++r.cases;
  const braid::OpOptions o{.tag = 99, .stream = r.s()};
  const Host payload = r.inputs(DType::Float32, 100, ReduceOp::Sum, 0);
  if (sender) {
    DBuf d = r.upload(payload, 100);
    braid::send(d.t(0, 60), peer, o);
  } else {
    DBuf d(DType::Float32, 100, r.device);
    d.poison(r.s());
    braid::recv(d.t(), peer, o);
    const Host got = d.download(r.s());
    check("short message", got, 60, [&](std::int64_t i) { return payload.at(i); });
    for (std::size_t b = 60 * 4; b < got.bytes.size(); ++b)
      RANK_CHECK_MSG(got.bytes[b] == kPoison, "short message: byte " << b << " past it was written");
  }
}

// --- CUDA IPC between two ranks (processes) sharing the GPU ----------------------------------------

// Rank 0 exports an interior pointer of a buffer and an interprocess event
// recorded after filling it; rank 1 maps the allocation (twice: one cached
// mapping), orders a stream of its own after the event, reads through the
// mapping, and evicts it; only then may rank 0 free the buffer.
void ipc(Rank& r) {
  ++r.salt;  // on every rank: the salt must stay the same everywhere
  if (r.n < 2 || r.me > 1) return;
  ++r.cases;
  struct Msg {
    braid::cuda_ipc::Handle mem, event;
    std::uint64_t offset = 0;
  };
  const std::int64_t count = 1 << 20, skip = 1000;
  const braid::OpOptions o{.tag = 4242};
  auto bytes_of = [](Msg& m) { return braid::tensor(reinterpret_cast<std::uint8_t*>(&m), sizeof m); };
  std::uint8_t done = 0;
  if (r.me == 0) {
    DBuf buf = r.upload(r.inputs(DType::Float32, count, ReduceOp::Sum, 0), count);
    bc::Event ready = braid::cuda_ipc::interprocess_event();
    ready.record(r.s());
    const braid::cuda_ipc::Export ex = braid::cuda_ipc::export_memory(buf.ptr(skip));
    RANK_CHECK_MSG(ex.offset == skip * 4, "ipc_export offset " << ex.offset);
    RANK_CHECK_MSG(ex.size >= buf.bytes(), "ipc_export size " << ex.size);
    RANK_CHECK(ex.device == r.device);
    const bc::PointerInfo info = bc::pointer_info(buf.ptr(skip));
    RANK_CHECK(info.kind == bc::MemoryKind::Device && info.base == buf.ptr());
    Msg m{ex.handle, braid::cuda_ipc::event_handle(ready), ex.offset};
    braid::send(bytes_of(m), 1, o);
    braid::recv(braid::tensor(&done, 1), 1, o);  // rank 1 has let go of the mapping
  } else {
    Msg m;
    braid::recv(bytes_of(m), 0, o);
    char* base = static_cast<char*>(braid::cuda_ipc::open(m.mem));
    RANK_CHECK_MSG(braid::cuda_ipc::open(m.mem) == base, "a second ipc_open mapped the handle again");
    RANK_CHECK(braid::cuda_ipc::open_count() == 1);
    RANK_CHECK(bc::pointer_info(base).kind == bc::MemoryKind::Device);
    bc::Event ready = braid::cuda_ipc::open_event(m.event);
    bc::Stream mine;
    bc::stream_wait_event(mine.get(), ready);
    Host got(DType::Float32, count - skip);
    bc::copy(got.bytes.data(), base + m.offset, static_cast<std::size_t>(count - skip) * 4, mine.get());
    bc::stream_synchronize(mine.get());
    check("ipc read of rank 0's buffer", got, count - skip,
          [&](std::int64_t i) { return input_value(0, i + skip, ReduceOp::Sum, r.salt); });
    RANK_CHECK(braid::cuda_ipc::evict(m.mem));
    RANK_CHECK(!braid::cuda_ipc::evict(m.mem));
    RANK_CHECK(braid::cuda_ipc::open_count() == 0);
    braid::send(braid::tensor(&done, 1), 0, o);
  }
}

// --- argument errors about device memory -------------------------------------------------------

void errors(Rank& r) {
  std::vector<float> host(16, 1.0f);
  const auto on = [&](int dev) { return braid::Device::cuda(dev); };
  expect_error([&] { braid::all_reduce(braid::tensor(host.data(), 16, on(r.device))); },
               braid::ErrorCode::InvalidArgument, "its memory is host memory");
  expect_error([&] { braid::all_reduce(braid::tensor(host.data(), 16, on(bc::device_count()))); },
               braid::ErrorCode::InvalidArgument, "does not exist");
  DBuf small(DType::Float32, 8, r.device);
  expect_error([&] { braid::all_reduce(small.t(0, 1 << 22)); }, braid::ErrorCode::InvalidArgument,
               "past the end of its device allocation");
  if (bc::device_count() > 1) {
    bc::DeviceGuard g((r.device + 1) % bc::device_count());
    DBuf elsewhere(DType::Float32, 8, (r.device + 1) % bc::device_count());
    expect_error([&] { braid::all_reduce(small.t(), elsewhere.t()); },
                 braid::ErrorCode::InvalidArgument, "must be on one device");
  }
  r.cases += 3;
}

// One rank passes host memory where its peer passes device memory: an error
// on both within the timeout, not a hang and not a read of the wrong kind of
// memory. The device rank's first call on a group waits for every rank's
// GPU, which a host rank never names: both time out, the device rank saying
// why. On a group of its own, last: a failed call leaves that group's window
// unusable (one_sided.cpp). (Once a group's GPUs are known, a mismatch is an
// InvalidArgument naming the peer at once: one_sided.cpp checks every
// buffer's kind.)
void mixed_kinds(Rank& r) {
  if (r.n != 2) return;
  ++r.cases;
  const braid::Group g = braid::new_group({0, 1});
  std::vector<float> host(1000, 1.0f);
  DBuf d(DType::Float32, 1000, r.device);
  d.poison(r.s());
  // The host rank gives up first: were the device rank to time out and exit
  // first, the host rank would (rightly) report it gone instead.
  const braid::OpOptions o{.group = &g, .timeout = std::chrono::seconds(r.me == 0 ? 2 : 5), .stream = r.s(),
                           .algorithm = "push"};
  const Tensor t = r.me == 0 ? braid::tensor(host.data(), 1000) : d.t();
  expect_error([&] { braid::all_reduce(t, ReduceOp::Sum, o); }, braid::ErrorCode::Timeout,
               r.me == 0 ? "rank 1" : "rank 0 did not say which GPU it uses before the timeout: when one rank "
                                      "passes CUDA device tensors to a collective every rank must");
  braid::barrier();  // on the world group, which is unaffected: nobody leaves before both are done
}

// Once a group's GPUs are known, ranks that diverge (here rank 1 passes host
// memory on the group's third call) get InvalidArgument naming each other
// before any kernel runs, and nothing is written into a buffer a rank
// passed on an earlier call (its stale description must not be used).
void diverged_after_binding(Rank& r) {
  if (r.n != 2) return;
  ++r.cases;
  const braid::Group g = braid::new_group({0, 1});
  const braid::OpOptions o{.group = &g, .stream = r.s()};
  const Host ones = [] {
    Host h(DType::Float32, 1000);
    for (int i = 0; i < 1000; ++i) h.set(i, 1.0);
    return h;
  }();
  DBuf first = r.upload(ones, 1000);
  braid::all_reduce(first.t(), ReduceOp::Sum, o);  // binds the group to the GPU
  DBuf second = r.upload(ones, 1000);
  braid::all_reduce(second.t(), ReduceOp::Sum, o);
  std::vector<float> host(1000, 1.0f);
  DBuf third = r.upload(ones, 1000);
  const Tensor t = r.me == 1 ? braid::tensor(host.data(), 1000) : third.t();
  // Named, so that both run a one-sided plan (on its own, the host rank
  // might pick a message plan, and the two would wait for each other until
  // the timeout).
  braid::OpOptions named = o;
  named.algorithm = "twoshot";
  // Rank 1 finds the mismatch itself, or (when rank 0 found it first and
  // gave up before its next signal) gets rank 0's error relayed, naming it.
  const braid::Error e = expect_error([&] { braid::all_reduce(t, ReduceOp::Sum, named); },
                                      braid::ErrorCode::InvalidArgument,
                                      r.me == 0 ? "rank 1 does not run this call on CUDA device memory" : "rank 0 ");
  if (r.me == 1)
    RANK_CHECK_MSG(std::string(e.what()).find("passed CUDA device memory where this rank passed host memory") !=
                           std::string::npos ||
                       std::string(e.what()).find("rank 0 gave up on this call") != std::string::npos,
                   "unexpected message: " << e.what());
  const Host got = first.download(r.s());
  check("buffer of an earlier call after a diverged one", got, 1000, [](std::int64_t) { return 2.0; });
}

}  // namespace

int main() {
  if (!cuda_test::usable_in_child(true)) return 77;
  // BRAID_CUDA_OPS_QUICK=1 (bench/device_run.sh --quick): 1 and 2 ranks only,
  // and the largest cases at 16 MiB.
  const char* quick = std::getenv("BRAID_CUDA_OPS_QUICK");
  std::vector<int> worlds = {1, 2, 4};
  if (quick != nullptr && std::string(quick) == "1") worlds.pop_back();
  bool ok = true;
  for (int n : worlds) {
    const auto t0 = std::chrono::steady_clock::now();
    auto res = run_ranks(n, [](int rank, int world) {
      Rank r;
      r.me = rank;
      r.n = world;
      r.members.resize(static_cast<std::size_t>(world));
      std::iota(r.members.begin(), r.members.end(), 0);
      r.device = rank % bc::device_count();
      bc::set_device(r.device);
      bc::Stream stream;
      r.stream = &stream;
      init_env();
      if (rank == 0)
        std::printf("world %d: cuda:%d is %s\n", world, r.device, bc::device_name(r.device).c_str());
      errors(r);
      ipc(r);
      p2p(r);
      stream_order(r);
      async_completion(r);
      run_matrix(r);
      braid::barrier();
      diverged_after_binding(r);
      mixed_kinds(r);
      if (rank == 0) std::printf("world %d: %ld cases on device tensors match the CPU reference\n", world, r.cases);
    }, {.timeout_s = 480, .env = {}});
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("world %d: %s (%.1f s)\n", n, all_ok(res) ? "OK" : describe(res).c_str(), s);
    ok = ok && all_ok(res);
  }
  // backend = "cuda" (issue 16): accepted where CUDA is usable; device
  // tensors take the device path, host memory moves as under "auto".
  {
    auto res = run_ranks(2, [](int rank, int world) {
      Rank r;
      r.me = rank;
      r.n = world;
      r.members = {0, 1};
      r.device = rank % bc::device_count();
      bc::set_device(r.device);
      bc::Stream stream;
      r.stream = &stream;
      init_env("cuda");
      Host ones(DType::Float32, 1000);
      for (int i = 0; i < 1000; ++i) ones.set(i, 1.0);
      DBuf d = r.upload(ones, 1000);
      braid::all_reduce(d.t(), ReduceOp::Sum, {.stream = r.s()});
      check("all_reduce on backend cuda, device tensor", d.download(r.s()), 1000, [](std::int64_t) { return 2.0; });
      std::vector<float> h(1000, static_cast<float>(rank + 1));
      braid::all_reduce(braid::tensor(h));
      RANK_CHECK(h[0] == 3.0f && h[999] == 3.0f);
    }, {.timeout_s = 120, .env = {}});
    std::printf("backend cuda, 2 ranks: %s\n", all_ok(res) ? "OK" : describe(res).c_str());
    ok = ok && all_ok(res);
  }
  std::printf("cuda ops: %s\n", ok ? "OK" : "FAILED");
  return ok ? 0 : 1;
}
