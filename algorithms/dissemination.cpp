// Dissemination barrier (Hensgen, Finkel and Manber): ceil(log2 n) rounds;
// in round k rank r signals rank r + 2^k and waits for rank r - 2^k (mod n).
// Unlike a tree barrier it needs no gather-then-release, and it works for
// any n, not only powers of two.
//
// Why it is a barrier: by induction, once rank r has finished round k it has
// heard, directly or through a chain of signals, from ranks r - (2^(k+1) - 1)
// .. r, so after ceil(log2 n) rounds from all n. Round k+1's signal waits
// for round k's receive, so it carries everything heard so far, and the
// receives follow one another, so the last one completes only once the rank
// has heard from everyone. Messages carry no data.
#include "algorithms/builder.hpp"
#include "algorithms/generators.hpp"

namespace braid::plan {

Plan dissemination_barrier(const PlanArgs& args) {
  PlanBuilder b(args, "dissemination");
  const int n = args.nranks;
  const Span nothing = out(0, 0);
  for (int r : b.ranks()) {
    int heard = -1;  // this rank's receive of the previous round
    for (int d = 1; d < n; d *= 2) {
      b.send(r, (r + d) % n, nothing, {heard});
      heard = b.recv(r, (r - d + n) % n, nothing, {heard});
    }
  }
  return b.finish();
}

}  // namespace braid::plan
