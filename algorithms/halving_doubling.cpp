// Halving-doubling (Rabenseifner): AllReduce as a reduce-scatter by recursive
// halving followed by an all-gather by recursive doubling; and ReduceScatter
// by recursive halving alone.
//
// Recursive halving on p = 2^k ranks. Every rank starts with a window of all
// p blocks. In the round at distance d = p/2, p/4, ..., 1, rank r and its
// partner r ^ d split their (common) window in two halves: the rank whose bit
// d is clear keeps the lower half, the other the upper one. Each sends the
// half it gives away and reduces the partner's copy of the half it keeps
// into its own. Windows halve every round, and after log2(p) rounds rank r
// holds block r reduced over all p ranks, having sent (p-1)/p of the data:
// half the bandwidth of recursive doubling in the same number of rounds.
// The AllReduce all-gather then runs the same rounds in mirror order
// (d = 1, 2, ..., p/2), exchanging the windows back.
//
// Other group sizes: fold in, fold out. With p the largest power of two <= n
// and e = n - p, extra rank p+i (i < e) sends its whole input to rank i, which
// reduces it into its own before the halving starts; at the end rank i sends
// the extra rank its result. The p ranks alone do the halving, so every
// round remains a pairwise exchange.
//
// AllReduce splits the c elements into p nearly equal blocks (builder's
// block()); when c < p some blocks are empty, and messages of empty ranges
// are left out on both sides. In a halving round the send reads one half
// while RecvReduce writes the other. It reads the contribution from Input
// (reads_input): the fold-in, or else the first round, combines Input with
// what arrives and writes Output, and from then on everything is in Output,
// so Output needs no copy of Input first.
//
// ReduceScatter (Input[n*c] read-only, Output[c]) has n blocks of exactly c
// elements and p ranks: rank i of the power-of-two set carries blocks i and,
// if i < e, p+i (the extra rank's block). A window of ranks [lo, hi) thus maps
// to two element ranges, blocks [lo, hi) and [p+lo, p+min(hi, e)), and each
// round sends and receives (at most) two messages. Input is read-only, so
// partial sums accumulate in Scratch (n*c, laid out like Input): a rank's
// partials are its Input until the first reduction writes them to Scratch,
// which saves copying Input up front. Where there is no partial in Scratch
// yet, a kept range is received into Scratch and the Input range reduced into
// it; afterwards RecvReduce accumulates in place. At the end a rank copies
// its block to Output and sends the extra rank its block.
#include <algorithm>
#include <array>
#include <vector>

#include "algorithms/builder.hpp"
#include "algorithms/generators.hpp"

