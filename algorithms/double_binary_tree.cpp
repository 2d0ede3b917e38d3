// Double binary tree ("double_binary_tree", after NCCL's trees and Sanders,
// Speck and Traeff's two-tree algorithms): pipelined Broadcast, Reduce and
// AllReduce in O(log n) latency at nearly full link bandwidth.
//
// One pipelined binary tree already has log-depth fill, but its leaves (half
// the ranks) only ever receive and its interior ranks send twice what they
// receive, so links run at half speed. Two trees fix that: the data is split
// in halves, half h flows through tree h, and the trees are built so that
// the leaves of one are the interior ranks of the other. Every rank then
// sends and receives about the whole message once: bandwidth like a chain,
// fill like a tree.
//
// Layout. The root sits above both trees; the other m = n-1 ranks are nodes
// 1..m (node i is rank root+i mod n). Each tree is an in-order binary tree
// over positions 1..m: position p with lowest set bit b has children p-b/2
// and p+b/2 (or the nearest p+b/4, p+b/8, ... that is <= m), the top is the
// largest power of two <= m, and the leaves are the odd positions. Tree A
// puts node i at position i; tree B mirrors it (position m+1-i) when m is
// even and shifts it by one (position i mod m + 1) when m is odd, so odd
// (leaf) positions of A become even (interior) ones in B.
//
// Pipelining: each half is cut into chunks of about kChunkBytes and every
// chunk moves down (or up) its tree on its own: a rank forwards chunk j
// while chunk j+1 is still arriving. AllReduce runs each chunk up its tree
// to the root and straight back down, so the up and down streams overlap.
#include <algorithm>
#include <array>
#include <cstdint>
#include <utility>
#include <vector>

#include "algorithms/builder.hpp"
#include "algorithms/generators.hpp"

