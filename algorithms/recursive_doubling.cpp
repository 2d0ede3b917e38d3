// Recursive doubling: AllReduce and AllGather in log2(n) exchange rounds.
//
// Power-of-two groups. In the round at distance d = 1, 2, 4, ... rank r
// exchanges with r ^ d. Before the round, r and its partner each hold the
// combination of an aligned group of d ranks; after it, both hold the
// combination of the 2d ranks. So after log2(n) rounds everyone has
// everything.
//   AllReduce exchanges the whole vector every round: log2(n) messages of c
//   elements per rank. Latency-optimal, bandwidth-poor: the choice for small
//   vectors (halving_doubling and ring are better for large ones).
//   AllGather exchanges the blocks gathered so far, which double each round:
//   log2(n) messages, (n-1)*c elements received per rank.
//
// Other group sizes: fold in, fold out. Let p be the largest power of two
// <= n and e = n - p. Rank p+i (i < e) is an "extra" rank: it first hands its
// data to rank i, sits out the doubling among ranks 0..p-1, and at the end
// receives the complete result from rank i. This adds two messages to the
// critical path, but every round among the p ranks stays a plain pairwise
// exchange, and ranks e..p-1 do exactly the power-of-two algorithm.
//   AllReduce folds by reduction: rank i receives-and-reduces rank p+i's
//   vector, so the p ranks reduce the contributions of all n.
//   AllGather folds by ownership: rank i receives block p+i and from then on
//   carries two blocks, i and p+i. A group of ranks [lo, hi) among the p then
//   owns two element ranges of Output, blocks [lo, hi) and blocks
//   [p+lo, p+min(hi, e)), and each round sends (at most) those two ranges.
//   Extra rank p+i finally receives everything except its own block.
//
// Buffers. AllReduce reads the rank's contribution from Input (reads_input):
// the first reduction, the fold-in's or the first round's, combines Input
// with what arrived into Output, so out of place nothing is copied first. It
// needs c elements of Scratch: a rank sends its value while receiving the
// partner's, and receiving straight into Output (RecvReduce) would overwrite
// what the send is still reading (in place, Input is Output).
// AllGather writes every block directly at its final place in Output.
#include <algorithm>
#include <array>

#include "algorithms/builder.hpp"
#include "algorithms/generators.hpp"

namespace braid::plan {

namespace {


}  // namespace

Plan recursive_doubling_allreduce(const PlanArgs& args) {
  PlanBuilder b(args, "recursive_doubling");
  if (reads_input_trivial(b)) return b.finish();
  const int n = args.nranks, p = pow2_floor(n);
  const std::int64_t c = args.count;

  for (int r : b.ranks()) {
    if (r >= p) {  // extra rank: hand the vector to rank r-p, get the result back
      const int sent = b.send(r, r - p, in(0, c));
      b.recv(r, r - p, out(0, c), {sent});  // in place it overwrites what the send reads
      continue;
    }
    // The rank's value is in Input until a reduction writes Output: the
    // fold-in, or else the first round's, combines Input with what came.
    const Span all = out(0, c);
    int last = r + p < n ? fold_in(b, r, r + p, all, -1) : -1;  // the step that last wrote Output
    int scanned = -1;                                            // the step that last read Scratch
    b.need_scratch(r, c);
    for (int d = 1; d < p; d <<= 1) {
      const int peer = r ^ d;
      const int sent = b.send(r, peer, folded(all, last), {last});
      const int got = b.recv(r, peer, scratch(0, c), {scanned});
      // Output is written only once the send is through: in place it is Input.
      const Deps both{sent, got};
      last = scanned = last < 0 ? b.reduce_with(r, scratch(0, c), folded(all, last), all, both)
                                : b.reduce(r, scratch(0, c), all, both);
    }
    if (r + p < n) b.send(r, r + p, all, {last});
  }
  return b.finish();
}

Plan recursive_doubling_allgather(const PlanArgs& args) {
  PlanBuilder b(args, "recursive_doubling");
  const int n = args.nranks, p = pow2_floor(n), e = n - p;
  const std::int64_t c = args.count;
  if (n == 1 || c == 0) return b.finish();

  // The Output ranges owned by the ranks [lo, hi) of the power-of-two set:
  // their own blocks and the blocks folded in from their extra partners.
  auto owned = [&](int lo, int hi) {
    const std::int64_t extras = std::max(0, std::min(hi, e) - lo);
    return std::array<Span, 2>{out(lo * c, (hi - lo) * c), out((p + lo) * c, extras * c)};
  };

  b.reads_input();
  for (int r : b.ranks()) {
    const Span own = out(r * c, c);
    if (r >= p) {  // extra rank: give rank r-p our block, receive all the others
      b.send(r, r - p, in(0, c));
      b.recv(r, r - p, out(0, r * c));
      if (r + 1 < n) b.recv(r, r - p, out((r + 1) * c, (n - r - 1) * c));
      b.copy(r, in(0, c), own);
      continue;
    }
    // Every receive lands in a range nothing has touched yet, so all are
    // posted at once; each send waits for the receives that filled what it sends.
    // The first round sends the own block from Input; the copy of it into
    // Output, which later rounds send as part of a larger range, runs while
    // that round's messages travel.
    Deps filled;
    if (r < e) filled.push_back(b.recv(r, r + p, out((r + p) * c, c)));
    const int copied = b.copy(r, in(0, c), own);
    for (int d = 1; d < p; d <<= 1) {
      const int peer = r ^ d, mine = r & ~(d - 1), theirs = mine ^ d;
      for (Span s : owned(mine, mine + d))
        if (s.count > 0) b.send(r, peer, d == 1 && s.offset == own.offset ? in(0, c) : s, filled);
      if (d == 1) filled.push_back(copied);
      for (Span s : owned(theirs, theirs + d))
        if (s.count > 0) filled.push_back(b.recv(r, peer, s));
    }
    if (r < e) {  // fold out: everything but the extra rank's own block
      const int x = r + p;
      b.send(r, x, out(0, x * c), filled);
      if (x + 1 < n) b.send(r, x, out((x + 1) * c, (n - x - 1) * c), filled);
    }
  }
  return b.finish();
}

}  // namespace braid::plan
