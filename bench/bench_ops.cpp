// The benchmarked operations. In-place forms follow nccl-tests: the input is
// the output buffer (allreduce, broadcast, reduce) or this rank's block of the
// larger buffer (allgather, gather: input = output[rank]; reducescatter,
// scatter: output = input[rank]). alltoall, sendrecv, pingpong and bw have none.
#include "bench_ops.hpp"

#include <cstdlib>
#include <new>
#include <vector>

#include "braid/memory.hpp"
#include "braid/ops.hpp"

namespace bench {

using braid::ReduceOp;
using braid::Tensor;

void BufferFree::operator()(void* p) const noexcept {
  if (!braid_mem) return std::free(p);
  try {
    braid::mem_free(p);
  } catch (...) {
  }
}

void Buffer::reserve(std::size_t bytes) {
  if (bytes <= cap_ && p_) return;
  const std::size_t rounded = (bytes + 63) / 64 * 64 + 64;  // never 0, a multiple of the alignment
  p_.reset();
  if (shareable) {
    p_ = std::unique_ptr<void, BufferFree>(braid::mem_alloc(rounded), BufferFree{true});
  } else {
    p_ = std::unique_ptr<void, BufferFree>(std::aligned_alloc(64, rounded), BufferFree{false});
    if (!p_) throw std::bad_alloc();
  }
  cap_ = rounded;
}

Ctx::Ctx(braid::DType dt, ReduceOp o, int root_, int rank_, int nranks_, bool reduction, const char* algo)
    : dtype(dt),
      op(o),
      root(root_),
      rank(rank_),
      nranks(nranks_),
      esize(braid::dtype_size(dt)),
      pattern(dt, o, nranks_, reduction) {
  opts.algorithm = algo;
  opts.shareable_buffers = Buffer::shareable;  // every rank alike: -R is one flag for the job
}

namespace {

char* at(Buffer& b, const Ctx& c, std::int64_t off) { return b.bytes() + static_cast<std::size_t>(off) * c.esize; }

// Elements [first, first + n) of `rank`'s data, written at p.
void put(const Ctx& c, char* p, std::int64_t n, int rank, std::int64_t first) {
  fill(p, n, c.dtype, [&](std::int64_t j) { return c.pattern.value(rank, first + j); });
}
void poison_elems(const Ctx& c, char* p, std::int64_t n) { poison(p, static_cast<std::size_t>(n) * c.esize); }

// Wrong elements at p, which should hold `rank`'s elements [first, first + n).
std::int64_t moved(const Ctx& c, const char* p, std::int64_t n, int rank, std::int64_t first) {
  return count_wrong(p, n, c.dtype, false, c.nranks, [&](std::int64_t j) { return c.pattern.value(rank, first + j); });
}
// Wrong elements at p, which should hold elements [first, first + n) reduced over all ranks.
std::int64_t reduced(const Ctx& c, const char* p, std::int64_t n, std::int64_t first) {
  return count_wrong(p, n, c.dtype, c.op == ReduceOp::Avg, c.nranks,
                     [&](std::int64_t j) { return c.pattern.reduced(first + j); });
}

Layout flat(std::uint64_t size, std::size_t es) {
  const auto count = static_cast<std::int64_t>(size / es);
  return {count, count, count, static_cast<std::uint64_t>(count) * es};
}

// n blocks of count/n: the larger buffer holds n*c elements.
Layout blocked(std::uint64_t size, std::size_t es, int n, bool big_send, bool big_recv) {
  const auto c = static_cast<std::int64_t>(size / es) / n;
  return {c, big_send ? c * n : c, big_recv ? c * n : c, static_cast<std::uint64_t>(c * n) * es};
}

double ring_factor(int n) { return n > 0 ? static_cast<double>(n - 1) / n : 0; }

std::vector<Tensor> blocks(Ctx& c, Buffer& b, std::int64_t per) {
  std::vector<Tensor> v;
  for (int i = 0; i < c.nranks; ++i)
    v.push_back(braid::tensor(at(b, c, i * per), per, c.dtype));
  return v;
}

// --- allreduce --------------------------------------------------------------------
class AllReduce final : public Op {
 public:
  const char* name() const override { return "allreduce"; }
  Layout layout(std::uint64_t s, std::size_t es, int) const override { return flat(s, es); }
  double bus_factor(int n) const override { return n > 0 ? 2.0 * (n - 1) / n : 0; }
  bool reduces() const override { return true; }
  void run(Ctx& c, bool ip) const override {
    const auto n = c.lay.count;
    if (ip) braid::all_reduce(c.recv_t(0, n), c.op, c.opts);
    else braid::all_reduce(c.send_t(0, n), c.recv_t(0, n), c.op, c.opts);
  }
  void fill(Ctx& c, bool ip) const override {
    const auto n = c.lay.count;
    if (ip) {
      put(c, c.recv.bytes(), n, c.rank, 0);
    } else {
      put(c, c.send.bytes(), n, c.rank, 0);
      poison_elems(c, c.recv.bytes(), n);
    }
  }
  std::int64_t check(Ctx& c, bool ip) const override {
    const auto n = c.lay.count;
    std::int64_t w = reduced(c, c.recv.bytes(), n, 0);
    if (!ip) w += moved(c, c.send.bytes(), n, c.rank, 0);
    return w;
  }
};

// --- broadcast --------------------------------------------------------------------
class Broadcast final : public Op {
 public:
  const char* name() const override { return "broadcast"; }
  Layout layout(std::uint64_t s, std::size_t es, int) const override { return flat(s, es); }
  double bus_factor(int) const override { return 1; }
  bool rooted() const override { return true; }
  void run(Ctx& c, bool ip) const override {
    const auto n = c.lay.count;
    if (ip) braid::broadcast(c.recv_t(0, n), c.root, c.opts);
    else braid::broadcast(c.send_t(0, n), c.recv_t(0, n), c.root, c.opts);
  }
  void fill(Ctx& c, bool ip) const override {
    const auto n = c.lay.count;
    poison_elems(c, c.recv.bytes(), n);
    if (c.rank == c.root) put(c, ip ? c.recv.bytes() : c.send.bytes(), n, c.root, 0);
  }
  std::int64_t check(Ctx& c, bool ip) const override {
    const auto n = c.lay.count;
    std::int64_t w = moved(c, c.recv.bytes(), n, c.root, 0);
    if (!ip && c.rank == c.root) w += moved(c, c.send.bytes(), n, c.root, 0);
    return w;
  }
};

// --- reduce -----------------------------------------------------------------------
class Reduce final : public Op {
 public:
  const char* name() const override { return "reduce"; }
  Layout layout(std::uint64_t s, std::size_t es, int) const override { return flat(s, es); }
  double bus_factor(int) const override { return 1; }
  bool reduces() const override { return true; }
  bool rooted() const override { return true; }
  void run(Ctx& c, bool ip) const override {
    const auto n = c.lay.count;
    if (ip) braid::reduce(c.recv_t(0, n), c.root, c.op, c.opts);
    else braid::reduce(c.send_t(0, n), c.recv_t(0, n), c.root, c.op, c.opts);
  }
  void fill(Ctx& c, bool ip) const override {
    const auto n = c.lay.count;
    if (ip) {
      put(c, c.recv.bytes(), n, c.rank, 0);
    } else {
      put(c, c.send.bytes(), n, c.rank, 0);
      poison_elems(c, c.recv.bytes(), n);
    }
  }
  std::int64_t check(Ctx& c, bool ip) const override {
    // Only the root's output is defined; a non-root's in-place buffer is its
    // input, which must come back unchanged.
    const auto n = c.lay.count;
    std::int64_t w = 0;
    if (c.rank == c.root) w += reduced(c, c.recv.bytes(), n, 0);
    else if (ip) w += moved(c, c.recv.bytes(), n, c.rank, 0);
    if (!ip) w += moved(c, c.send.bytes(), n, c.rank, 0);
    return w;
  }
};

// --- allgather and gather: output[b] = rank b's input ------------------------------
class GatherLike : public Op {
 public:
  Layout layout(std::uint64_t s, std::size_t es, int n) const override { return blocked(s, es, n, false, true); }
  double bus_factor(int n) const override { return ring_factor(n); }
  void fill(Ctx& c, bool ip) const override {
    const auto per = c.lay.count;
    poison_elems(c, c.recv.bytes(), per * c.nranks);
    put(c, ip ? at(c.recv, c, c.rank * per) : c.send.bytes(), per, c.rank, 0);
  }
  std::int64_t check(Ctx& c, bool ip) const override {
    const auto per = c.lay.count;
    std::int64_t w = 0;
    if (has_result(c))
      for (int b = 0; b < c.nranks; ++b) w += moved(c, at(c.recv, c, b * per), per, b, 0);
    else if (ip)
      w += moved(c, at(c.recv, c, c.rank * per), per, c.rank, 0);
    if (!ip) w += moved(c, c.send.bytes(), per, c.rank, 0);
    return w;
  }

