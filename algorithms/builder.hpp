// PlanBuilder: the small vocabulary algorithms write plans with.
//
// It numbers message slots so that the k-th send from a to b meets the k-th
// receive at b from a: an algorithm only has to emit each pair's sends and
// receives in the same order, which a readable algorithm does anyway.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "algorithms/plan.hpp"

namespace braid::plan {

using Deps = std::vector<std::int32_t>;

inline Span in(std::int64_t off, std::int64_t n) { return {Buf::Input, off, n}; }
inline Span out(std::int64_t off, std::int64_t n) { return {Buf::Output, off, n}; }
inline Span scratch(std::int64_t off, std::int64_t n) { return {Buf::Scratch, off, n}; }

// Block i of `count` elements split into `parts` nearly equal blocks (the
// first count % parts blocks are one element longer). Blocks may be empty.
struct Block {
  std::int64_t offset;
  std::int64_t count;
};
inline Block block(std::int64_t count, std::int64_t parts, std::int64_t i) {
  const std::int64_t base = count / parts, extra = count % parts;
  return {i * base + (i < extra ? i : extra), base + (i < extra ? 1 : 0)};
}

class PlanBuilder {
 public:
  PlanBuilder(const PlanArgs& args, const char* algorithm)
      : n_(args.nranks), only_(args.slice_rank >= 0 && args.slice_rank < args.nranks ? args.slice_rank : -1) {
    // Slot counters per ordered pair: n*n for the whole plan; for a slice
    // only the pairs with the sliced rank at the end that owns the step
    // (its sends and signals, its receives and waits), one per peer.
    const std::size_t pairs = only_ < 0 ? static_cast<std::size_t>(n_) * n_ : static_cast<std::size_t>(n_);
    sent_.assign(pairs, 0);
    received_ = signaled_ = waited_ = sent_;
    if (only_ >= 0) skipped_.assign(static_cast<std::size_t>(n_), 0);
    plan_.coll = args.coll;
    plan_.algorithm = algorithm;
    plan_.args = args;
    plan_.ranks.resize(static_cast<std::size_t>(n_));
  }

  int nranks() const { return n_; }
  const PlanArgs& args() const { return plan_.args; }

  // The ranks whose steps this builder keeps: all of them, or the slice's
  // one (PlanArgs::slice_rank). An algorithm whose loop over ranks emits
  // only rank r's steps loops over this, so a slice costs one rank's work.
  struct Ranks {
    int first, last;  // [first, last)
    struct It {
      int r;
      int operator*() const { return r; }
      It& operator++() { ++r; return *this; }
      bool operator!=(const It& o) const { return r != o.r; }
    };
    It begin() const { return {first}; }
    It end() const { return {last}; }
  };
  Ranks ranks() const { return only_ < 0 ? Ranks{0, n_} : Ranks{only_, only_ + 1}; }
  // Whether rank r's steps are kept (always, unless building a slice).
  bool keeps(int r) const { return only_ < 0 || r == only_; }
  // The sliced rank, or -1 for the whole plan.
  int slice() const { return only_; }

  // Each returns the new step's index in rank r's list, for use in deps.
  int send(int r, int peer, Span src, Deps deps = {}) {
    if (!keeps(r)) return skip(r);
    return add(r, make(StepKind::Send, peer, sent_[idx(r, peer)]++, src, {}, std::move(deps)));
  }
  int recv(int r, int peer, Span dst, Deps deps = {}) {
    if (!keeps(r)) return skip(r);
    return add(r, make(StepKind::Recv, peer, received_[idx(peer, r)]++, {}, dst, std::move(deps)));
  }
  int recv_reduce(int r, int peer, Span dst, Deps deps = {}) {
    if (!keeps(r)) return skip(r);
    return add(r, make(StepKind::RecvReduce, peer, received_[idx(peer, r)]++, {}, dst, std::move(deps)));
  }
  // dst = acc (op) received: the first reduction into a span of Output
  // whose contribution is still in Input (a reads_input plan).
  int recv_reduce_with(int r, int peer, Span acc, Span dst, Deps deps = {}) {
    if (!keeps(r)) return skip(r);
    Step s = make(StepKind::RecvReduce, peer, received_[idx(peer, r)]++, {}, dst, std::move(deps));
    s.acc = acc;
    return add(r, std::move(s));
  }
  int copy(int r, Span src, Span dst, Deps deps = {}) {
    if (!keeps(r)) return skip(r);
    return add(r, make(StepKind::Copy, -1, 0, src, dst, std::move(deps)));
  }
  int reduce(int r, Span src, Span dst, Deps deps = {}) {
    if (!keeps(r)) return skip(r);
    return add(r, make(StepKind::Reduce, -1, 0, src, dst, std::move(deps)));
  }
  // dst = acc (op) src: the first reduction into a span of Output whose
  // contribution is still in Input (a reads_input plan).
  int reduce_with(int r, Span src, Span acc, Span dst, Deps deps = {}) {
    if (!keeps(r)) return skip(r);
    Step s = make(StepKind::Reduce, -1, 0, src, dst, std::move(deps));
    s.acc = acc;
    return add(r, std::move(s));
  }