namespace braid::plan {
namespace {

// Chunks of ~512 KiB, as for the ring: ~50 us at 10 GB/s, far above any
// transport's per-message cost (1-20 us), while the fill, depth x one chunk,
// stays a small part of a large call.
constexpr std::int64_t kChunkBytes = 512 * 1024;
// Bounds the plan's size for multi-GB calls; past this chunks grow, and the
// fill stays below depth/256 of the transfer.
constexpr std::int64_t kMaxChunksPerHalf = 256;

std::int64_t num_chunks(const PlanArgs& a, std::int64_t count) {
  const std::int64_t elem = std::max<std::int64_t>(1, static_cast<std::int64_t>(a.elem_size));
  const std::int64_t per_chunk = std::max<std::int64_t>(1, kChunkBytes / elem);
  return std::clamp<std::int64_t>((count + per_chunk - 1) / per_chunk, 1, kMaxChunksPerHalf);
}

// One tree over group ranks; parent -1 for the root rank (above both trees).
struct Tree {
  std::vector<int> parent;                 // by group rank
  std::vector<std::vector<int>> children;  // by group rank, at most two
};

// The in-order tree over positions 1..m, node_at(p) being the node at
// position p, mapped to group ranks.
template <class NodeAt>
Tree in_order_tree(int n, int root, NodeAt node_at) {
  const int m = n - 1;
  Tree t{std::vector<int>(static_cast<std::size_t>(n), -1),
         std::vector<std::vector<int>>(static_cast<std::size_t>(n))};
  auto rank_at = [&](int p) { return (root + node_at(p)) % n; };
  auto link = [&](int parent_rank, int child_rank) {
    t.parent[static_cast<std::size_t>(child_rank)] = parent_rank;
    t.children[static_cast<std::size_t>(parent_rank)].push_back(child_rank);
  };
  if (m == 0) return t;
  int top = 1;
  while (top * 2 <= m) top *= 2;
  link(root, rank_at(top));
  for (int p = 2; p <= m; p += 2) {  // odd positions are leaves
    const int half = (p & -p) / 2;
    link(rank_at(p), rank_at(p - half));
    int d = half;
    while (d > 0 && p + d > m) d /= 2;
    if (d > 0) link(rank_at(p), rank_at(p + d));
  }
  return t;
}

// Trees A and B for a given root, and which half of the data each carries.
struct DoubleTree {
  Tree tree[2];
  std::int64_t chunks[2];
  Block half[2];
};

DoubleTree make_trees(const PlanArgs& args, int root) {
  const int n = args.nranks, m = n - 1;
  DoubleTree d{{in_order_tree(n, root, [](int p) { return p; }),
                m % 2 == 0 ? in_order_tree(n, root, [m](int p) { return m + 1 - p; })
                           : in_order_tree(n, root, [m](int p) { return p == 1 ? m : p - 1; })},
               {0, 0},
               {block(args.count, 2, 0), block(args.count, 2, 1)}};
  for (int h = 0; h < 2; ++h) d.chunks[h] = num_chunks(args, d.half[h].count);
  return d;
}

// Chunk j of half h of Output.
Span piece(const DoubleTree& d, int h, std::int64_t j) {
  const Block c = block(d.half[h].count, d.chunks[h], j);
  return out(d.half[h].offset + c.offset, c.count);
}

// Visits every (half, chunk) with a non-empty piece, chunk-major so both
// halves advance together. Every rank visits them in the same order, which
// keeps the builder's slot numbering paired (a rank has one parent per tree,
// so a piece carries at most one message per ordered pair and direction).
template <class Fn>
void for_each_piece(const DoubleTree& d, Fn fn) {
  const std::int64_t most = std::max(d.chunks[0], d.chunks[1]);
  for (std::int64_t j = 0; j < most; ++j)
    for (int h = 0; h < 2; ++h)
      if (j < d.chunks[h] && piece(d, h, j).count > 0) fn(h, piece(d, h, j));
}

const std::vector<int>& kids(const DoubleTree& d, int h, int r) {
  return d.tree[h].children[static_cast<std::size_t>(r)];
}
int parent(const DoubleTree& d, int h, int r) { return d.tree[h].parent[static_cast<std::size_t>(r)]; }

// Steps of rank r for one piece going down tree h: receive it from the
// parent (unless r is the root, or `after` already produced it), then pass
// it to the children.
void down(PlanBuilder& b, const DoubleTree& d, int h, int r, Span s, int after) {
  const int got = parent(d, h, r) >= 0 ? b.recv(r, parent(d, h, r), s, {after}) : after;
  for (int kid : kids(d, h, r)) b.send(r, kid, s, {got});
}

// Steps of rank r for one piece going up tree h: fold in the children's
// partials one after the other (they write the same memory), then send the
// result to the parent. Returns the last step. The rank's contribution is
// in Input (reads_input): the first fold combines it with what arrives, and
// a leaf sends it from there.
int up(PlanBuilder& b, const DoubleTree& d, int h, int r, Span s) {
  int last = -1;
  for (int kid : kids(d, h, r)) last = fold_in(b, r, kid, s, last);
  if (parent(d, h, r) >= 0) last = b.send(r, parent(d, h, r), folded(s, last), {last});
  return last;
}

}  // namespace

std::array<std::vector<int>, 2> double_binary_tree_parents(const PlanArgs& args, int root) {
  const DoubleTree d = make_trees(args, root);
  return {d.tree[0].parent, d.tree[1].parent};
}

Plan double_binary_tree_broadcast(const PlanArgs& args) {
  PlanBuilder b(args, "double_binary_tree");
  const DoubleTree d = make_trees(args, args.root);
  for (int r : b.ranks())
    for_each_piece(d, [&](int h, Span s) { down(b, d, h, r, s, -1); });
  b.root_reads_input();
  return b.finish();
}

// Non-roots reduce into their private copy of Output.
Plan double_binary_tree_reduce(const PlanArgs& args) {
  PlanBuilder b(args, "double_binary_tree");
  if (reads_input_trivial(b)) return b.finish();
  const DoubleTree d = make_trees(args, args.root);
  for (int r : b.ranks())
    for_each_piece(d, [&](int h, Span s) { up(b, d, h, r, s); });
  return b.finish();
}

// Each piece goes up to rank 0 and back down. The result overwrites the
// partial a rank sent up, so the receive from the parent waits for that send.
Plan double_binary_tree_allreduce(const PlanArgs& args) {
  PlanBuilder b(args, "double_binary_tree");
  if (reads_input_trivial(b)) return b.finish();
  const DoubleTree d = make_trees(args, 0);
  for (int r : b.ranks())
    for_each_piece(d, [&](int h, Span s) { down(b, d, h, r, s, up(b, d, h, r, s)); });
  return b.finish();
}

}  // namespace braid::plan