namespace braid::plan {

namespace {

// Collects the steps of one round of one rank. The next round depends on all
// of them (it reads or overwrites what this one touched); a round that
// emitted nothing (all its ranges empty) leaves the previous round in place.
struct Rounds {
  Deps prev, now;
  void add(int step) { now.push_back(step); }
  void next() {
    if (!now.empty()) prev = std::move(now);
    now.clear();
  }
};

}  // namespace

std::vector<Deps> halving_doubling_among(PlanBuilder& b, const std::vector<int>& members, Span data,
                                         const std::vector<int>& ready, Span from) {
  const int n = static_cast<int>(members.size()), p = pow2_floor(n);
  const std::int64_t c = data.count;
  if (from.count == 0) from = data;
  // The contribution's copy of a range of data: where a member reads it
  // until its first reduction has written data.
  auto source = [&](Span s) { return Span{from.buf, from.offset + (s.offset - data.offset), s.count}; };
  std::vector<Deps> done(static_cast<std::size_t>(n));
  auto at = [&](int i) { return static_cast<std::size_t>(i); };
  auto start = [&](int i) { return ready.empty() ? -1 : ready[at(i)]; };
  if (n == 1 || c == 0) {
    for (int i = 0; i < n; ++i) done[at(i)] = {start(i)};
    return done;
  }

  // Elements of blocks [lo, hi) of the p-way split of data: contiguous.
  auto blocks = [&](int lo, int hi) {
    const std::int64_t begin = block(c, p, lo).offset;
    const std::int64_t end = hi == p ? c : block(c, p, hi).offset;
    return Span{data.buf, data.offset + begin, end - begin};
  };

  for (int i = 0; i < n; ++i) {
    const int r = members[at(i)];
    if (!b.keeps(r)) continue;
    if (i >= p) {  // extra member: hand the vector to member i-p, get the result back
      const int peer = members[at(i - p)];
      const int sent = b.send(r, peer, from, {start(i)});
      done[at(i)] = {b.recv(r, peer, data, {sent})};  // in place it overwrites what the send reads
      continue;
    }
    Rounds rounds;
    rounds.prev = {start(i)};
    // Until a reduction writes data, the member's values are in `from`
    // (when that is data itself, plain in-place reductions do).
    bool in_from = from.buf != data.buf || from.offset != data.offset;
    if (i + p < n) {
      const int peer = members[at(i + p)];
      rounds.add(in_from ? b.recv_reduce_with(r, peer, from, data, rounds.prev) : b.recv_reduce(r, peer, data, rounds.prev));
      in_from = false;
    }
    rounds.next();

    // Reduce-scatter by recursive halving: the window [lo, lo + 2d) halves.
    int lo = 0;
    for (int d = p / 2; d >= 1; d /= 2) {
      const int peer = members[at(i ^ d)];
      const int keep = (i & d) ? lo + d : lo, give = (i & d) ? lo : lo + d;
      const Span g = blocks(give, give + d), k = blocks(keep, keep + d);
      // The first round sends from `from` and combines it with what comes
      // into data; the half given away is never read from data again (the
      // all-gather overwrites it), so it needs no copy.
      if (g.count > 0) rounds.add(b.send(r, peer, in_from ? source(g) : g, rounds.prev));
      if (k.count > 0) rounds.add(b.recv_reduce_with(r, peer, in_from ? source(k) : k, k, rounds.prev));
      rounds.next();
      in_from = false;
      lo = keep;
    }
    // Now lo == i: member i holds block i reduced over all members.

    // All-gather by recursive doubling: windows grow back in mirror order.
    for (int d = 1; d < p; d *= 2) {
      const int peer = members[at(i ^ d)], mine = i & ~(d - 1), theirs = mine ^ d;
      const Span m = blocks(mine, mine + d), t = blocks(theirs, theirs + d);
      if (m.count > 0) rounds.add(b.send(r, peer, m, rounds.prev));
      if (t.count > 0) rounds.add(b.recv(r, peer, t, rounds.prev));
      rounds.next();
    }
    done[at(i)] = rounds.prev;
    if (i + p < n) b.send(r, members[at(i + p)], data, rounds.prev);
  }
  return done;
}

Plan halving_doubling_allreduce(const PlanArgs& args) {
  PlanBuilder b(args, "halving_doubling");
  if (reads_input_trivial(b)) return b.finish();
  std::vector<int> everyone(static_cast<std::size_t>(args.nranks));
  for (int r = 0; r < args.nranks; ++r) everyone[static_cast<std::size_t>(r)] = r;
  halving_doubling_among(b, everyone, out(0, args.count), {}, in(0, args.count));
  return b.finish();
}

Plan halving_doubling_reducescatter(const PlanArgs& args) {
  PlanBuilder b(args, "halving_doubling");
  const int n = args.nranks, p = pow2_floor(n), e = n - p;
  const std::int64_t c = args.count;
  if (c == 0) return b.finish();
  if (n == 1) {
    b.copy(0, in(0, c), out(0, c));
    return b.finish();
  }

  // The ranges carried by the ranks [lo, hi) of the power-of-two set, in
  // Scratch or, with the same offsets, in Input.
  auto carried = [&](int lo, int hi) {
    const std::int64_t extras = std::max(0, std::min(hi, e) - lo);
    return std::array<Span, 2>{scratch(lo * c, (hi - lo) * c), scratch((p + lo) * c, extras * c)};
  };
  auto in_input = [](Span s) { return in(s.offset, s.count); };

  for (int r : b.ranks()) {
    if (r >= p) {  // extra rank: contribute everything, receive the own block
      b.send(r, r - p, in(0, n * c));
      b.recv(r, r - p, out(0, c));
      continue;
    }
    b.need_scratch(r, n * c);
    Rounds rounds;
    bool in_scratch = false;  // are our partial sums in Scratch yet, or still Input?
    if (r < e) {  // fold in: Scratch = the extra rank's Input (op) ours
      const int got = b.recv(r, r + p, scratch(0, n * c));
      rounds.add(b.reduce(r, in(0, n * c), scratch(0, n * c), {got}));
      rounds.next();
      in_scratch = true;
    }

    int lo = 0;
    for (int d = p / 2; d >= 1; d /= 2) {
      const int peer = r ^ d;
      const int keep = (r & d) ? lo + d : lo, give = (r & d) ? lo : lo + d;
      for (Span s : carried(give, give + d))
        if (s.count > 0) rounds.add(b.send(r, peer, in_scratch ? s : in_input(s), rounds.prev));
      for (Span s : carried(keep, keep + d)) {
        if (s.count == 0) continue;
        if (in_scratch) {
          rounds.add(b.recv_reduce(r, peer, s, rounds.prev));
        } else {
          const int got = b.recv(r, peer, s, rounds.prev);
          rounds.add(got);
          rounds.add(b.reduce(r, in_input(s), s, {got}));
        }
      }
      rounds.next();
      in_scratch = true;
      lo = keep;
    }
    // Now lo == r: Scratch holds block r, and block p+r if r < e, fully reduced.
    b.copy(r, scratch(r * c, c), out(0, c), rounds.prev);
    if (r < e) b.send(r, r + p, scratch((r + p) * c, c), rounds.prev);
  }
  return b.finish();
}

}  // namespace braid::plan
