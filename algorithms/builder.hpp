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
      : n_(args.nranks), sent_(static_cast<std::size_t>(n_) * n_, 0),
        received_(static_cast<std::size_t>(n_) * n_, 0), signaled_(sent_), waited_(sent_) {
    plan_.coll = args.coll;
    plan_.algorithm = algorithm;
    plan_.args = args;
    plan_.ranks.resize(static_cast<std::size_t>(n_));
  }

  int nranks() const { return n_; }
  const PlanArgs& args() const { return plan_.args; }

  // Each returns the new step's index in rank r's list, for use in deps.
  int send(int r, int peer, Span src, Deps deps = {}) {
    return add(r, make(StepKind::Send, peer, sent_[idx(r, peer)]++, src, {}, std::move(deps)));
  }
  int recv(int r, int peer, Span dst, Deps deps = {}) {
    return add(r, make(StepKind::Recv, peer, received_[idx(peer, r)]++, {}, dst, std::move(deps)));
  }
  int recv_reduce(int r, int peer, Span dst, Deps deps = {}) {
    return add(r, make(StepKind::RecvReduce, peer, received_[idx(peer, r)]++, {}, dst, std::move(deps)));
  }
  int copy(int r, Span src, Span dst, Deps deps = {}) {
    return add(r, make(StepKind::Copy, -1, 0, src, dst, std::move(deps)));
  }
  int reduce(int r, Span src, Span dst, Deps deps = {}) {
    return add(r, make(StepKind::Reduce, -1, 0, src, dst, std::move(deps)));
  }

  // One-sided steps (see plan.hpp). Signal slots are numbered per ordered
  // pair like messages: the k-th signal from a to b meets b's k-th wait on a.
  // The caller still has to order each pair's signals (and waits) by deps.
  int signal(int r, int peer, Deps deps = {}) {
    return add(r, make(StepKind::Signal, peer, signaled_[idx(r, peer)]++, {}, {}, std::move(deps)));
  }
  int wait(int r, int peer, Deps deps = {}) {
    return add(r, make(StepKind::Wait, peer, waited_[idx(peer, r)]++, {}, {}, std::move(deps)));
  }
  // dst (local) = peer's src.
  int get(int r, int peer, Span peer_src, Span dst, Deps deps = {}) {
    return add(r, make(StepKind::Get, peer, 0, peer_src, dst, std::move(deps)));
  }
  // dst (local) = acc (local) op peer's src.
  int get_reduce(int r, int peer, Span peer_src, Span acc, Span dst, Deps deps = {}) {
    Step s = make(StepKind::GetReduce, peer, 0, peer_src, dst, std::move(deps));
    s.acc = acc;
    return add(r, std::move(s));
  }
  // peer's peer_dst (its Output or Scratch) = src (local).
  int put(int r, int peer, Span src, Span peer_dst, Deps deps = {}) {
    return add(r, make(StepKind::Put, peer, 0, src, peer_dst, std::move(deps)));
  }
  // Marks the plan as one whose AllReduce/Reduce input is read from Input
  // (plan.hpp, Plan::reads_input).
  void reads_input() { plan_.reads_input = true; }
  void need_scratch(int r, std::int64_t count) {
    auto& s = plan_.ranks[static_cast<std::size_t>(r)].scratch_count;
    if (count > s) s = count;
  }
  // Index of the last step of rank r, or -1: handy to chain "after everything".
  int last(int r) const {
    return static_cast<int>(plan_.ranks[static_cast<std::size_t>(r)].steps.size()) - 1;
  }

  Plan finish() {
    for (const RankPlan& rp : plan_.ranks)
      for (const Step& s : rp.steps)
        if (is_one_sided(s.kind)) plan_.one_sided = true;
    return std::move(plan_);
  }

 private:
  std::size_t idx(int from, int to) const {
    return static_cast<std::size_t>(from) * static_cast<std::size_t>(n_) + static_cast<std::size_t>(to);
  }
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
  Plan plan_;
  std::vector<std::int32_t> sent_, received_, signaled_, waited_;
};

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
inline int copy_piece(PlanBuilder& b, int r, Span src, Span dst, Deps deps = {}) {
  return src.count > 0 ? b.copy(r, src, dst, std::move(deps)) : -1;
}

// The cases every reads_input plan (all-reduce: oneshot, twoshot, push,
// staged; reduce: peer_read; all-gather: staged) handles alike: nothing to
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
