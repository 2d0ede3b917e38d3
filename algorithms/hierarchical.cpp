// Hierarchical (two-level) algorithms: work inside each host first, over
// the host's fast links (shared memory), and cross hosts with the least
// traffic, split over every rank of the host, so that all of them carry a
// share of the inter-host bytes at once.
//
// AllReduce of S bytes on H hosts (the classic two-level reduce-scatter /
// all-reduce / all-gather):
//   1. inside each host, reduce-scatter: the count is cut into K blocks (K =
//      the most ranks any host has); block k is reduced into its owner on
//      each host, local rank k mod (ranks of the host);
//   2. across hosts, the owners of block k (one per host) all-reduce it with
//      a ring: each host sends 2(H-1)/H of S in all, S for two hosts, where
//      a flat ring over every rank sends 2S per host for two hosts;
//   3. inside each host, each owner hands its final block to the others.
// ReduceScatter, AllGather, Broadcast and Reduce follow the same shape
// (inside, across, inside); Barrier gathers each host to its first rank,
// runs a dissemination barrier among those, and releases each host.
//
// Large calls are cut into a few slices that run the whole scheme each,
// with no deps between slices, so one slice crosses hosts while the next is
// still reduced inside them. Every step and its matching receive are
// emitted together, so the builder's slot numbering pairs them whatever
// order the phases interleave in. Empty pieces are left out on both sides.
//
// Plans are correct for every layout (Topology::host_of, hosts.hpp): with
// the layout unknown or one host, only the inside phases remain; with one
// rank per host, only the crossing. The automatic choice offers them only
// where the group spans hosts, and prices them per link (cost_model.hpp).
//
// Why one file of ~500 lines: the five collectives share the three-phase
// scaffold (the layout, the inside and crossing helpers, slicing); each is
// a few dozen lines on top of it.
#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "algorithms/builder.hpp"
#include "algorithms/generators.hpp"
#include "algorithms/hosts.hpp"

