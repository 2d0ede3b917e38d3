// Pairwise exchange: AllToAll in n-1 rounds, even or uneven splits.
//
// In round k = 1 .. n-1 rank r sends its block for rank (r + k) % n and
// receives the block from rank (r - k + n) % n. Every ordered pair of ranks
// meets exactly once, each rank sends one and receives one message per round,
// and within a round the traffic is a permutation, so no rank's link receives
// from two senders of the same round. Every byte goes straight from Input to
// its final place in Output: no Scratch, no copies, the minimum volume.
//
// Layout (uneven splits, PlanArgs::splits[i][j] = elements rank i sends rank
// j; the even case is splits[i][j] = count): Input holds the blocks for ranks
// 0..n-1 consecutively, Output receives the blocks from ranks 0..n-1
// consecutively; the own block is already in Output. Empty blocks are not
// sent: both ends know every size, so both leave the same messages out.
//
// Rounds in flight: one. No step touches memory another writes (sends read
// the read-only Input, receives write disjoint Output blocks), so all n-1
// rounds could be posted at once; that is the "direct" algorithm, the better
// choice when messages are small and per-message latency dominates. Pairwise
// is the large-message schedule: a rank starts round k once its round k-1
// send and receive are done, so the rounds stay aligned across ranks and each
// one is a permutation: every link carries one message at a time in each
// direction. Overlapping rounds would point several senders at one receiver
// (incast, transport buffering for up to n-1 transfers per rank); the cost
// model agrees: with two or more rounds in flight its one-port rule lets
// early messages take ports out of turn, and its prediction for 64 ranks is
// 3-4 times the lockstep one at every size. Lockstep costs one latency per
// round, which a one-port schedule pays anyway. It cannot deadlock: if every
// rank has finished its rounds before k, every round-k pair is posted.
#include <algorithm>
#include <vector>

#include "algorithms/builder.hpp"
#include "algorithms/generators.hpp"
#include "src/common/errors.hpp"

namespace braid::plan {

namespace {

// Elements rank i sends rank j.
std::int64_t block_size(const PlanArgs& a, int i, int j) {
  return a.splits.empty() ? a.count : a.splits[static_cast<std::size_t>(i)][static_cast<std::size_t>(j)];
}

}  // namespace

bool pairwise_alltoall_supports(const PlanArgs& args) { return splits_well_formed(args); }

Plan pairwise_alltoall(const PlanArgs& args) {
  if (!splits_well_formed(args))
    fail(ErrorCode::InvalidArgument,
         "pairwise alltoall: splits must be {} rows of {} non-negative counts (or empty)",
         args.nranks, args.nranks);
  PlanBuilder b(args, "pairwise");
  const int n = args.nranks;

  for (int r : b.ranks()) {
    // Where each block starts: Input by destination, Output by source.
    std::vector<std::int64_t> in_off(static_cast<std::size_t>(n), 0), out_off = in_off;
    for (int j = 1; j < n; ++j) {
      const auto at = static_cast<std::size_t>(j);
      in_off[at] = in_off[at - 1] + block_size(args, r, j - 1);
      out_off[at] = out_off[at - 1] + block_size(args, j - 1, r);
    }
    Deps prev;  // the previous round's steps (rounds with no data are skipped)
    for (int k = 1; k < n; ++k) {
      const int to = (r + k) % n, from = (r - k + n) % n;
      Deps round;
      if (const std::int64_t len = block_size(args, r, to); len > 0)
        round.push_back(b.send(r, to, in(in_off[static_cast<std::size_t>(to)], len), prev));
      if (const std::int64_t len = block_size(args, from, r); len > 0)
        round.push_back(b.recv(r, from, out(out_off[static_cast<std::size_t>(from)], len), prev));
      if (!round.empty()) prev = std::move(round);
    }
  }
  return b.finish();
}

}  // namespace braid::plan
