// Barrier for one host ("signal"): the dissemination barrier of
// dissemination.cpp with one-sided signals in place of empty messages. In
// round k rank r signals r + 2^k and waits for r - 2^k (mod n); round k's
// signal follows round k-1's wait, so it carries everything heard so far,
// and after ceil(log2 n) rounds every rank has heard from all n.
//
// Each pair meets at most once (the offsets 2^k < n are distinct mod n), so
// the per-pair signal order the runtime needs holds trivially.
#include "algorithms/builder.hpp"
#include "algorithms/generators.hpp"

namespace braid::plan {

Plan signal_barrier(const PlanArgs& args) {
  PlanBuilder b(args, "signal");
  const int n = args.nranks;
  for (int r = 0; r < n; ++r) {
    int heard = -1;  // this rank's wait of the previous round
    for (int d = 1; d < n; d *= 2) {
      b.signal(r, (r + d) % n, {heard});
      heard = b.wait(r, (r - d + n) % n, {heard});
    }
  }
  return b.finish();
}

}  // namespace braid::plan