 protected:
  virtual bool has_result(const Ctx& c) const = 0;
  Tensor input(Ctx& c, bool ip) const {
    const auto per = c.lay.count;
    return ip ? c.recv_t(c.rank * per, per) : c.send_t(0, per);
  }
};

class AllGather final : public GatherLike {
 public:
  const char* name() const override { return "allgather"; }
  void run(Ctx& c, bool ip) const override {
    braid::all_gather_into_tensor(c.recv_t(0, c.lay.count * c.nranks), input(c, ip), c.opts);
  }

 protected:
  bool has_result(const Ctx&) const override { return true; }
};

class Gather final : public GatherLike {
 public:
  const char* name() const override { return "gather"; }
  bool rooted() const override { return true; }
  void run(Ctx& c, bool ip) const override {
    if (c.rank == c.root) {
      const auto outs = blocks(c, c.recv, c.lay.count);
      braid::gather(input(c, ip), &outs, c.root, c.opts);
    } else {
      braid::gather(input(c, ip), nullptr, c.root, c.opts);
    }
  }

 protected:
  bool has_result(const Ctx& c) const override { return c.rank == c.root; }
};

// --- scatter: output = root's input[rank] ------------------------------------------
class Scatter final : public Op {
 public:
  const char* name() const override { return "scatter"; }
  Layout layout(std::uint64_t s, std::size_t es, int n) const override { return blocked(s, es, n, true, false); }
  double bus_factor(int n) const override { return ring_factor(n); }
  bool rooted() const override { return true; }
  void run(Ctx& c, bool ip) const override {
    const auto per = c.lay.count;
    const Tensor out = ip ? c.send_t(c.rank * per, per) : c.recv_t(0, per);
    if (c.rank == c.root) {
      const auto ins = blocks(c, c.send, per);
      braid::scatter(out, &ins, c.root, c.opts);
    } else {
      braid::scatter(out, nullptr, c.root, c.opts);
    }
  }
  void fill(Ctx& c, bool ip) const override {
    const auto per = c.lay.count;
    if (c.rank == c.root) put(c, c.send.bytes(), per * c.nranks, c.root, 0);
    else if (ip) poison_elems(c, c.send.bytes(), per * c.nranks);
    if (!ip) poison_elems(c, c.recv.bytes(), per);
  }
  std::int64_t check(Ctx& c, bool ip) const override {
    const auto per = c.lay.count;
    const char* out = ip ? at(c.send, c, c.rank * per) : c.recv.bytes();
    std::int64_t w = moved(c, out, per, c.root, c.rank * per);
    if (!ip && c.rank == c.root) w += moved(c, c.send.bytes(), per * c.nranks, c.root, 0);
    return w;
  }
};

// --- reducescatter: output = block rank of the reduced inputs ----------------------
class ReduceScatter final : public Op {
 public:
  const char* name() const override { return "reducescatter"; }
  Layout layout(std::uint64_t s, std::size_t es, int n) const override { return blocked(s, es, n, true, false); }
  double bus_factor(int n) const override { return ring_factor(n); }
  bool reduces() const override { return true; }
  void run(Ctx& c, bool ip) const override {
    const auto per = c.lay.count;
    const Tensor out = ip ? c.send_t(c.rank * per, per) : c.recv_t(0, per);
    braid::reduce_scatter_tensor(out, c.send_t(0, per * c.nranks), c.op, c.opts);
  }
  void fill(Ctx& c, bool ip) const override {
    const auto per = c.lay.count;
    put(c, c.send.bytes(), per * c.nranks, c.rank, 0);
    if (!ip) poison_elems(c, c.recv.bytes(), per);
  }
  std::int64_t check(Ctx& c, bool ip) const override {
    const auto per = c.lay.count;
    const char* out = ip ? at(c.send, c, c.rank * per) : c.recv.bytes();
    std::int64_t w = reduced(c, out, per, c.rank * per);
    if (!ip) w += moved(c, c.send.bytes(), per * c.nranks, c.rank, 0);
    return w;
  }
};

// --- alltoall: output[b] = rank b's input[rank] ------------------------------------
class AllToAll final : public Op {
 public:
  const char* name() const override { return "alltoall"; }
  Layout layout(std::uint64_t s, std::size_t es, int n) const override { return blocked(s, es, n, true, true); }
  double bus_factor(int n) const override { return ring_factor(n); }
  bool has_in_place() const override { return false; }  // Braid rejects aliased buffers
  void run(Ctx& c, bool) const override {
    const auto all = c.lay.count * c.nranks;
    braid::all_to_all_single(c.recv_t(0, all), c.send_t(0, all), c.opts);
  }
  void fill(Ctx& c, bool) const override {
    const auto all = c.lay.count * c.nranks;
    put(c, c.send.bytes(), all, c.rank, 0);
    poison_elems(c, c.recv.bytes(), all);
  }
  std::int64_t check(Ctx& c, bool) const override {
    const auto per = c.lay.count;
    std::int64_t w = moved(c, c.send.bytes(), per * c.nranks, c.rank, 0);
    for (int b = 0; b < c.nranks; ++b) w += moved(c, at(c.recv, c, b * per), per, b, c.rank * per);
    return w;
  }
};

// --- sendrecv: send to rank+1, receive from rank-1 (a ring shift) -------------------
class SendRecv final : public Op {
 public:
  const char* name() const override { return "sendrecv"; }
  Layout layout(std::uint64_t s, std::size_t es, int) const override { return flat(s, es); }
  double bus_factor(int) const override { return 1; }
  bool has_in_place() const override { return false; }
  void run(Ctx& c, bool) const override {
    const auto n = c.lay.count;
    braid::OpOptions async = c.opts;
    async.async_op = true;
    async.algorithm = nullptr;
    // Post the receive first so the peer's send finds it waiting.
    braid::Work r = braid::irecv(c.recv_t(0, n), prev(c), async);
    braid::Work s = braid::isend(c.send_t(0, n), next(c), async);
    s.wait();
    r.wait();
  }
  void fill(Ctx& c, bool) const override {
    put(c, c.send.bytes(), c.lay.count, c.rank, 0);
    poison_elems(c, c.recv.bytes(), c.lay.count);
  }
  std::int64_t check(Ctx& c, bool) const override {
    return moved(c, c.recv.bytes(), c.lay.count, prev(c), 0) + moved(c, c.send.bytes(), c.lay.count, c.rank, 0);
  }

