// Bruck: AllGather and AllToAll in ceil(log2 n) rounds for any n.
//
// Both work on a rotated view: rank r keeps in Scratch a table T whose entry
// i concerns the rank at distance i from it, so that every rank runs the same
// relative schedule and no power-of-two fold is needed. In the round at
// distance d = 1, 2, 4, ... (d < n) rank r sends to r - d and receives from
// r + d (AllGather), or the other way round (AllToAll).
//
// AllGather. T[i] = block of rank (r + i) % n. T starts with the own block;
// before the round at distance d, T[0, d) is filled, and r receives from r+d
// its first min(d, n-d) entries, which are exactly T[d, d + min(d, n-d)).
// After the last round T is full, and a rotation (two Copy steps) puts
// T[i] at Output block (r + i) % n. Per rank: ceil(log2 n) messages and
// (n-1)*c elements, with no power-of-two restriction.
//
// AllToAll (even split). T[i] = the block r sends to rank (r + i) % n, i.e.
// one that must travel distance i. In the round at distance d every rank
// sends forward by d the blocks whose index has bit d set, and puts the
// blocks it receives at the same indices: a block at index i thus moves by
// the sum of the bits of i, reaching rank (s + i) % n from its sender s, and
// afterwards rank r holds at T[i] the block from rank (r - i) % n. The blocks
// with bit d set are not contiguous (runs of d entries at d, 3d, 5d, ...),
// so they are packed into a send buffer P and received into R; when they
// form a single run they are sent straight from T. ceil(log2 n) messages of
// about n/2 blocks each: fewer messages than pairwise (n-1), more data (about
// log2(n)/2 times), so it suits small blocks.
//   The inverse rotation is folded into the unpacking: a block whose index
// has d as its highest bit will not move again, so when it arrives it goes
// straight to Output block (r - i) % n instead of back into T. Every block
// gets there exactly once, in the round of its highest bit.
#include <algorithm>

#include "algorithms/builder.hpp"
#include "algorithms/generators.hpp"

namespace braid::plan {

Plan bruck_allgather(const PlanArgs& args) {
  PlanBuilder b(args, "bruck");
  const int n = args.nranks;
  const std::int64_t c = args.count;
  if (n == 1 || c == 0) return b.finish();

  for (int r : b.ranks()) {
    b.need_scratch(r, n * c);
    // Every step that wrote T: each send reads the prefix they filled. The
    // receives write fresh entries nobody has read, so all can be posted at once.
    Deps filled = {b.copy(r, in(0, c), scratch(0, c))};
    for (int d = 1; d < n; d *= 2) {
      const std::int64_t m = std::min(d, n - d);  // entries moved this round
      b.send(r, (r - d + n) % n, scratch(0, m * c), filled);
      filled.push_back(b.recv(r, (r + d) % n, scratch(d * c, m * c)));
    }
    // Rotate: T[i] -> Output block (r + i) % n. T[0] is the own block, in place.
    const std::int64_t tail = n - 1 - r;  // T[1, n-r) -> blocks r+1 .. n-1
    if (tail > 0) b.copy(r, scratch(c, tail * c), out((r + 1) * c, tail * c), filled);
    if (r > 0) b.copy(r, scratch((n - r) * c, r * c), out(0, r * c), filled);
  }
  return b.finish();
}

bool bruck_alltoall_supports(const PlanArgs& args) { return args.splits.empty(); }

namespace {
// One empty local step after all of `deps` (none if deps is empty).
int join(PlanBuilder& b, int r, const Deps& deps) {
  if (deps.size() <= 1) return deps.empty() ? -1 : deps[0];
  return b.copy(r, scratch(0, 0), scratch(0, 0), deps);
}
}  // namespace

Plan bruck_alltoall(const PlanArgs& args) {
  PlanBuilder b(args, "bruck");
  const int n = args.nranks;
  const std::int64_t c = args.count;
  if (n == 1 || c == 0) return b.finish();

  // Blocks moved in the round at distance d; they form a single run (at d)
  // when 3d >= n, since runs start at d, 3d, 5d, ...
  auto moved_in = [&](int d) {
    std::int64_t moved = 0;
    for (int lo = d; lo < n; lo += 2 * d) moved += std::min(lo + d, n) - lo;
    return moved;
  };
  auto one_run = [&](int d) { return 3 * d >= n; };
  // Scratch = T (n blocks) | R (largest round) | P (largest packed round).
  std::int64_t most = 0, most_packed = 0;
  for (int d = 1; d < n; d *= 2) {
    most = std::max(most, moved_in(d));
    if (!one_run(d)) most_packed = std::max(most_packed, moved_in(d));
  }
  auto T = [&](std::int64_t i, std::int64_t blocks) { return scratch(i * c, blocks * c); };
  auto R = [&](std::int64_t i, std::int64_t blocks) { return scratch((n + i) * c, blocks * c); };
  auto P = [&](std::int64_t i, std::int64_t blocks) {
    return scratch((n + most + i) * c, blocks * c);
  };

  for (int r : b.ranks()) {
    b.need_scratch(r, (n + most + most_packed) * c);
    // Rotate: T[i] = Input block (r + i) % n. T[0], the own block, never moves.
    Deps prev;      // every step of the previous round (the rotation first)
    Deps unpacked;  // the previous round's steps that read R
    const std::int64_t tail = n - 1 - r;
    if (tail > 0) prev.push_back(b.copy(r, in((r + 1) * c, tail * c), T(1, tail)));
    if (r > 0) prev.push_back(b.copy(r, in(0, r * c), T(n - r, r)));

    for (int d = 1; d < n; d *= 2) {
      Deps round, packed;
      std::int64_t moved = 0;
      if (one_run(d)) {
        moved = moved_in(d);
        round.push_back(b.send(r, (r + d) % n, T(d, moved), prev));
      } else {
        for (int lo = d; lo < n; lo += 2 * d) {
          const int len = std::min(lo + d, n) - lo;
          packed.push_back(b.copy(r, T(lo, len), P(moved, len), prev));
          moved += len;
        }
        round.insert(round.end(), packed.begin(), packed.end());
        round.push_back(b.send(r, (r + d) % n, P(0, moved), packed));
      }
      const int got = b.recv(r, (r - d + n) % n, R(0, moved), unpacked);
      round.push_back(got);
      unpacked.clear();

      // Unpack run by run. Writing back into T must wait for the packing
      // copies that read the same entries (a single run never goes back to T):
      // through one empty step that joins them, so that each of the O(n)
      // unpacking copies holds two deps, not O(n) (a plan's size stays
      // linear in the world's, bench/plan_scale).
      Deps unpack_deps = {join(b, r, packed), got};
      std::int64_t pos = 0;
      for (int lo = d; lo < n; lo += 2 * d) {
        const int len = std::min(lo + d, n) - lo;
        if (lo == d) {  // highest bit is d: final, straight to Output (r - i) % n
          for (int i = lo; i < lo + len; ++i)
            unpacked.push_back(b.copy(r, R(pos + i - lo, 1), out(((r - i + n) % n) * c, c), {got}));
        } else {
          unpacked.push_back(b.copy(r, R(pos, len), T(lo, len), unpack_deps));
        }
        pos += len;
      }
      round.insert(round.end(), unpacked.begin(), unpacked.end());
      prev = {join(b, r, round)};
    }
  }
  return b.finish();
}

}  // namespace braid::plan