namespace braid::plan {
namespace {

// Each slice of a large call carries about this much per block, so that a
// slice's crossing (the slowest link) overlaps the next slice's inside
// work; at most kMaxSlices bound the plan's size. Measured on 2 emulated
// hosts x 2 ranks (bench/RESULTS.md section 20): 128 KiB pieces crossed
// at 0.9-1.2 GB/s busbw at 2 MiB where 1 MiB pieces made 0.76-0.88.
constexpr std::int64_t kSliceBytes = 128 << 10;
constexpr std::int64_t kMaxSlices = 16;

std::int64_t num_slices(const PlanArgs& a, std::int64_t count, int blocks) {
  const auto elem = std::max<std::int64_t>(1, static_cast<std::int64_t>(a.elem_size));
  const std::int64_t per_slice = std::max<std::int64_t>(1, kSliceBytes / elem) * std::max(blocks, 1);
  return std::clamp<std::int64_t>((count + per_slice - 1) / per_slice, 1, kMaxSlices);
}

// Calls visit(piece, j) for piece j of each slice, `pieces` per slice,
// leaving out empty ones (a count smaller than the pieces).
template <class Visit>
void for_each_piece(const PlanArgs& a, int pieces, Visit&& visit) {
  const std::int64_t slices = num_slices(a, a.count, pieces);
  for (std::int64_t sl = 0; sl < slices; ++sl) {
    const Block range = block(a.count, slices, sl);
    for (int j = 0; j < pieces; ++j) {
      const Block pb = block(range.count, pieces, j);
      if (pb.count > 0) visit(out(range.offset + pb.offset, pb.count), j);
    }
  }
}
// How many of the root's host's ranks carry pieces of a rooted call: one
// per rank there, but no piece under kMinPieceBytes. Small calls then cross
// as one piece, as a flat tree would send them, not as several messages
// that each cost a round of wake-ups (broadcast of 4 KiB on 2 hosts x 2
// ranks sharing 2 CPUs: 17-19 us in two pieces, 8-11 us in one).
constexpr std::int64_t kMinPieceBytes = 64 << 10;
int carriers(const PlanArgs& a, int ranks_there) {
  const auto bytes = a.count * std::max<std::int64_t>(1, static_cast<std::int64_t>(a.elem_size));
  return static_cast<int>(std::clamp<std::int64_t>(bytes / kMinPieceBytes, 1, std::max(ranks_there, 1)));
}

// A chain's last step: `step` where one was emitted, else what it was.
int after(int step, int before) { return step >= 0 ? step : before; }

// The ring all-reduce of Output `blk` among `owners` (one rank per host),
// whose step `ready[i]` (or -1) must precede any use of it at owners[i].
// Returns, per owner, the steps after which its copy of blk is final (for
// the owners the builder keeps). Each owner's steps are emitted together:
// they depend only on its own earlier steps, and a slice builds only its
// rank's, in time linear in the hosts.
std::vector<Deps> ring_across(PlanBuilder& b, const std::vector<int>& owners, Span blk, const std::vector<int>& ready) {
  const int h = static_cast<int>(owners.size());
  std::vector<Deps> done(static_cast<std::size_t>(h));
  if (h == 1) {
    done[0] = {ready[0]};
    return done;
  }
  auto sub = [&](int j) {
    const Block s = block(blk.count, h, ((j % h) + h) % h);
    return out(blk.offset + s.offset, s.count);
  };
  auto at = [&](int i) { return static_cast<std::size_t>(((i % h) + h) % h); };
  for (int i = 0; i < h; ++i) {
    const int me = owners[at(i)], next = owners[at(i + 1)], prev = owners[at(i - 1)];
    if (!b.keeps(me)) continue;
    // Reduce-scatter: at step s owner i sends sub i-s to owner i+1 and
    // reduces sub i-1-s from owner i-1 into its copy (it has not sent that
    // sub yet: only its own earlier writes, the chain in got, come first);
    // afterwards it holds sub i+1 reduced over all hosts.
    int got = ready[at(i)];
    std::vector<int> rs_sent(static_cast<std::size_t>(h - 1), -1);
    for (int s = 0; s < h - 1; ++s) {
      rs_sent[static_cast<std::size_t>(s)] = send_piece(b, me, next, sub(i - s), {got});
      got = after(recv_reduce_piece(b, me, prev, sub(i - 1 - s), {got}), got);
    }
    Deps& fin = done[at(i)];
    fin.push_back(got);
    // All-gather: at step s owner i forwards sub i+1-s and overwrites its
    // copy of sub i-s once its own reduce-scatter send of it is done.
    int ag = got;
    for (int s = 0; s < h - 1; ++s) {
      send_piece(b, me, next, sub(i + 1 - s), {ag});
      const int r = recv_piece(b, me, prev, sub(i - s), {rs_sent[static_cast<std::size_t>(s)]});
      ag = after(r, ag);
      fin.push_back(r);
    }
  }
  return done;
}

// The hosts whose inside phases a build visits: all of them, or the
// sliced rank's own (the only one where it has steps inside).
std::vector<int> every_host(const Hosts& hs) {
  std::vector<int> all(static_cast<std::size_t>(hs.count()));
  for (int h = 0; h < hs.count(); ++h) all[static_cast<std::size_t>(h)] = h;
  return all;
}
std::vector<int> hosts_to_build(const PlanBuilder& b, const Hosts& hs) {
  if (b.slice() >= 0) return {hs.host[static_cast<std::size_t>(b.slice())]};
  return every_host(hs);
}

// The hosts as a rooted call sees them: host v counted on from the root's
// (v = 0), and the rank there that carries piece j.
struct FromRoot {
  explicit FromRoot(const PlanArgs& a)
      : hs(hosts_of(a)),
        nh(hs.count()),
        root(a.root),
        home(hs.host[static_cast<std::size_t>(a.root)]),
        pieces(carriers(a, hs.size(home))) {}
  int host(int v) const { return (home + v) % nh; }
  int holder(int v, int j) const { return hs.member(host(v), j); }
  const std::vector<int>& members(int v) const { return hs.members[static_cast<std::size_t>(host(v))]; }
  Hosts hs;
  int nh, root, home;
  int pieces;  // per slice: one per carrier on the root's host (carriers)
};

}  // namespace

namespace {

// The all-reduce among one owner per host of a block (ring_across, or
// halving_doubling_among): same arguments, same result.
using Across = std::vector<Deps> (*)(PlanBuilder&, const std::vector<int>&, Span, const std::vector<int>&);

// It reads the contribution from Input (reads_input): inside, every rank
// sends its blocks from Input, and an owner's first reduction of a block
// combines its own Input with what arrives; an owner that received nothing
// inside (the only rank of its host) copies its block before the crossing.
// Output then needs no copy of the whole Input first.
Plan two_level_allreduce(const PlanArgs& args, const char* name, Across across) {
  PlanBuilder b(args, name);
  b.reads_input();
  const Hosts hs = hosts_of(args);
  const int n = args.nranks, nh = hs.count(), k_blocks = hs.largest();
  const std::int64_t slices = num_slices(args, args.count, k_blocks);
  const auto nk = static_cast<std::size_t>(k_blocks);
  const std::vector<int> inside = hosts_to_build(b, hs);
  for (std::int64_t sl = 0; sl < slices; ++sl) {
    const Block range = block(args.count, slices, sl);
    auto blk = [&](int k) {
      const Block kb = block(range.count, k_blocks, k);
      return out(range.offset + kb.offset, kb.count);
    };
    auto input = [](Span s) { return in(s.offset, s.count); };
    // Per block, per host: the owner's last inside reduction; per block, per
    // rank: its inside send, which the final receive must follow.
    std::vector<std::vector<int>> ready(nk, std::vector<int>(static_cast<std::size_t>(nh), -1));
    std::vector<std::vector<int>> sent_in(nk, std::vector<int>(static_cast<std::size_t>(n), -1));
    // The inside phases visit blocks in a rotation (rank i starts with block
    // i+1), so that at each turn every owner receives from one rank, not
    // all ranks from the first owner at once.
    auto rotation = [&](auto&& visit) {
      for (int t = 1; t < k_blocks; ++t)
        for (int h : inside)
          for (int r : hs.members[static_cast<std::size_t>(h)]) {
            const int k = (hs.local[static_cast<std::size_t>(r)] + t) % k_blocks;
            if (hs.member(h, k) != r && blk(k).count > 0) visit(h, r, k);
          }
    };
    // 1. Inside: every rank sends block k to its host's owner of it, which
    //    reduces the arrivals one after another.
    rotation([&](int h, int r, int k) {
      sent_in[static_cast<std::size_t>(k)][static_cast<std::size_t>(r)] = b.send(r, hs.member(h, k), input(blk(k)));
      int& rd = ready[static_cast<std::size_t>(k)][static_cast<std::size_t>(h)];
      // The first arrival meets the owner's own contribution, in Input.
      rd = fold_in(b, hs.member(h, k), r, blk(k), rd);
    });
    // 2. Across: the owners of block k (one per host) all-reduce it.
    std::vector<std::vector<Deps>> final_at(nk);
    for (int k = 0; k < k_blocks; ++k) {
      if (blk(k).count == 0) continue;
      std::vector<int> owners;
      for (int h = 0; h < nh; ++h) {
        owners.push_back(hs.member(h, k));
        // Nothing reduced into it inside: the owner's block is still in Input.
        int& rd = ready[static_cast<std::size_t>(k)][static_cast<std::size_t>(h)];
        if (rd < 0) rd = b.copy(owners.back(), input(blk(k)), blk(k));
      }
      final_at[static_cast<std::size_t>(k)] = across(b, owners, blk(k), ready[static_cast<std::size_t>(k)]);
    }
    // 3. Inside: each owner hands its final block to the rest of its host.
    rotation([&](int h, int r, int k) {
      const int owner = hs.member(h, k);
      b.send(owner, r, blk(k), final_at[static_cast<std::size_t>(k)][static_cast<std::size_t>(h)]);
      b.recv(r, owner, blk(k), {sent_in[static_cast<std::size_t>(k)][static_cast<std::size_t>(r)]});
    });
  }
  return b.finish();
}

}  // namespace

Plan hierarchical_allreduce(const PlanArgs& args) { return two_level_allreduce(args, "hierarchical", ring_across); }

// The same with the crossing as a halving-doubling among the owners of a
// block: 2 log2(H) latencies where the ring pays 2(H-1), the same bytes for
// a power-of-two number of hosts (the folded hosts of others send theirs
// twice). The choice for many hosts.
Plan hierarchical_hd_allreduce(const PlanArgs& args) {
  return two_level_allreduce(args, "hierarchical_hd",
                             [](PlanBuilder& b, const std::vector<int>& owners, Span data, const std::vector<int>& ready) {
                               return halving_doubling_among(b, owners, data, ready);
                             });
}

// ReduceScatter: block d (Input[d*c, (d+1)*c)) must end reduced in rank d's
// Output. On each host the rank with d's local index (mod the host's size)
// gathers and reduces the host's share of block d; across hosts, those
// partial sums go straight to d, which adds them to its own host's sum.
// Each host sends (n - its ranks) * c elements across, the least possible.
// A rank's own share stays in its Input until the first arrival is
// combined with it (recv_reduce_with), as the all-reduces' fold_in does: no
// copy first, and a host of one rank sends its share straight from Input.
Plan hierarchical_reducescatter(const PlanArgs& args) {
  PlanBuilder b(args, "hierarchical");
  const Hosts hs = hosts_of(args);
  const int n = args.nranks, nh = hs.count();
  const std::int64_t c = args.count;
  const std::int64_t slices = num_slices(args, c, 1);
  const std::vector<int> inside = hosts_to_build(b, hs);
  auto carrier_of = [&](int h, int d) { return hs.member(h, hs.local[static_cast<std::size_t>(d)]); };
  // Scratch: one block of c per foreign block a rank carries, in order
  // (per kept rank: its slot for each block d, or -1).
  std::vector<std::vector<int>> carried(static_cast<std::size_t>(n));
  std::vector<int> slots(static_cast<std::size_t>(n), 0);  // per carrier: blocks so far
  for (int d = 0; d < n; ++d)
    for (int h : inside) {
      const int carrier = carrier_of(h, d);
      // A carrier alone on its host sends its share from Input.
      if (carrier == d || !b.keeps(carrier) || hs.size(h) == 1) continue;
      auto& mine = carried[static_cast<std::size_t>(carrier)];
      if (mine.empty()) mine.assign(static_cast<std::size_t>(n), -1);
      const int slot = slots[static_cast<std::size_t>(carrier)]++;
      mine[static_cast<std::size_t>(d)] = slot;
      b.need_scratch(carrier, (slot + 1) * c);
    }
  auto slot_of = [&](int carrier, int d) {
    return carried[static_cast<std::size_t>(carrier)][static_cast<std::size_t>(d)];
  };
  std::vector<int> partial(static_cast<std::size_t>(nh), -1);  // per host: its carrier's chain for block d
  for (std::int64_t sl = 0; sl < slices; ++sl) {
    const Block range = block(c, slices, sl);
    if (range.count == 0) continue;
    for (int d = 0; d < n; ++d) {
      const int home = hs.host[static_cast<std::size_t>(d)];
      const Span src = in(static_cast<std::int64_t>(d) * c + range.offset, range.count);
      int total = -1;  // d's chain of writes into its Output
      // Per host: the carrier's partial sum of this piece, and where it is
      // (Input while no host-mate's share has been added to it).
      for (int h : inside) partial[static_cast<std::size_t>(h)] = -1;
      // (A carrier this build does not keep has no slots; its steps are
      // dropped, so any span will do.)
      auto partial_span = [&](int h) {
        const int carrier = carrier_of(h, d);
        if (hs.size(h) == 1) return src;
        return carrier == d || !b.keeps(carrier)
                   ? out(range.offset, range.count)
                   : scratch(static_cast<std::int64_t>(slot_of(carrier, d)) * c + range.offset, range.count);
      };
      // Adds what `from` sends to `r`'s value of the piece: into acc, the
      // first time combined with r's share in Input.
      auto add = [&](int r, int from, Span acc, int& chain) {
        chain = chain < 0 ? b.recv_reduce_with(r, from, src, acc) : b.recv_reduce(r, from, acc, {chain});
      };
      for (int h : inside) {
        const int carrier = carrier_of(h, d);
        int& chain = carrier == d ? total : partial[static_cast<std::size_t>(h)];
        for (int r : hs.members[static_cast<std::size_t>(h)]) {
          if (r == carrier) continue;
          b.send(r, carrier, src);
          add(carrier, r, partial_span(h), chain);
        }
      }
      // Across: each other host's carrier sends its partial sum to d. A
      // slice visits only the hosts where its rank is one end: every host
      // for its own block, else its own host. d takes them in turn from
      // the hosts after its own (home + 1, home + 2, ...): at each turn
      // every host then sends to one host and receives from one, where in
      // the same order for all (0, 1, ...) every block's first partial
      // came from host 0 (or 1) and its link carried them all while the
      // others waited.
      for (int t = 1; t < nh; ++t) {
        const int h = (home + t) % nh;
        if (!b.keeps(d) && std::find(inside.begin(), inside.end(), h) == inside.end()) continue;
        const int carrier = carrier_of(h, d);
        if (!b.keeps(carrier) && !b.keeps(d)) continue;
        if (b.keeps(carrier)) b.send(carrier, d, partial_span(h), {partial[static_cast<std::size_t>(h)]});
        add(d, carrier, out(range.offset, range.count), total);
      }
      // Nothing came to d (one rank in all): its block is its own share.
      if (total < 0) b.copy(d, src, out(range.offset, range.count));
    }
  }
  return b.finish();
}

// AllGather: rank r's block crosses to each other host once, to the rank
// there with r's local index (mod its size), and is then shared inside
// every host by the rank that has it. Each host sends (its ranks) * c * (H-1)
// elements across, the least possible.
// Every rank sends its own block from Input (reads_input) and copies it
// into its place in Output last, while its sends drain.
Plan hierarchical_allgather(const PlanArgs& args) {
  PlanBuilder b(args, "hierarchical");
  b.reads_input();
  const Hosts hs = hosts_of(args);
  const int n = args.nranks;
  const std::int64_t c = args.count;
  const std::int64_t slices = num_slices(args, c, 1);
  const std::vector<int> inside = hosts_to_build(b, hs);
  const std::vector<int> all_hosts = every_host(hs);
  for (std::int64_t sl = 0; sl < slices; ++sl) {
    const Block range = block(c, slices, sl);
    if (range.count == 0) continue;
    for (int q = 0; q < n; ++q) {
      const Span blk = out(static_cast<std::int64_t>(q) * c + range.offset, range.count);
      const Span own = in(range.offset, range.count);  // q's copy of it
      // A slice visits the hosts where its rank has steps: its own, and
      // every host where its own block q crosses to.
      for (int h : b.keeps(q) ? all_hosts : inside) {
        // Who has block q on host h, and from which step on.
        int holder = q, arrived = -1;
        if (h != hs.host[static_cast<std::size_t>(q)]) {
          holder = hs.member(h, hs.local[static_cast<std::size_t>(q)]);
          b.send(q, holder, own);
          arrived = b.recv(holder, q, blk);
        }
        for (int r : hs.members[static_cast<std::size_t>(h)]) {
          if (r == holder) continue;
          b.send(holder, r, holder == q ? own : blk, {arrived});
          b.recv(r, holder, blk);
        }
      }
    }
  }
  if (c > 0)
    for (int r : b.ranks()) b.copy(r, in(0, c), out(static_cast<std::int64_t>(r) * c, c));
  return b.finish();
}

// Broadcast: the root's host cuts the data into one piece per rank there
// (the root scatters them); each piece travels host to host along a chain
// that starts at the root's host, carried by the rank with the piece's
// index (mod the host's size); every host then shares its pieces inside.
// Each host receives the data across once and forwards it once.
Plan hierarchical_broadcast(const PlanArgs& args) {
  PlanBuilder b(args, "hierarchical");
  const FromRoot fr(args);
  const int root = fr.root;
  for_each_piece(args, fr.pieces, [&](Span piece, int j) {
    int prev = root, has = -1;  // the piece's holder so far, and its arrival step there
    for (int step = 0; step < fr.nh; ++step) {
      const int holder = fr.holder(step, j);
      if (holder != prev) {
        b.send(prev, holder, piece, {has});
        has = b.recv(holder, prev, piece);
      }
      prev = holder;
      for (int r : fr.members(step)) {
        if (r == holder || r == root) continue;
        b.send(holder, r, piece, {has});
        b.recv(r, holder, piece);
      }
    }
  });
  b.root_reads_input();
  return b.finish();
}

// The reduce plans read every contribution from Input (reads_input): a rank
// sends its own piece from there, a holder's first reduction of a piece
// combines its own Input with what arrives (fold_in), and a holder that has
// reduced nothing passes its Input on (folded).

// Reduce: the mirror of Broadcast. Every host reduces piece j (one per rank
// of the root's host) into its rank with index j (mod its size); the partial
// sums flow host to host along a chain that ends at the root's host, each
// host adding its own; the root's host then gathers the pieces to the root.
Plan hierarchical_reduce(const PlanArgs& args) {
  PlanBuilder b(args, "hierarchical");
  if (reads_input_trivial(b)) return b.finish();
  const FromRoot fr(args);
  const int root = fr.root;
  for_each_piece(args, fr.pieces, [&](Span piece, int j) {
    std::vector<int> sent_in(static_cast<std::size_t>(args.nranks), -1);
    int prev = -1, prev_done = -1;  // the chain's holder on the host before, and its last write
    for (int step = 1; step <= fr.nh; ++step) {  // the root's host (step nh) comes last
      const int holder = fr.holder(step, j);
      int chain = -1;
      for (int r : fr.members(step)) {
        if (r == holder) continue;
        sent_in[static_cast<std::size_t>(r)] = b.send(r, holder, folded(piece, -1));
        chain = fold_in(b, holder, r, piece, chain);
      }
      if (prev >= 0) {
        b.send(prev, holder, folded(piece, prev_done), {prev_done});
        chain = fold_in(b, holder, prev, piece, chain);
      }
      prev = holder;
      prev_done = chain;
    }
    // prev is the root's host's holder of piece j.
    if (prev != root) {
      b.send(prev, root, folded(piece, prev_done), {prev_done});
      b.recv(root, prev, piece, {sent_in[static_cast<std::size_t>(root)]});
    }
  });
  return b.finish();
}

// Tree variants of Broadcast and Reduce: the same pieces, carried host to
// host along a binomial tree over the hosts (relative to the root's) instead
// of a chain: ceil(log2 H) crossings deep where the chain is H-1, at the
// price of a host forwarding each piece to up to log2 H others. The choice
// for many hosts and small or medium calls.
namespace {
// Calls visit(from, to) for every edge of the binomial tree over nh hosts
// (relative indices, 0 the root's), in rounds: the root's largest subtree
// first, so every host has received before it sends.
template <class Visit>
void host_tree_edges(int nh, Visit&& visit) {
  int top = 1;
  while (top < nh) top *= 2;
  for (int m = top / 2; m >= 1; m /= 2)
    for (int v = 0; v + m < nh; v += 2 * m) visit(v, v + m);
}
}  // namespace

Plan hierarchical_tree_broadcast(const PlanArgs& args) {
  PlanBuilder b(args, "hierarchical_tree");
  const FromRoot fr(args);
  const int nh = fr.nh, root = fr.root;
  auto holder = [&](int v, int j) { return fr.holder(v, j); };
  for_each_piece(args, fr.pieces, [&](Span piece, int j) {
    std::vector<int> has(static_cast<std::size_t>(nh), -1);  // per relative host: the piece's arrival at its holder
    if (holder(0, j) != root) {
      b.send(root, holder(0, j), piece);
      has[0] = b.recv(holder(0, j), root, piece);
    }
    host_tree_edges(nh, [&](int from, int to) {
      b.send(holder(from, j), holder(to, j), piece, {has[static_cast<std::size_t>(from)]});
      has[static_cast<std::size_t>(to)] = b.recv(holder(to, j), holder(from, j), piece);
    });
    for (int v = 0; v < nh; ++v)
      for (int r : fr.members(v)) {
        if (r == holder(v, j) || r == root) continue;
        b.send(holder(v, j), r, piece, {has[static_cast<std::size_t>(v)]});
        b.recv(r, holder(v, j), piece);
      }
  });
  b.root_reads_input();
  return b.finish();
}

Plan hierarchical_tree_reduce(const PlanArgs& args) {
  PlanBuilder b(args, "hierarchical_tree");
  if (reads_input_trivial(b)) return b.finish();
  const FromRoot fr(args);
  const int nh = fr.nh, root = fr.root;
  auto holder = [&](int v, int j) { return fr.holder(v, j); };
  for_each_piece(args, fr.pieces, [&](Span piece, int j) {
    std::vector<int> chain(static_cast<std::size_t>(nh), -1);  // per relative host: its holder's last reduction
    int root_sent = -1;
    for (int v = 0; v < nh; ++v)
      for (int r : fr.members(v)) {
        if (r == holder(v, j)) continue;
        const int sent = b.send(r, holder(v, j), folded(piece, -1));
        if (r == root) root_sent = sent;
        int& c = chain[static_cast<std::size_t>(v)];
        c = fold_in(b, holder(v, j), r, piece, c);
      }
    // Up the tree: the edges in reverse, so a host has heard its subtree first.
    std::vector<std::pair<int, int>> edges;
    host_tree_edges(nh, [&](int from, int to) { edges.emplace_back(from, to); });
    for (auto it = edges.rbegin(); it != edges.rend(); ++it) {
      const auto [parent, child] = *it;
      const int done = chain[static_cast<std::size_t>(child)];
      b.send(holder(child, j), holder(parent, j), folded(piece, done), {done});
      int& c = chain[static_cast<std::size_t>(parent)];
      c = fold_in(b, holder(parent, j), holder(child, j), piece, c);
    }
    if (holder(0, j) != root) {
      b.send(holder(0, j), root, folded(piece, chain[0]), {chain[0]});
      b.recv(root, holder(0, j), piece, {root_sent});
    }
  });
  return b.finish();
}

// Barrier: each host's ranks report to its first rank; those run a
// dissemination barrier (dissemination.cpp) among themselves once they have
// heard their whole host; then each releases its host. Inside a host this
// costs two fast hops instead of log2(n) rounds that may cross hosts.
Plan hierarchical_barrier(const PlanArgs& args) {
  PlanBuilder b(args, "hierarchical");
  const Hosts hs = hosts_of(args);
  const int nh = hs.count();
  const Span nothing = out(0, 0);
  std::vector<int> heard(static_cast<std::size_t>(nh), -1);  // per leader: its last receive
  std::vector<int> leaders(static_cast<std::size_t>(nh));
  for (int h = 0; h < nh; ++h) {
    const int leader = hs.members[static_cast<std::size_t>(h)][0];
    leaders[static_cast<std::size_t>(h)] = leader;
    for (int r : hs.members[static_cast<std::size_t>(h)]) {
      if (r == leader) continue;
      b.send(r, leader, nothing);
      heard[static_cast<std::size_t>(h)] = b.recv(leader, r, nothing, {heard[static_cast<std::size_t>(h)]});
    }
  }
  for (int d = 1; d < nh; d *= 2) {
    // Every leader's send of this round carries what it heard before it.
    for (int i = 0; i < nh; ++i)
      b.send(leaders[static_cast<std::size_t>(i)], leaders[static_cast<std::size_t>((i + d) % nh)], nothing,
             {heard[static_cast<std::size_t>(i)]});
    for (int i = 0; i < nh; ++i) {
      const int to = (i + d) % nh;
      int& h = heard[static_cast<std::size_t>(to)];
      h = b.recv(leaders[static_cast<std::size_t>(to)], leaders[static_cast<std::size_t>(i)], nothing, {h});
    }
  }
  for (int h = 0; h < nh; ++h) {
    const int leader = leaders[static_cast<std::size_t>(h)];
    for (int r : hs.members[static_cast<std::size_t>(h)]) {
      if (r == leader) continue;
      b.send(leader, r, nothing, {heard[static_cast<std::size_t>(h)]});
      b.recv(r, leader, nothing, {b.last(r)});
    }
  }
  return b.finish();
}

bool hierarchical_offered(const PlanArgs& args) { return several_hosts(args); }

}  // namespace braid::plan