  // One-sided steps (see plan.hpp). Signal slots are numbered per ordered
  // pair like messages: the k-th signal from a to b meets b's k-th wait on a.
  // The caller still has to order each pair's signals (and waits) by deps.
  int signal(int r, int peer, Deps deps = {}) {
    if (!keeps(r)) return skip(r);
    return add(r, make(StepKind::Signal, peer, signaled_[idx(r, peer)]++, {}, {}, std::move(deps)));
  }
  int wait(int r, int peer, Deps deps = {}) {
    if (!keeps(r)) return skip(r);
    return add(r, make(StepKind::Wait, peer, waited_[idx(peer, r)]++, {}, {}, std::move(deps)));
  }
  // dst (local) = peer's src.
  int get(int r, int peer, Span peer_src, Span dst, Deps deps = {}) {
    if (!keeps(r)) return skip(r);
    return add(r, make(StepKind::Get, peer, 0, peer_src, dst, std::move(deps)));
  }
  // dst (local) = acc (local) op peer's src.
  int get_reduce(int r, int peer, Span peer_src, Span acc, Span dst, Deps deps = {}) {
    if (!keeps(r)) return skip(r);
    Step s = make(StepKind::GetReduce, peer, 0, peer_src, dst, std::move(deps));
    s.acc = acc;
    return add(r, std::move(s));
  }
  // peer's peer_dst (its Output or Scratch) = src (local).
  int put(int r, int peer, Span src, Span peer_dst, Deps deps = {}) {
    if (!keeps(r)) return skip(r);
    return add(r, make(StepKind::Put, peer, 0, src, peer_dst, std::move(deps)));
  }
  // Marks the plan as one whose AllReduce/Reduce/AllGather contribution (a
  // Broadcast root's data) is read from Input (plan.hpp, Plan::reads_input).
  void reads_input() { plan_.reads_input = true; }
  // A Broadcast message plan, once every step is emitted: the root's data is
  // read from its Input (reads_input), and its Output is filled by a copy
  // that is the root's last step and nothing waits for. Out of place, the
  // runtime would otherwise copy Input into Output before the first send;
  // this way the sends go first and the copy runs while they drain (the
  // executor makes progress between pieces of a large copy). In place the
  // copy is the identity, which the runtime skips. The root's steps only
  // read its Output (it holds the data from the start), so reading Input
  // instead is the same bytes.
  void root_reads_input() {
    plan_.reads_input = true;
    const int root = plan_.args.root;
    const std::int64_t c = plan_.args.count;
    if (!keeps(root) || c == 0) return;
    for (Step& s : plan_.ranks[static_cast<std::size_t>(root)].steps)
      if ((s.kind == StepKind::Send || s.kind == StepKind::Copy) && s.src.buf == Buf::Output) s.src.buf = Buf::Input;
    copy(root, in(0, c), out(0, c));
  }
  void need_scratch(int r, std::int64_t count) {
    if (!keeps(r)) return;
    auto& s = plan_.ranks[static_cast<std::size_t>(r)].scratch_count;
    if (count > s) s = count;
  }
  // Index of the last step of rank r, or -1: handy to chain "after everything".
  int last(int r) const {
    if (!keeps(r)) return skipped_[static_cast<std::size_t>(r)] - 1;
    return static_cast<int>(plan_.ranks[static_cast<std::size_t>(r)].steps.size()) - 1;
  }

  // A slice is a message plan (PlanArgs::slice_rank): its one_sided flag
  // comes from its own steps, which is every rank's answer for messages.
  Plan finish() {
    for (const RankPlan& rp : plan_.ranks)
      for (const Step& s : rp.steps)
        if (is_one_sided(s.kind)) plan_.one_sided = true;
    return std::move(plan_);
  }

