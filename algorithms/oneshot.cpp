// One-shot algorithms for one host ("oneshot"): each rank publishes its data
// in its shared Scratch, signals every rank that needs it, and the readers
// fetch it straight from there with Get/GetReduce. One synchronisation, so
// the latency is one signal; every byte is copied once more than in the
// direct ("peer_read") variants, so these win for small buffers.
//
// Why Scratch and not the caller's buffers: a rank may return as soon as it
// has what it needs, because its Scratch stays valid for the readers (the
// runtime double-buffers it across calls; see plan.hpp). That spares the
// exit round the peer_read variants need before a caller may reuse its
// buffer. The one rule that buys it: whoever publishes in Scratch waits on
// every rank that reads it somewhere in the plan.
#include <cstdint>
#include <vector>

#include "algorithms/builder.hpp"
#include "algorithms/generators.hpp"

namespace braid::plan {

bool one_sided_only(const PlanArgs& args) {
  return (args.topology.one_host || args.topology.rdma) && args.nranks >= 1;
}

namespace {

// Rank r copies `src` into its Scratch and signals every peer in `readers`
// once the copy is done; returns the copy's step.
int publish(PlanBuilder& b, int r, Span src, const std::vector<int>& readers) {
  b.need_scratch(r, src.count);
  const int copied = b.copy(r, src, scratch(0, src.count));
  for (int q : readers)
    if (q != r) b.signal(r, q, {copied});
  return copied;
}

std::vector<int> everyone(int n) {
  std::vector<int> all(static_cast<std::size_t>(n));
  for (int q = 0; q < n; ++q) all[static_cast<std::size_t>(q)] = q;
  return all;
}

// Rank r waits on every peer; waited[q] is the wait on q (-1 for r itself).
std::vector<int> wait_all(PlanBuilder& b, int r) {
  std::vector<int> waited(static_cast<std::size_t>(b.nranks()), -1);
  for (int q = 0; q < b.nranks(); ++q)
    if (q != r) waited[static_cast<std::size_t>(q)] = b.wait(r, q);
  return waited;
}

// dst = x_0 op x_1 op ... op x_{n-1}, always in rank order, so that every
// rank computing it gets bit-identical results (floating-point addition is
// commutative but not associative). x_q is q's Scratch span `at` for a peer;
// the rank's own value is `own`, a local span. Rank 0 holds x_0 itself and
// combines it with x_1 straight into dst, reading x_0 from `first_acc` (its
// Input, or dst when dst already holds it): no copy into dst first. Each fetch
// from q waits for q's signal; `after` orders the first write of dst. n >= 2.
void reduce_in_rank_order(PlanBuilder& b, int r, Span at, Span own, Span first_acc, Span dst,
                          const std::vector<int>& waited, int after) {
  const int n = b.nranks();
  const auto wait_on = [&](int q) { return waited[static_cast<std::size_t>(q)]; };
  int prev = r == 0 ? b.get_reduce(r, 1, at, first_acc, dst, {wait_on(1), after})
                    : b.get(r, 0, at, dst, {wait_on(0), after});
  for (int q = r == 0 ? 2 : 1; q < n; ++q)
    prev = q == r ? b.reduce(r, own, dst, {prev}) : b.get_reduce(r, q, at, dst, dst, {wait_on(q), prev});
}

}  // namespace

// AllReduce: everyone publishes its contribution and reduces all n of them
// itself, in rank order (so all ranks agree to the bit). n reads of c per
// rank: the small-message all-reduce.
//
// It reads the caller's Input (reads_input): out of place, copying the input
// into Output first would cost another pass over the data. Rank 0 combines
// its Input with rank 1's Scratch straight into Output; the others start
// Output from rank 0's Scratch. A rank's own value is taken from its Scratch,
// not its Input: in place, Input is Output and has been overwritten by then.
Plan oneshot_allreduce(const PlanArgs& args) {
  PlanBuilder b(args, "oneshot");
  if (reads_input_trivial(b)) return b.finish();
  const int n = args.nranks;
  const std::int64_t c = args.count;
  for (int r = 0; r < n; ++r) {
    const int copied = publish(b, r, in(0, c), everyone(n));
    const auto waited = wait_all(b, r);
    reduce_in_rank_order(b, r, scratch(0, c), scratch(0, c), in(0, c), out(0, c), waited, copied);
  }
  return b.finish();
}

// ReduceScatter: everyone publishes its whole Input; rank r reduces block r
// of all of them, in rank order, into Output.
Plan oneshot_reducescatter(const PlanArgs& args) {
  PlanBuilder b(args, "oneshot");
  const int n = args.nranks;
  const std::int64_t c = args.count;
  if (c == 0) return b.finish();
  if (n == 1) {
    b.copy(0, in(0, c), out(0, c));
    return b.finish();
  }
  for (int r = 0; r < n; ++r) {
    const std::int64_t mine = static_cast<std::int64_t>(r) * c;
    publish(b, r, in(0, static_cast<std::int64_t>(n) * c), everyone(n));
    const auto waited = wait_all(b, r);
    reduce_in_rank_order(b, r, scratch(mine, c), in(mine, c), in(mine, c), out(0, c), waited, -1);
  }
  return b.finish();
}

// AllGather: everyone publishes its block and fetches the others'.
Plan oneshot_allgather(const PlanArgs& args) {
  PlanBuilder b(args, "oneshot");
  const int n = args.nranks;
  const std::int64_t c = args.count;
  if (n == 1 || c == 0) return b.finish();
  for (int r = 0; r < n; ++r) {
    publish(b, r, in(0, c), everyone(n));
    const auto waited = wait_all(b, r);
    for (int q = 0; q < n; ++q)
      if (q != r) b.get(r, q, scratch(0, c), out(static_cast<std::int64_t>(q) * c, c), {waited[static_cast<std::size_t>(q)]});
  }
  return b.finish();
}

// Broadcast: the root publishes, the others fetch. Each non-root signals the
// root on entry, and the root waits for all of them: that is the scratch
// rule, not a barrier the data needs.
Plan oneshot_broadcast(const PlanArgs& args) {
  PlanBuilder b(args, "oneshot");
  const int n = args.nranks, root = args.root;
  const std::int64_t c = args.count;
  if (n == 1 || c == 0) return b.finish();
  publish(b, root, out(0, c), everyone(n));
  wait_all(b, root);
  for (int r = 0; r < n; ++r) {
    if (r == root) continue;
    b.signal(r, root);
    b.get(r, root, scratch(0, c), out(0, c), {b.wait(r, root)});
  }
  return b.finish();
}

// Reduce: the non-roots publish, the root reduces in rank order. The root's
// signal at start, which every non-root waits for, is the scratch rule seen
// from the other side: a non-root cannot run two calls ahead of the root.
Plan oneshot_reduce(const PlanArgs& args) {
  PlanBuilder b(args, "oneshot");
  const int n = args.nranks, root = args.root;
  const std::int64_t c = args.count;
  if (n == 1 || c == 0) return b.finish();
  for (int q = 0; q < n; ++q)
    if (q != root) b.signal(root, q);
  const auto waited = wait_all(b, root);
  // A root other than 0 overwrites its Output with x_0 first: keep x_root.
  int kept = -1;
  if (root != 0) {
    b.need_scratch(root, c);
    kept = b.copy(root, out(0, c), scratch(0, c));
  }
  reduce_in_rank_order(b, root, scratch(0, c), scratch(0, c), out(0, c), out(0, c), waited, kept);
  for (int r = 0; r < n; ++r) {
    if (r == root) continue;
    publish(b, r, out(0, c), {root});
    b.wait(r, root);
  }
  return b.finish();
}

}  // namespace braid::plan