 private:
  static int next(const Ctx& c) { return (c.rank + 1) % c.nranks; }
  static int prev(const Ctx& c) { return (c.rank + c.nranks - 1) % c.nranks; }
};

// --- pingpong: rank 0 sends, rank 1 sends back; other ranks idle --------------------
class PingPong final : public Op {
 public:
  const char* name() const override { return "pingpong"; }
  Layout layout(std::uint64_t s, std::size_t es, int) const override { return flat(s, es); }
  double bus_factor(int) const override { return 1; }
  bool has_in_place() const override { return false; }
  int min_ranks() const override { return 2; }
  double time_divisor() const override { return 2; }  // osu_latency: half the round trip
  void run(Ctx& c, bool) const override {
    const auto n = c.lay.count;
    braid::OpOptions o = c.opts;
    o.algorithm = nullptr;
    if (c.rank == 0) {
      braid::send(c.send_t(0, n), 1, o);
      braid::recv(c.recv_t(0, n), 1, o);
    } else if (c.rank == 1) {
      braid::recv(c.recv_t(0, n), 0, o);
      braid::send(c.send_t(0, n), 0, o);
    }
  }
  void fill(Ctx& c, bool) const override {
    put(c, c.send.bytes(), c.lay.count, c.rank, 0);
    poison_elems(c, c.recv.bytes(), c.lay.count);
  }
  std::int64_t check(Ctx& c, bool) const override {
    if (c.rank > 1) return 0;
    return moved(c, c.recv.bytes(), c.lay.count, 1 - c.rank, 0) + moved(c, c.send.bytes(), c.lay.count, c.rank, 0);
  }
};

// --- bw: rank 0 streams a window of sends to rank 1 (osu_bw, ib_write_bw) ----------
// Per run(): rank 0 posts `window` isends of the message to rank 1, rank 1 posts
// as many irecvs, both wait for all of them, then rank 1 sends rank 0 a 1-byte
// ack (so rank 0's next window cannot start before rank 1 has everything).
// time_divisor() = window: the reported time is per message, so algbw =
// window * size * iters / elapsed. All receives of a window land in the same
// buffer (as osu_bw does); every message carries the same data, so the buffer
// after the check run holds rank 0's input exactly when the last receive (and
// every other one) delivered it.
class Bandwidth final : public Op {
 public:
  explicit Bandwidth(int window) : window_(window) {}
  const char* name() const override { return "bw"; }
  Layout layout(std::uint64_t s, std::size_t es, int) const override { return flat(s, es); }
  double bus_factor(int) const override { return 1; }
  bool has_in_place() const override { return false; }
  int min_ranks() const override { return 2; }
  double time_divisor() const override { return window_; }
  void run(Ctx& c, bool) const override {
    const auto n = c.lay.count;
    braid::OpOptions async = c.opts;
    async.async_op = true;
    async.algorithm = nullptr;
    braid::OpOptions sync = async;
    sync.async_op = false;
    std::uint8_t ack = 0;
    if (c.rank > 1) return;
    std::vector<braid::Work> w;
    w.reserve(static_cast<std::size_t>(window_));
    if (c.rank == 0) {
      for (int i = 0; i < window_; ++i) w.push_back(braid::isend(c.send_t(0, n), 1, async));
      for (auto& x : w) x.wait();
      braid::recv(braid::tensor(&ack, 1), 1, sync);
    } else {
      for (int i = 0; i < window_; ++i) w.push_back(braid::irecv(c.recv_t(0, n), 0, async));
      for (auto& x : w) x.wait();
      braid::send(braid::tensor(&ack, 1), 0, sync);
    }
  }
  void fill(Ctx& c, bool) const override {
    if (c.rank == 0) put(c, c.send.bytes(), c.lay.count, 0, 0);
    if (c.rank == 1) poison_elems(c, c.recv.bytes(), c.lay.count);
  }
  std::int64_t check(Ctx& c, bool) const override {
    if (c.rank == 1) return moved(c, c.recv.bytes(), c.lay.count, 0, 0);
    if (c.rank == 0) return moved(c, c.send.bytes(), c.lay.count, 0, 0);
    return 0;
  }