 private:
  // The counter of the pair (from, to); in a slice one end is the sliced
  // rank, and the counter is the other end's.
  std::size_t idx(int from, int to) const {
    if (only_ >= 0) return static_cast<std::size_t>(from == only_ ? to : from);
    return static_cast<std::size_t>(from) * static_cast<std::size_t>(n_) + static_cast<std::size_t>(to);
  }
  // A step of a rank the slice leaves out: only its index in that rank's
  // list is kept, for the algorithm's own bookkeeping.
  int skip(int r) { return skipped_[static_cast<std::size_t>(r)]++; }
  static Step make(StepKind kind, int peer, std::int32_t slot, Span src, Span dst, Deps deps) {
    Step s;
    s.kind = kind;
    s.peer = peer;
    s.slot = slot;
    s.src = src;
    s.dst = dst;
    s.deps = std::move(deps);
    return s;
  }
  int add(int r, Step s) {
    // Drop the -1 "no dependency" markers algorithms pass for convenience.
    std::erase_if(s.deps, [](std::int32_t d) { return d < 0; });
    auto& steps = plan_.ranks[static_cast<std::size_t>(r)].steps;
    steps.push_back(std::move(s));
    return static_cast<int>(steps.size()) - 1;
  }

  int n_;
  int only_;  // the sliced rank, or -1
  Plan plan_;
  std::vector<std::int32_t> sent_, received_, signaled_, waited_;
  std::vector<std::int32_t> skipped_;  // a slice: steps left out per rank
};

// The largest power of two <= n (n >= 1): the doubling algorithms fold the
// ranks above it in and out.
inline int pow2_floor(int n) {
  int p = 1;
  while (p * 2 <= n) p *= 2;
  return p;
}

// Builder calls that emit nothing for an empty piece and return -1, which
// the builder drops from deps: a piece keeps its size along its whole path,
// so its sender and receiver skip it alike and slot numbering stays paired.
inline int send_piece(PlanBuilder& b, int r, int peer, Span s, Deps deps = {}) {
  return s.count > 0 ? b.send(r, peer, s, std::move(deps)) : -1;
}
inline int recv_piece(PlanBuilder& b, int r, int peer, Span s, Deps deps = {}) {
  return s.count > 0 ? b.recv(r, peer, s, std::move(deps)) : -1;
}
inline int recv_reduce_piece(PlanBuilder& b, int r, int peer, Span s, Deps deps = {}) {
  return s.count > 0 ? b.recv_reduce(r, peer, s, std::move(deps)) : -1;
}
inline int recv_reduce_piece_with(PlanBuilder& b, int r, int peer, Span acc, Span s, Deps deps = {}) {
  return s.count > 0 ? b.recv_reduce_with(r, peer, acc, s, std::move(deps)) : -1;
}
inline int copy_piece(PlanBuilder& b, int r, Span src, Span dst, Deps deps = {}) {
  return src.count > 0 ? b.copy(r, src, dst, std::move(deps)) : -1;
}

// Reductions of a reads_input all-reduce or reduce: a rank's contribution
// to a span `dst` of Output stays in Input, at the same offset, until the
// first reduction into dst combines it with what arrives.
// A reduction into dst of what `peer` sends, after `last`, the previous one
// into dst (-1: none yet, so the contribution is still in Input).
inline int fold_in(PlanBuilder& b, int r, int peer, Span dst, int last) {
  return last < 0 ? b.recv_reduce_with(r, peer, in(dst.offset, dst.count), dst) : b.recv_reduce(r, peer, dst, {last});
}
// Where the rank's value of dst is after `last`: Input until a reduction
// wrote dst.
inline Span folded(Span dst, int last) { return last < 0 ? in(dst.offset, dst.count) : dst; }

// The cases every reads_input plan (all-reduce: oneshot, twoshot, push,
// staged; reduce: peer_read; all-gather and broadcast: staged) handles alike: nothing to
// do (count 0), or one rank (Output = Input). Marks the plan reads_input;
// true when `b` is then complete.
inline bool reads_input_trivial(PlanBuilder& b) {
  b.reads_input();
  const std::int64_t c = b.args().count;
  if (c == 0) return true;
  if (b.nranks() == 1) {
    b.copy(0, in(0, c), out(0, c));
    return true;
  }
  return false;
}

}  // namespace braid::plan
