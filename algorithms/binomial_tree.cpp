// Binomial tree algorithms ("tree"): ceil(log2 n) rounds, each message goes
// whole. The latency-optimal shape for small messages: Broadcast and Reduce
// finish in ceil(log2 n) message times, where a chain needs n-1.
//
// Ranks are renumbered relative to the root, v = (r - root) mod n, so the
// tree rooted at v = 0 serves every root. In that numbering v's parent is
// v - lowbit(v), its children are v + m for powers of two m < lowbit(v)
// (every power of two below n for the root), and its subtree is the range
// [v, v + lowbit(v)) clipped to n: contiguous, which is what lets Gather and
// Scatter move a whole subtree's blocks as one message.
#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "algorithms/builder.hpp"
#include "algorithms/generators.hpp"

namespace braid::plan {
namespace {

struct Tree {
  int n, root;
  int rank(int v) const { return (v + root) % n; }
  int rel(int r) const { return (r - root + n) % n; }
  // Relative-rank arithmetic.
  int span(int v) const {  // power of two bounding v's subtree
    if (v != 0) return v & -v;
    int p = 1;
    while (p < n) p <<= 1;
    return p;
  }
  int parent(int v) const { return v - (v & -v); }
  int subtree_size(int v) const { return std::min(span(v), n - v); }
  // Children nearest first: v+1 (a leaf), v+2, v+4, ... (the largest subtree).
  std::vector<int> children(int v) const {
    std::vector<int> c;
    for (int m = 1; m < span(v) && v + m < n; m <<= 1) c.push_back(v + m);
    return c;
  }
};

int send_if(PlanBuilder& b, int r, int peer, Span s, Deps deps = {}) {
  return s.count > 0 ? b.send(r, peer, s, std::move(deps)) : -1;
}

// The blocks of relative ranks [first, first+len) lie in absolute rank order
// in a Gather's or Scatter's root buffer, so a subtree that wraps past rank
// n-1 is two ranges there. Every message for a subtree is sent as these
// (one or two) pieces so that both ends agree; each piece is a range of
// relative ranks.
std::vector<std::pair<int, int>> pieces(const Tree& t, int first, int len) {
  const int wrap = t.n - t.root;  // relative rank of absolute rank 0
  if (first < wrap && first + len > wrap) return {{first, wrap - first}, {wrap, first + len - wrap}};
  return {{first, len}};
}

}  // namespace

// Broadcast: receive from the parent, then send to the children, the largest
// subtree first because it has the most rounds still to go.
Plan tree_broadcast(const PlanArgs& args) {
  PlanBuilder b(args, "tree");
  const Tree t{args.nranks, args.root};
  const Span all = out(0, args.count);
  for (int r : b.ranks()) {
    const int v = t.rel(r);
    const int got = v > 0 && all.count > 0 ? b.recv(r, t.rank(t.parent(v)), all) : -1;
    const auto kids = t.children(v);
    for (auto it = kids.rbegin(); it != kids.rend(); ++it) send_if(b, r, t.rank(*it), all, {got});
  }
  b.root_reads_input();
  return b.finish();
}

// Folds in the partial results of `kids` (group ranks), nearest (earliest
// ready) first; the folds write the same memory, so they run one after
// another, and the first combines the rank's own contribution, in Input
// (fold_in), so a leaf sends straight from Input. Returns the last fold and
// the span that then holds the subtree's result.
std::pair<int, Span> fold_kids(PlanBuilder& b, int r, const std::vector<int>& kids, std::int64_t c) {
  int last = -1;
  for (int kid : kids) last = fold_in(b, r, kid, out(0, c), last);
  return {last, folded(out(0, c), last)};
}

// Reduce: fold in the children's partial results, then pass the subtree's
// result to the parent.
Plan tree_reduce(const PlanArgs& args) {
  PlanBuilder b(args, "tree");
  if (reads_input_trivial(b)) return b.finish();
  const Tree t{args.nranks, args.root};
  for (int r : b.ranks()) {
    const int v = t.rel(r);
    std::vector<int> kids;
    for (int kid : t.children(v)) kids.push_back(t.rank(kid));
    const auto [last, sum] = fold_kids(b, r, kids, args.count);
    if (v > 0) b.send(r, t.rank(t.parent(v)), sum, {last});
  }
  return b.finish();
}

// AllReduce: the Reduce above into rank 0, then the Broadcast from rank 0.
// A rank may take the result from its parent only once it has sent its
// partial up, since both use Output.
Plan tree_allreduce(const PlanArgs& args) {
  PlanBuilder b(args, "tree");
  if (reads_input_trivial(b)) return b.finish();
  const Tree t{args.nranks, 0};
  const Span all = out(0, args.count);
  for (int r : b.ranks()) {
    auto [last, sum] = fold_kids(b, r, t.children(r), args.count);
    if (r > 0) {
      const int up = b.send(r, t.parent(r), sum, {last});
      last = b.recv(r, t.parent(r), all, {up});
    }
    const auto kids = t.children(r);
    for (auto it = kids.rbegin(); it != kids.rend(); ++it) b.send(r, *it, all, {last});
  }
  return b.finish();
}

// Gather: every rank collects its subtree's blocks, in relative rank order,
// in Scratch (its own block first), and sends them to its parent in one
// message (two where the range wraps in the root's Output). The root
// receives straight into Output; a leaf sends straight from Input.
Plan tree_gather(const PlanArgs& args) {
  PlanBuilder b(args, "tree");
  const Tree t{args.nranks, args.root};
  const std::int64_t c = args.count;
  if (c == 0) return b.finish();
  for (int r : b.ranks()) {
    const int v = t.rel(r);
    const int size = t.subtree_size(v);
    // Where the blocks of relative ranks [first, first+len) go on this rank.
    auto place = [&](int first, int len) {
      return v == 0 ? out(static_cast<std::int64_t>(t.rank(first)) * c, len * c)
                    : scratch(static_cast<std::int64_t>(first - v) * c, len * c);
    };
    Deps all_in;
    if (v > 0 && size > 1) {
      b.need_scratch(r, size * c);
      all_in.push_back(b.copy(r, in(0, c), scratch(0, c)));
    }
    for (int kid : t.children(v))
      for (auto [first, len] : pieces(t, kid, t.subtree_size(kid)))
        all_in.push_back(b.recv(r, t.rank(kid), place(first, len)));
    if (v == 0) continue;
    const int up = t.rank(t.parent(v));
    if (size == 1) {
      b.send(r, up, in(0, c));
    } else {
      for (auto [first, len] : pieces(t, v, size)) b.send(r, up, place(first, len), all_in);
    }
  }
  return b.finish();
}

// Scatter: the reverse of Gather. The root sends each child its subtree's
// blocks from Input; an interior rank receives its subtree's blocks into
// Scratch, keeps its own and forwards the rest, the largest subtree first.
Plan tree_scatter(const PlanArgs& args) {
  PlanBuilder b(args, "tree");
  const Tree t{args.nranks, args.root};
  const std::int64_t c = args.count;
  if (c == 0) return b.finish();
  for (int r : b.ranks()) {
    const int v = t.rel(r);
    const int size = t.subtree_size(v);
    auto place = [&](int first, int len) {
      return v == 0 ? in(static_cast<std::int64_t>(t.rank(first)) * c, len * c)
                    : scratch(static_cast<std::int64_t>(first - v) * c, len * c);
    };
    Deps all_in;
    if (v > 0) {
      const int up = t.rank(t.parent(v));
      if (size == 1) {
        b.recv(r, up, out(0, c));
        continue;
      }
      b.need_scratch(r, size * c);
      for (auto [first, len] : pieces(t, v, size)) all_in.push_back(b.recv(r, up, place(first, len)));
      b.copy(r, scratch(0, c), out(0, c), all_in);
    }
    const auto kids = t.children(v);
    for (auto it = kids.rbegin(); it != kids.rend(); ++it)
      for (auto [first, len] : pieces(t, *it, t.subtree_size(*it)))
        b.send(r, t.rank(*it), place(first, len), all_in);
  }
  return b.finish();
}

}  // namespace braid::plan
