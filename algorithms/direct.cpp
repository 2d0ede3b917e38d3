// Direct algorithms ("direct"): every block goes straight from the rank that
// has it to the rank that needs it, in one message, all posted at once.
// One message time when the network has the capacity (small blocks, few
// ranks); the root of Gather and Scatter handles n-1 messages itself, so
// for large blocks the tree variants spread that load.
//
// Empty blocks are not sent: both ends know every block's size.
#include <cstdint>
#include <vector>

#include "algorithms/builder.hpp"
#include "src/common/errors.hpp"
#include "algorithms/generators.hpp"

namespace braid::plan {
namespace {

// Elements rank i sends rank j in an all-to-all.
std::int64_t split(const PlanArgs& a, int i, int j) {
  return a.splits.empty() ? a.count : a.splits[static_cast<std::size_t>(i)][static_cast<std::size_t>(j)];
}

}  // namespace

// Gather: each non-root sends its Input to the root, which receives it into
// that rank's block of Output; the root's own block is already there.
Plan direct_gather(const PlanArgs& args) {
  PlanBuilder b(args, "direct");
  const std::int64_t c = args.count;
  for (int r = 0; r < args.nranks && c > 0; ++r) {
    if (r == args.root) continue;
    b.send(r, args.root, in(0, c));
    b.recv(args.root, r, out(static_cast<std::int64_t>(r) * c, c));
  }
  return b.finish();
}

// Scatter: the root sends block r of its Input to rank r.
Plan direct_scatter(const PlanArgs& args) {
  PlanBuilder b(args, "direct");
  const std::int64_t c = args.count;
  for (int r = 0; r < args.nranks && c > 0; ++r) {
    if (r == args.root) continue;
    b.send(args.root, r, in(static_cast<std::int64_t>(r) * c, c));
    b.recv(r, args.root, out(0, c));
  }
  return b.finish();
}

bool direct_alltoall_supports(const PlanArgs& args) { return splits_well_formed(args); }

// AllToAll, even or uneven: Input holds the blocks for ranks 0..n-1 one
// after another (sizes splits[r][j]), Output the blocks from ranks 0..n-1
// (sizes splits[i][r]). Rank r addresses r+1, r+2, ... first so that the
// ranks do not all start on rank 0. Sends read Input and receives write
// disjoint blocks of Output, so nothing needs a dependency. (The "pairwise"
// algorithm is the same exchange with a bound on rounds in flight, better
// for large blocks.)
Plan direct_alltoall(const PlanArgs& args) {
  if (!direct_alltoall_supports(args))
    fail(ErrorCode::InvalidArgument,
         "direct alltoall: splits must be {} rows of {} non-negative counts (or empty)",
         args.nranks, args.nranks);
  PlanBuilder b(args, "direct");
  const int n = args.nranks;
  for (int r : b.ranks()) {
    std::vector<std::int64_t> in_off(static_cast<std::size_t>(n) + 1, 0), out_off = in_off;
    for (int j = 0; j < n; ++j) {
      const auto u = static_cast<std::size_t>(j);
      in_off[u + 1] = in_off[u] + split(args, r, j);
      out_off[u + 1] = out_off[u] + split(args, j, r);
    }
    for (int k = 1; k < n; ++k) {
      const int to = (r + k) % n, from = (r - k + n) % n;
      if (const std::int64_t len = split(args, r, to); len > 0)
        b.send(r, to, in(in_off[static_cast<std::size_t>(to)], len));
      if (const std::int64_t len = split(args, from, r); len > 0)
        b.recv(r, from, out(out_off[static_cast<std::size_t>(from)], len));
    }
  }
  return b.finish();
}

}  // namespace braid::plan
