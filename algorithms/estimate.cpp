// The formulas behind estimate.hpp, one per message algorithm, each written
// from its plan's rounds (the algorithm's own file says what a round does).
// Notation: S the call's bytes, m a block's, n ranks, H hosts, k ranks on the
// fullest host; net.round(b, partner) a round of b-byte messages to each
// rank's partner; gamma and copy per byte from the local link.
#include "algorithms/estimate.hpp"

#include <algorithm>
#include <cmath>

#include "algorithms/builder.hpp"  // pow2_floor
#include "algorithms/generators.hpp"
#include "algorithms/registry.hpp"

namespace braid::plan {

Net::Net(const PlanArgs& a, const LinkCosts& links)
    : n_(a.nranks), elem_(static_cast<double>(a.elem_size)), links_(links), hs_(hosts_of(a)), largest_(hs_.largest()) {}

double pieces(double bytes, double piece, double most) { return std::clamp(std::ceil(bytes / piece), 1.0, most); }

namespace {

constexpr double kChunk = 512.0 * 1024;  // ring.cpp and double_binary_tree.cpp's kChunkBytes
constexpr double kSlice = 128.0 * 1024;  // hierarchical.cpp's kSliceBytes

int ring_next(int r, int n) { return (r + 1) % n; }

// The executor's copy of a rank's contribution into Output before a message
// plan starts (cost_model.cpp, contract_copy).
double contract(const Net& net, const PlanArgs& a) {
  const bool copies = a.coll == Collective::AllReduce || a.coll == Collective::Reduce || a.coll == Collective::AllGather;
  return copies ? net.copy(net.bytes(a.count)) : 0.0;
}

// Fold in, doubling rounds among the largest power of two p, fold out
// (recursive_doubling.cpp, halving_doubling.cpp): the cost of the rounds
// with bytes(d) per message at distance d, reducing where `reduce`.
// `ranges`: messages per round where folded ranks carry a second range of
// blocks (the block-wise all-gather and reduce-scatter send both).
template <class Bytes>
double doubling(const Net& net, double fold_in, double fold_out, bool reduce, Bytes bytes_at, int ranges = 1) {
  const int n = net.ranks(), p = pow2_floor(n), e = n - p;
  const int per_round = e > 0 ? ranges : 1;
  double t = 0;
  if (e > 0) t += net.round(fold_in, [&](int r) { return r >= p ? r - p : -1; }) + (reduce ? net.gamma(fold_in) : 0);
  for (int d = 1; d < p; d *= 2) {
    const double b = bytes_at(d);
    t += per_round * net.round(b / per_round, [&](int r) { return r < p ? r ^ d : -1; }) + (reduce ? net.gamma(b) : 0);
  }
  if (e > 0) t += net.round(fold_out, [&](int r) { return r < e ? r + p : -1; });
  return t;
}

// A round of messages to partner (r + s) % n for every s in 1..n-1: every
// pair once (all-to-all). More than 64 shifts are sampled evenly.
double every_shift(const Net& net, double bytes) {
  const int n = net.ranks();
  if (n < 2) return 0;
  const int samples = std::min(n - 1, 64);
  double t = 0;
  for (int i = 0; i < samples; ++i) {
    const int s = 1 + static_cast<int>(static_cast<std::int64_t>(i) * (n - 1) / samples);
    t += net.round(bytes, [&](int r) { return (r + s) % n; });
  }
  return t * (n - 1) / samples;
}

// A binomial tree from `root`: its sends to relative ranks 1, 2, 4, ...
// one after another, each message `bytes(d)` long, plus `per_level` each.
template <class Bytes>
double binomial(const Net& net, int root, double per_level, Bytes bytes_at) {
  const int n = net.ranks();
  double t = 0;
  for (int d = 1; d < n; d *= 2) t += net.message(root, (root + d) % n, bytes_at(d)) + per_level;
  return t;
}

}  // namespace

double estimate_seconds(const Algorithm& alg, const PlanArgs& args, const LinkCosts& links) {
  if (!alg.estimate) return -1;
  // A call's own cost, as predict_seconds adds it (cost_model.hpp); one
  // rank, or no data: the plans have no messages (a barrier always does).
  if (args.nranks <= 1 || (args.coll != Collective::Barrier && args.count == 0)) return links.local.call_s;
  return alg.estimate(args, links) + links.local.call_s;
}

// ---- ring.cpp: 2(n-1) steps of a block S/n (in up to 16 chunks each) ----
namespace {
// One piece going once round the ring: every hop alone on its link.
double loop(const Net& net, double bytes) {
  double t = 0;
  for (int r = 0; r < net.ranks(); ++r) t += net.message(r, ring_next(r, net.ranks()), bytes);
  return t;
}
// A chain from `first` over n-1 hops, `bytes` cut into c pieces: the first
// piece's way down the chain, then one piece time per further piece.
double chain(const Net& net, int first, double bytes, double c, double per_piece) {
  const int n = net.ranks();
  double fill = 0;
  for (int i = 0; i + 1 < n; ++i) fill += net.message((first + i) % n, (first + i + 1) % n, bytes / c) + per_piece;
  return fill + (c - 1) * (net.round(bytes / c, [&](int r) { return ring_next(r, n); }) + per_piece);
}
}  // namespace

// With fewer elements than ranks most blocks are empty and left out: the
// few that remain go round twice without meeting each other.
double ring_allreduce_estimate(const PlanArgs& a, const LinkCosts& l) {
  const Net net(a, l);
  const int n = net.ranks();
  const double m = net.bytes(a.count) / n, c = pieces(m, kChunk, 16);
  const double step = c * net.round(m / c, [&](int r) { return ring_next(r, n); });
  const double full = std::min(1.0, static_cast<double>(a.count) / n);  // blocks that are not empty
  const double lone = 2 * loop(net, net.bytes(1)) + n * net.gamma(net.bytes(1));
  // It reads its Input itself (ring.cpp): no contract copy.
  return std::max(full * (2 * (n - 1) * step + (n - 1) * net.gamma(m)), full < 1 ? lone : 0.0);
}
double ring_reducescatter_estimate(const PlanArgs& a, const LinkCosts& l) {
  const Net net(a, l);
  const int n = net.ranks();
  const double m = net.bytes(a.count), c = pieces(m, kChunk, 16);
  // Each chunk is reduced as the next one arrives: a step exposes the
  // reduction of its last chunk only.
  return (n - 1) * (c * net.round(m / c, [&](int r) { return ring_next(r, n); }) + net.gamma(m / c));
}
double ring_allgather_estimate(const PlanArgs& a, const LinkCosts& l) {
  const Net net(a, l);
  const int n = net.ranks();
  const double m = net.bytes(a.count), c = pieces(m, kChunk, 16);
  return contract(net, a) + (n - 1) * c * net.round(m / c, [&](int r) { return ring_next(r, n); });
}
double ring_broadcast_estimate(const PlanArgs& a, const LinkCosts& l) {
  const Net net(a, l);
  const double s = net.bytes(a.count);
  return chain(net, a.root, s, pieces(s, kChunk, 512), 0);
}
double ring_reduce_estimate(const PlanArgs& a, const LinkCosts& l) {
  const Net net(a, l);
  const double s = net.bytes(a.count), c = pieces(s, kChunk, 512);
  return chain(net, (a.root + 1) % net.ranks(), s, c, net.gamma(s / c));  // reads Input: no copy
}

// ---- recursive_doubling.cpp, halving_doubling.cpp ----
double recursive_doubling_allreduce_estimate(const PlanArgs& a, const LinkCosts& l) {
  const Net net(a, l);
  const double s = net.bytes(a.count);
  return doubling(net, s, s, true, [&](int) { return s; });  // it reads its Input itself: no contract copy
}
double recursive_doubling_allgather_estimate(const PlanArgs& a, const LinkCosts& l) {
  const Net net(a, l);
  const int n = net.ranks(), p = pow2_floor(n);
  const double m = net.bytes(a.count), carried = static_cast<double>(n) / p;  // blocks per rank of the p
  return contract(net, a) + doubling(net, m, (n - 1) * m, false, [&](int d) { return d * carried * m; }, 2);
}
double halving_doubling_allreduce_estimate(const PlanArgs& a, const LinkCosts& l) {
  const Net net(a, l);
  const int p = pow2_floor(net.ranks());
  const double s = net.bytes(a.count);
  // Halving (reducing) then doubling: at distance d each moves S*d/p.
  const double halves = doubling(net, s, 0, true, [&](int d) { return s * d / p; });
  const double doubles = doubling(net, 0, s, false, [&](int d) { return s * d / p; });
  return halves + doubles;  // it reads its Input itself: no contract copy
}
double halving_doubling_reducescatter_estimate(const PlanArgs& a, const LinkCosts& l) {
  const Net net(a, l);
  const int n = net.ranks(), p = pow2_floor(n);
  const double m = net.bytes(a.count), all = n * m;
  return doubling(net, all, m, true, [&](int d) { return all * d / p; }, 2) + net.copy(m);
}

// ---- bruck.cpp: rounds at distance 1, 2, 4, ... ----
double bruck_allgather_estimate(const PlanArgs& a, const LinkCosts& l) {
  const Net net(a, l);
  const int n = net.ranks();
  const double m = net.bytes(a.count);
  double t = contract(net, a);
  for (int d = 1; d < n; d *= 2)
    t += net.round(std::min(d, n - d) * m, [&](int r) { return (r - d + n) % n; });
  return t + net.copy(n * m);  // the final rotation into place
}
double bruck_alltoall_estimate(const PlanArgs& a, const LinkCosts& l) {
  const Net net(a, l);
  const int n = net.ranks();
  const double m = net.bytes(a.count);
  double t = net.copy(n * m);  // the rotation into Scratch
  for (int d = 1; d < n; d *= 2) {
    double moved = 0;
    for (int lo = d; lo < n; lo += 2 * d) moved += std::min(lo + d, n) - lo;
    t += net.round(moved * m, [&](int r) { return (r + d) % n; }) + 2 * net.copy(moved * m);  // pack, unpack
  }
  return t;
}

// ---- pairwise.cpp, direct.cpp ----
double pairwise_alltoall_estimate(const PlanArgs& a, const LinkCosts& l) {
  const Net net(a, l);
  return every_shift(net, net.bytes(a.count));
}
// Every message posted at once: the same bytes through the same ports as
// the pairwise rounds, without their lockstep.
double direct_alltoall_estimate(const PlanArgs& a, const LinkCosts& l) { return pairwise_alltoall_estimate(a, l); }
// The root's port carries every block, one after another.
double direct_gather_estimate(const PlanArgs& a, const LinkCosts& l) {
  const Net net(a, l);
  double t = 0;
  for (int r = 0; r < net.ranks(); ++r)
    if (r != a.root) t += net.message(r, a.root, net.bytes(a.count));
  return t;
}
double direct_scatter_estimate(const PlanArgs& a, const LinkCosts& l) { return direct_gather_estimate(a, l); }

// ---- binomial_tree.cpp ----
double tree_broadcast_estimate(const PlanArgs& a, const LinkCosts& l) {
  const Net net(a, l);
  const double s = net.bytes(a.count);
  return binomial(net, a.root, 0, [&](int) { return s; });
}
double tree_reduce_estimate(const PlanArgs& a, const LinkCosts& l) {
  const Net net(a, l);
  const double s = net.bytes(a.count);
  return binomial(net, a.root, net.gamma(s), [&](int) { return s; });  // reads Input: no copy
}
double tree_allreduce_estimate(const PlanArgs& a, const LinkCosts& l) {
  const Net net(a, l);
  const double s = net.bytes(a.count);
  return binomial(net, 0, net.gamma(s), [&](int) { return s; }) +  // reads Input: no copy
         binomial(net, 0, 0, [&](int) { return s; });
}
// A subtree of d ranks moves d blocks in one message.
double tree_gather_estimate(const PlanArgs& a, const LinkCosts& l) {
  const Net net(a, l);
  const double m = net.bytes(a.count);
  return binomial(net, a.root, 0, [&](int d) { return d * m; });
}
double tree_scatter_estimate(const PlanArgs& a, const LinkCosts& l) { return tree_gather_estimate(a, l); }

// ---- double_binary_tree.cpp: two pipelined trees of depth D, each half in C chunks ----
namespace {
// passes: 1 down (broadcast) or up (reduce), 2 up and down (all-reduce).
// Per chunk of each half a rank sends about one message per pass in each
// tree, so its port carries 2-3C messages a pass; the edges that cross hosts
// carry every chunk over their hosts' links, and those links are shared by
// all the crossing edges of both trees.
double two_trees(const PlanArgs& a, const LinkCosts& l, int root, int passes, bool reduce) {
  const Net net(a, l);
  const int n = net.ranks();
  const double half = net.bytes(a.count) / 2, c = pieces(half, kChunk, 256), b = half / c;
  // The fill: down each level a parent sends to its two children in turn.
  // A level's edges span about 2^level ranks: across hosts once that
  // passes a host's ranks (laid out in blocks).
  double fill = 0;
  for (int span = 1; span < n; span *= 2)
    fill += 2 * ((span >= net.per_host() ? net.across(b) : net.inside(b)) + (reduce ? net.gamma(b) : 0));
  // Crossing edges per host, out and in (a pass down and a pass up each use
  // every edge once, in opposite directions).
  std::vector<double> out(static_cast<std::size_t>(net.hosts()), 0), in(out);
  const auto& hs = net.layout();
  for (const auto& parent : double_binary_tree_parents(a, root))
    for (int r = 0; r < n; ++r) {
      const int p = parent[static_cast<std::size_t>(r)];
      if (p < 0 || net.same_host(r, p)) continue;
      const auto hp = static_cast<std::size_t>(hs.host[static_cast<std::size_t>(p)]);
      const auto hr = static_cast<std::size_t>(hs.host[static_cast<std::size_t>(r)]);
      out[hp] += 1, in[hr] += 1;            // down: parent to child
      if (passes == 2) out[hr] += 1, in[hp] += 1;  // and up: child to parent
    }
  double shared = 0;
  for (std::size_t h = 0; h < out.size(); ++h) shared = std::max({shared, out[h], in[h]});
  const double msg = net.across(b) + (reduce ? net.gamma(b) : 0);
  // About 3 sends a chunk pair: the ranks interior in one tree send two,
  // and the root and a few ranks feed both trees (fitted to the simulator
  // at 13 and 64 ranks).
  const double port = passes * 3 * c * msg;
  const double link = shared * c * l.remote.beta_s_per_byte * b;
  return passes * fill + std::max(port, link);  // the reductions read Input: no copy
}
}  // namespace
double double_binary_tree_broadcast_estimate(const PlanArgs& a, const LinkCosts& l) { return two_trees(a, l, a.root, 1, false); }
double double_binary_tree_reduce_estimate(const PlanArgs& a, const LinkCosts& l) { return two_trees(a, l, a.root, 1, true); }
double double_binary_tree_allreduce_estimate(const PlanArgs& a, const LinkCosts& l) { return two_trees(a, l, 0, 2, true); }

// ---- dissemination.cpp ----
double dissemination_barrier_estimate(const PlanArgs& a, const LinkCosts& l) {
  const Net net(a, l);
  const int n = net.ranks();
  double t = 0;
  for (int d = 1; d < n; d *= 2) t += net.round(0, [&](int r) { return (r + d) % n; });
  return t;
}

// ---- hierarchical.cpp: inside each host, across hosts, inside again ----
// A pipeline of `slices` slices through stages: the slowest stage once per
// slice, the others once.
namespace {
double pipeline(double slices, std::initializer_list<double> stages) {
  double sum = 0, most = 0;
  for (double s : stages) {
    sum += s;
    most = std::max(most, s);
  }
  return sum + (slices - 1) * most;
}
// A message between hosts while all k ranks of each host send one at once.
double across_shared(const Net& net, double bytes) { return net.across(bytes * net.per_host()); }
// The two-level all-reduce reads its Input: only the rank alone on its host,
// which receives nothing inside, copies its contribution into Output.
double lone_copy(const Net& net, const PlanArgs& a) { return net.per_host() == 1 ? contract(net, a) : 0.0; }
}  // namespace

double hierarchical_allreduce_estimate(const PlanArgs& a, const LinkCosts& l) {
  const Net net(a, l);
  const int k = net.per_host(), h = net.hosts();
  const double s = net.bytes(a.count), slices = pieces(s, kSlice * k, 16), b = s / slices / k;
  const double in_rs = (k - 1) * (net.inside(b) + net.gamma(b));
  const double ring = h > 1 ? 2 * (h - 1) * across_shared(net, b / h) + (h - 1) * net.gamma(b / h) : 0;
  const double in_ag = (k - 1) * net.inside(b);
  return lone_copy(net, a) + pipeline(slices, {in_rs, ring, in_ag});
}
// The crossing as a halving-doubling among the H owners of a block, all k
// owners of a host crossing at once; hosts above the largest power of two
// fold in and out with the whole block.
double hierarchical_hd_allreduce_estimate(const PlanArgs& a, const LinkCosts& l) {
  const Net net(a, l);
  const int k = net.per_host(), h = net.hosts(), p = pow2_floor(h);
  const double s = net.bytes(a.count), slices = pieces(s, kSlice * k, 16), b = s / slices / k;
  const double in_rs = (k - 1) * (net.inside(b) + net.gamma(b));
  double hd = h > p ? 2 * across_shared(net, b) + net.gamma(b) : 0;
  for (int d = p / 2; d >= 1; d /= 2) hd += 2 * across_shared(net, b * d / p) + net.gamma(b * d / p);
  const double in_ag = (k - 1) * net.inside(b);
  return lone_copy(net, a) + pipeline(slices, {in_rs, hd, in_ag});
}
double hierarchical_reducescatter_estimate(const PlanArgs& a, const LinkCosts& l) {
  const Net net(a, l);
  const int n = net.ranks(), k = net.per_host(), h = net.hosts();
  const double m = net.bytes(a.count), slices = pieces(m, kSlice, 16), b = m / slices;
  // Each rank carries about n/k blocks, each summed from its k-1 host-mates;
  // then d takes the H-1 other hosts' partial sums of its block.
  const double in = (k - 1) * (static_cast<double>(n) / k) * (net.inside(b) + net.gamma(b));
  const double across = (h - 1) * (across_shared(net, b) + net.gamma(b));
  return pipeline(slices, {in, across});
}
double hierarchical_allgather_estimate(const PlanArgs& a, const LinkCosts& l) {
  const Net net(a, l);
  const int k = net.per_host(), h = net.hosts();
  const double m = net.bytes(a.count), slices = pieces(m, kSlice, 16), b = m / slices;
  const double across = (h - 1) * across_shared(net, b);
  const double in = h * (k - 1) * net.inside(b);  // every block of a host's share to its k-1 mates
  return contract(net, a) + pipeline(slices, {across, in});
}
// The root scatters k pieces on its host, each piece hops host to host (all
// k at once over each link), and every host shares its pieces inside.
double hierarchical_broadcast_estimate(const PlanArgs& a, const LinkCosts& l) {
  const Net net(a, l);
  const int k = net.per_host(), h = net.hosts();
  const double s = net.bytes(a.count), slices = pieces(s, kSlice * k, 16), b = s / slices / k;
  const double hop = across_shared(net, b), in = (k - 1) * net.inside(b);
  return in + (h - 1) * hop + slices * std::max(hop, in);
}
double hierarchical_reduce_estimate(const PlanArgs& a, const LinkCosts& l) {
  const Net net(a, l);
  const int k = net.per_host(), h = net.hosts();
  const double s = net.bytes(a.count), slices = pieces(s, kSlice * k, 16), b = s / slices / k;
  const double hop = across_shared(net, b) + net.gamma(b), in = (k - 1) * (net.inside(b) + net.gamma(b));
  return in + (h - 1) * hop + slices * std::max(hop, in);  // reads Input: no copy
}
// The tree variants: ceil(log2 H) crossings deep, and the root's host sends
// each piece across that many times (the busiest link, once per slice).
namespace {
double host_tree(const PlanArgs& a, const LinkCosts& l, bool reduce) {
  const Net net(a, l);
  const int k = net.per_host(), h = net.hosts();
  const double s = net.bytes(a.count), slices = pieces(s, kSlice * k, 16), b = s / slices / k;
  double depth = 0;
  for (int m = 1; m < h; m *= 2) ++depth;
  const double g = reduce ? net.gamma(b) : 0;
  const double hop = across_shared(net, b) + g, in = (k - 1) * (net.inside(b) + g);
  return 2 * in + depth * hop + (slices - 1) * std::max(depth * hop, in);  // a reduce reads Input: no copy
}
}  // namespace
double hierarchical_tree_broadcast_estimate(const PlanArgs& a, const LinkCosts& l) { return host_tree(a, l, false); }
double hierarchical_tree_reduce_estimate(const PlanArgs& a, const LinkCosts& l) { return host_tree(a, l, true); }

// Each host reports to its leader, the leaders disseminate, the leaders release.
double hierarchical_barrier_estimate(const PlanArgs& a, const LinkCosts& l) {
  const Net net(a, l);
  double t = 2 * (net.per_host() - 1) * net.inside(0);
  for (int d = 1; d < net.hosts(); d *= 2) t += net.across(0);
  return t;
}

}  // namespace braid::plan