 private:
  int window_;
};

// --- barrier ----------------------------------------------------------------------
class Barrier final : public Op {
 public:
  const char* name() const override { return "barrier"; }
  Layout layout(std::uint64_t, std::size_t, int) const override { return {}; }
  double bus_factor(int) const override { return 0; }
  bool has_in_place() const override { return false; }
  bool sized() const override { return false; }
  void run(Ctx& c, bool) const override { braid::barrier(c.opts); }
  void fill(Ctx&, bool) const override {}
  std::int64_t check(Ctx&, bool) const override { return 0; }
};

}  // namespace

std::unique_ptr<Op> make_op(const std::string& name, int window) {
  if (name == "allreduce") return std::make_unique<AllReduce>();
  if (name == "broadcast") return std::make_unique<Broadcast>();
  if (name == "reduce") return std::make_unique<Reduce>();
  if (name == "allgather") return std::make_unique<AllGather>();
  if (name == "gather") return std::make_unique<Gather>();
  if (name == "scatter") return std::make_unique<Scatter>();
  if (name == "reducescatter") return std::make_unique<ReduceScatter>();
  if (name == "alltoall") return std::make_unique<AllToAll>();
  if (name == "sendrecv") return std::make_unique<SendRecv>();
  if (name == "pingpong") return std::make_unique<PingPong>();
  if (name == "barrier") return std::make_unique<Barrier>();
  if (name == "bw") return std::make_unique<Bandwidth>(window);
  return nullptr;
}

}  // namespace bench
