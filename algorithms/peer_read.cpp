// Direct one-host algorithms ("peer_read", and "twoshot" for all-reduce):
// every rank reads what it needs straight from the owner's Input or Output
// with Get/GetReduce, no staging copy. The price is synchronisation at both
// ends:
//   - entry: a rank's buffers are only valid once it has entered the call,
//     so a reader Waits for the owner's "ready" signal first;
//   - exit: the caller may reuse its buffers once the call returns, so the
//     owner Waits until every reader has signalled "done" (the verifier's
//     rule that a Get of Input/Output happens before some step of its owner).
// Each reader signals "done" to an owner right after its last read from that
// owner, so an owner that everyone has read from can leave without waiting
// for the slowest reader's other reads.
#include <cstdint>
#include <vector>

#include "algorithms/builder.hpp"
#include "src/common/errors.hpp"
#include "algorithms/generators.hpp"

namespace braid::plan {
namespace {

// Rank r's entry round: signal every peer "ready", wait for every peer's.
struct Entry {
  std::vector<int> signaled, waited;  // per peer, -1 for r itself
};
Entry enter(PlanBuilder& b, int r) {
  const int n = b.nranks();
  Entry e{std::vector<int>(static_cast<std::size_t>(n), -1), std::vector<int>(static_cast<std::size_t>(n), -1)};
  for (int q = 0; q < n; ++q)
    if (q != r) e.signaled[static_cast<std::size_t>(q)] = b.signal(r, q);
  for (int q = 0; q < n; ++q)
    if (q != r) e.waited[static_cast<std::size_t>(q)] = b.wait(r, q);
  return e;
}

// Rank r's exit round: signal q "done" after last_read[q] (its last step
// touching q's memory, or -1), wait for every peer's "done". Each signal and
// wait follows the entry round's for the same peer (per-pair order).
void leave(PlanBuilder& b, int r, const Entry& e, const std::vector<int>& last_read) {
  const int n = b.nranks();
  for (int q = 0; q < n; ++q) {
    if (q == r) continue;
    const auto u = static_cast<std::size_t>(q);
    b.signal(r, q, {e.signaled[u], last_read[u]});
    b.wait(r, q, {e.waited[u]});
  }
}

// Peers in the order rank r visits them: r+1, r+2, ... so that the ranks do
// not all read from rank 0 first.
int peer_at(int r, int k, int n) { return (r + k) % n; }

std::int64_t split(const PlanArgs& a, int i, int j) {
  return a.splits.empty() ? a.count : a.splits[static_cast<std::size_t>(i)][static_cast<std::size_t>(j)];
}

// Rooted plans where the root reads every non-root: each non-root says it
// has entered (its Input is readable), then waits for the root's "done".
void non_roots_enter_and_wait(PlanBuilder& b, int root) {
  for (int r = 0; r < b.nranks(); ++r) {
    if (r == root) continue;
    b.signal(r, root);
    b.wait(r, root);
  }
}

// Rooted plans where every non-root reads the root: the root says it has
// entered, non-root r fetches root_src(r) into dst, then says it is done.
template <class RootSrc>
void non_roots_fetch(PlanBuilder& b, int root, RootSrc&& root_src, Span dst) {
  for (int r = 0; r < b.nranks(); ++r) {
    if (r == root) continue;
    b.signal(root, r);
    b.wait(root, r);
    const int got = b.get(r, root, root_src(r), dst, {b.wait(r, root)});
    b.signal(r, root, {got});
  }
}

}  // namespace

// AllReduce "twoshot" (reads_input): a reduce-scatter and an all-gather, each
// one read of everything. Rank r reduces slice r of everyone's Input into its
// Output (phase 1), then fetches every other slice from its owner's Output
// (phase 2); then the exit round. Every rank moves ~2c elements whatever n
// is, so this is the large all-reduce; three signal latencies make it lose
// to "oneshot" for small ones. Each slice is reduced by one rank only, so
// all ranks hold the same bits.
//
// In place (Input is Output), rank q's Input slice r is overwritten in phase
// 2 by q's fetch from r, which waits for r's phase-2 signal, which follows
// r's reads of it in phase 1.
Plan twoshot_allreduce(const PlanArgs& args) {
  PlanBuilder b(args, "twoshot");
  if (reads_input_trivial(b)) return b.finish();
  const int n = args.nranks;
  const std::int64_t c = args.count;
  auto slice_in = [&](int i) { const Block s = block(c, n, i); return in(s.offset, s.count); };
  auto slice_out = [&](int i) { const Block s = block(c, n, i); return out(s.offset, s.count); };
  for (int r = 0; r < n; ++r) {
    const Entry e = enter(b, r);
    // Phase 1: out[slice r] = in[slice r] op every peer's in[slice r].
    int prev = -1;
    std::vector<int> last_read(static_cast<std::size_t>(n), -1);
    for (int k = 1; k < n; ++k) {
      const int q = peer_at(r, k, n);
      const Span acc = k == 1 ? slice_in(r) : slice_out(r);
      prev = b.get_reduce(r, q, slice_in(r), acc, slice_out(r), {e.waited[static_cast<std::size_t>(q)], prev});
      last_read[static_cast<std::size_t>(q)] = prev;
    }
    // Phase 2: slice r is final; tell everyone, then fetch theirs.
    std::vector<int> reduced(static_cast<std::size_t>(n), -1), waited(reduced);
    for (int q = 0; q < n; ++q)
      if (q != r) reduced[static_cast<std::size_t>(q)] = b.signal(r, q, {prev, e.signaled[static_cast<std::size_t>(q)]});
    for (int q = 0; q < n; ++q)
      if (q != r) waited[static_cast<std::size_t>(q)] = b.wait(r, q, {e.waited[static_cast<std::size_t>(q)]});
    for (int k = 1; k < n; ++k) {
      const int q = peer_at(r, k, n);
      const auto u = static_cast<std::size_t>(q);
      last_read[u] = b.get(r, q, slice_out(q), slice_out(q), {waited[u]});
    }
    // Phase 3: exit round, ordered after phase 2's signals and waits.
    leave(b, r, Entry{reduced, waited}, last_read);
  }
  return b.finish();
}

// ReduceScatter: rank r reduces block r of every peer's Input into Output.
Plan peer_read_reducescatter(const PlanArgs& args) {
  PlanBuilder b(args, "peer_read");
  const int n = args.nranks;
  const std::int64_t c = args.count;
  if (c == 0) return b.finish();
  if (n == 1) {
    b.copy(0, in(0, c), out(0, c));
    return b.finish();
  }
  for (int r = 0; r < n; ++r) {
    const Entry e = enter(b, r);
    const Span mine = in(static_cast<std::int64_t>(r) * c, c);
    std::vector<int> last_read(static_cast<std::size_t>(n), -1);
    int prev = -1;
    for (int k = 1; k < n; ++k) {
      const int q = peer_at(r, k, n);
      // The first combines with the own block in place of a copy of it.
      prev = b.get_reduce(r, q, mine, k == 1 ? mine : out(0, c), out(0, c), {e.waited[static_cast<std::size_t>(q)], prev});
      last_read[static_cast<std::size_t>(q)] = prev;
    }
    leave(b, r, e, last_read);
  }
  return b.finish();
}

// AllGather: rank r fetches every peer's Input into its block of Output.
Plan peer_read_allgather(const PlanArgs& args) {
  PlanBuilder b(args, "peer_read");
  const int n = args.nranks;
  const std::int64_t c = args.count;
  if (n == 1 || c == 0) return b.finish();
  for (int r = 0; r < n; ++r) {
    const Entry e = enter(b, r);
    std::vector<int> last_read(static_cast<std::size_t>(n), -1);
    for (int k = 1; k < n; ++k) {
      const int q = peer_at(r, k, n);
      const auto u = static_cast<std::size_t>(q);
      last_read[u] = b.get(r, q, in(0, c), out(static_cast<std::int64_t>(q) * c, c), {e.waited[u]});
    }
    leave(b, r, e, last_read);
  }
  return b.finish();
}

// Broadcast: everyone fetches the root's Output; the root waits until all
// have ("done" doubles as the non-roots' only signal).
Plan peer_read_broadcast(const PlanArgs& args) {
  PlanBuilder b(args, "peer_read");
  const int n = args.nranks, root = args.root;
  const std::int64_t c = args.count;
  if (n == 1 || c == 0) return b.finish();
  non_roots_fetch(b, root, [&](int) { return out(0, c); }, out(0, c));
  return b.finish();
}

// Broadcast "split": the root is not idle while the others copy. Each
// non-root r fetches the head of the root's Output, and the root writes the
// tail of it into r's Output (Put), both at once: a copy between processes
// (process_vm_readv or writev) runs on the CPU of whoever makes it, so two
// ranks copying halves finish in about half the time of one rank copying the
// whole. The root's share of each peer is c/n elements, which evens the work
// out: the root writes (n-1)c/n in all, every non-root reads (n-1)c/n.
//   root -> r: "ready" (the root's Output holds the data), then "written";
//   r -> root: "entered" (r's Output may be written), then "done reading".
Plan split_broadcast(const PlanArgs& args) {
  PlanBuilder b(args, "split");
  const int n = args.nranks, root = args.root;
  const std::int64_t c = args.count;
  if (n == 1 || c == 0) return b.finish();
  const std::int64_t pushed = c / n, pulled = c - pushed;
  for (int k = 1; k < n; ++k) {
    const int r = peer_at(root, k, n);
    const int ready = b.signal(root, r);
    const int entered = b.wait(root, r);
    const int wrote = pushed ? b.put(root, r, out(pulled, pushed), out(pulled, pushed), {entered}) : entered;
    b.signal(root, r, {ready, wrote});
    b.wait(root, r, {entered});

    const int hello = b.signal(r, root);
    const int go = b.wait(r, root);
    const int got = b.get(r, root, out(0, pulled), out(0, pulled), {go});
    b.signal(r, root, {hello, got});
    b.wait(r, root, {go});
  }
  return b.finish();
}

// Offered automatically at 2 ranks with a CPU each, where it was measured
// (bench/RESULTS.md section 19: 64 MiB in place 6.4-8.1 ms against
// peer_read's 10.9-13.5). At 4 ranks on 2 CPUs it lost (16 MiB through
// torch 6.2 ms against 3.9): the ranks already keep every CPU busy, and the
// root's puts, one peer after another, become the critical path. The cost
// model prices the puts and gets as running at once, CPUs or not.
bool split_broadcast_offered(const PlanArgs& args) { return args.nranks == 2 && !args.topology.shared_cpus; }

// Reduce (reads_input): the root reduces every rank's Input into its Output
// and then releases each non-root; non-roots only announce themselves.
Plan peer_read_reduce(const PlanArgs& args) {
  PlanBuilder b(args, "peer_read");
  if (reads_input_trivial(b)) return b.finish();
  const int n = args.nranks, root = args.root;
  const std::int64_t c = args.count;
  int prev = -1;
  for (int k = 1; k < n; ++k) {
    const int q = peer_at(root, k, n);
    prev = b.get_reduce(root, q, in(0, c), k == 1 ? in(0, c) : out(0, c), out(0, c), {b.wait(root, q), prev});
    b.signal(root, q, {prev});  // done with q's Input
  }
  non_roots_enter_and_wait(b, root);
  return b.finish();
}

// Gather: the root fetches every non-root's Input into its block.
Plan peer_read_gather(const PlanArgs& args) {
  PlanBuilder b(args, "peer_read");
  const int n = args.nranks, root = args.root;
  const std::int64_t c = args.count;
  if (n == 1 || c == 0) return b.finish();
  for (int k = 1; k < n; ++k) {
    const int q = peer_at(root, k, n);
    const int got = b.get(root, q, in(0, c), out(static_cast<std::int64_t>(q) * c, c), {b.wait(root, q)});
    b.signal(root, q, {got});
  }
  non_roots_enter_and_wait(b, root);
  return b.finish();
}

// Scatter: every non-root fetches its block of the root's Input.
Plan peer_read_scatter(const PlanArgs& args) {
  PlanBuilder b(args, "peer_read");
  const int n = args.nranks, root = args.root;
  const std::int64_t c = args.count;
  if (n == 1 || c == 0) return b.finish();
  non_roots_fetch(b, root, [&](int r) { return in(static_cast<std::int64_t>(r) * c, c); }, out(0, c));
  return b.finish();
}

// Even splits only: with uneven ones a rank knows just its own row and column
// of the split matrix (collectives.cpp), not where its block sits in a
// peer's Input, and a one-sided read needs exactly that.
bool peer_read_alltoall_supports(const PlanArgs& args) { return one_sided_only(args) && args.splits.empty(); }

// AllToAll, even or uneven: rank r fetches block r of every peer's Input
// into block q of its Output. Every pair synchronises even where a block is
// empty: that keeps the plan the same shape for every split.
Plan peer_read_alltoall(const PlanArgs& args) {
  if (!splits_well_formed(args))
    fail(ErrorCode::InvalidArgument, "peer_read alltoall: splits must be {} rows of {} non-negative counts (or empty)",
         args.nranks, args.nranks);
  PlanBuilder b(args, "peer_read");
  const int n = args.nranks;
  if (n == 1) return b.finish();
  // in_off[i][j]: where rank i's block for j starts in its Input;
  // out_off[j][i]: where the block from i lands in j's Output.
  std::vector<std::vector<std::int64_t>> in_off(static_cast<std::size_t>(n)), out_off(in_off);
  for (int i = 0; i < n; ++i) {
    auto& io = in_off[static_cast<std::size_t>(i)];
    auto& oo = out_off[static_cast<std::size_t>(i)];
    io.assign(static_cast<std::size_t>(n) + 1, 0);
    oo.assign(static_cast<std::size_t>(n) + 1, 0);
    for (int j = 0; j < n; ++j) {
      io[static_cast<std::size_t>(j) + 1] = io[static_cast<std::size_t>(j)] + split(args, i, j);
      oo[static_cast<std::size_t>(j) + 1] = oo[static_cast<std::size_t>(j)] + split(args, j, i);
    }
  }
  for (int r = 0; r < n; ++r) {
    const Entry e = enter(b, r);
    std::vector<int> last_read(static_cast<std::size_t>(n), -1);
    for (int k = 1; k < n; ++k) {
      const int q = peer_at(r, k, n);
      const auto u = static_cast<std::size_t>(q);
      const std::int64_t len = split(args, q, r);
      if (len == 0) continue;
      last_read[u] = b.get(r, q, in(in_off[u][static_cast<std::size_t>(r)], len),
                           out(out_off[static_cast<std::size_t>(r)][u], len), {e.waited[u]});
    }
    leave(b, r, e, last_read);
  }
  return b.finish();
}

}  // namespace braid::plan
