// "staged" all-reduce for one host: the push schedule (rank r reduces block
// r and delivers it to every rank) with every byte that crosses between
// ranks relayed through the ranks' shared Scratch in chunks, instead of
// read or written in the peers' own buffers.
//
// Why: a user buffer that did not come from braid::mem_alloc cannot be
// mapped by a peer, so push reaches it with process_vm_readv/writev: a
// system call and page pinning per chunk, and a kernel copy whose stores
// read each destination line before writing it. Here a peer's buffer is
// never touched. Each rank copies the chunks its peers reduce into its own
// Scratch (reading its Input once, the copy staying in cache), the owner
// reduces them from there, stages the result in its Scratch, and every rank
// copies the result out into its own Output. Scratch is shared memory, so
// every step is a plain load or store, and a chunk crosses between cores
// through the shared cache, not through DRAM. Each Output byte is written
// by exactly one step that nothing in the plan reads back, so the runtime
// may write it with streaming stores (CompiledPlan::output_write_only):
// DRAM then sees each Input byte read once and each Output byte written
// once, the floor of an all-reduce. (A bare 2-process prototype of this
// schedule, 16 MiB out of place: 1.2-1.5 ms, against 2.3-3.5 ms for push's
// through process_vm_readv/writev.)
//
// Rank r's Scratch holds one slot of a chunk per rank: slot q (q != r) is
// where r stages its chunk of q's block, slot r where r puts its reduced
// chunk. One slot each is enough because the ranks move in lockstep, chunk
// j of every block at a time; per chunk, each rank:
//   a. copies its chunk j of every peer's block into that peer's slot and
//      signals "staged" (which also says: I have read your slot's chunk
//      j-1, step d);
//   b. waits for every peer's "staged";
//   c. reduces its own chunk j with every peer's staged copy (GetReduce from
//      their Scratch) into slot r, copies slot r to its Output, signals
//      "reduced" (done reading your slot; mine holds the result);
//   d. waits for every peer's "reduced", copies the peer's slot into its
//      Output.
// The signals from r to q run staged(0), reduced(0), staged(1), ... and q
// waits for them in that order (plan.hpp: signals are counted). Nothing
// says "done" after the last chunk: the window lets a rank write its
// Scratch again only once every peer has completed the call that last used
// it (two calls later for Scratch of up to 1 MiB, which alternates halves;
// larger Scratch is one region, and the next call waits for every peer to
// complete this one: Window::writable_after).
//
// Order of the reduction: the own chunk first, then the peers' in rank
// order, as push does (push.cpp says why that is right in place). Block r is
// reduced by rank r only, so every rank gets the same bits.
//
// All-gather, the same way: each rank stages chunk j of its Input in its
// Scratch (one slot), and every peer copies it from there into its Output
// (reading nothing back, so large Outputs are written with streaming
// stores). Per chunk, rank r signals each peer "staged" after its copy and
// "took" after its Get of that peer's slot (not after the last chunk: see
// above for when Scratch is written again); it refills its slot once every
// peer has taken the previous chunk. The plan also copies the chunk into
// the rank's own block of Output, right after staging it, while it is in
// cache (reads_input: the runtime does not copy the whole Input there first,
// which would read it from memory twice); in place that copy is the
// identity, and the runtime skips it.
//
// Broadcast, the same way: the root copies chunk j of its Input into slot
// j mod S of its Scratch, signals "staged" to every peer, and copies the
// chunk into its own Output while it is in cache (the identity in place);
// each peer copies the slot into its own Output and, where the root will
// refill that slot, signals "took". S slots (kBroadcastSlots) let the root
// stage chunk j+1 while the peers still copy chunk j, so the two copies of
// every byte (into the slot, out of it) run at once on two CPUs, through the
// shared cache. Against split (peer_read.cpp), which halves the bytes
// between two copies through the kernel, this makes two whole copies in
// user space, where the kernel's copy runs at about half memcpy's speed
// here. It lost to split until the step schedule started data steps in plan
// order: before that, chunks made ready together were staged last first and
// announced only after the last, so root and peer took turns in batches of
// S chunks (bench/RESULTS.md sections 31 and 42). Since then, 2 ranks, 64
// MiB in place: 4.3-5.9 ms against split's 6.4-8.1.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "algorithms/builder.hpp"
#include "algorithms/generators.hpp"

namespace braid::plan {

namespace {
// Chunks of about 1 MiB / n (at most kMaxChunkBytes, at least
// kMinChunkBytes): a rank has n of them in flight, which stays in its L2.
// 2 ranks, 16 MiB, the prototype: 128, 256 and 512 KiB chunks within 5%.
constexpr std::int64_t kChunkBudgetBytes = 1024 * 1024;
constexpr std::int64_t kMaxChunkBytes = 256 * 1024;
constexpr std::int64_t kMinChunkBytes = 32 * 1024;
// Plans stay small for the cost model and the verifier: about 32768 steps in
// all at most (a chunk costs a rank about 8 steps per peer). 2 ranks keep
// 256 KiB chunks up to 1 GiB; 64 ranks have one chunk per block.
constexpr std::int64_t kMaxPlanSteps = 32768;
// A rank's Scratch holds n slots of a chunk (all-gather: one). Where the
// step budget would make chunks so large that it passes this, the plan is
// not offered: Scratch is shared memory that the window keeps at its
// largest, and 64 ranks with one chunk per block of a 1 GiB all-reduce
// would ask 1 GiB of it per rank.
constexpr std::int64_t kMaxScratchBytes = 16 * 1024 * 1024;
// Broadcast's slots in the root's Scratch (4 MiB at 256 KiB chunks): the root
// runs ahead of its peers by that much, so that a peer that slept while
// waiting does not stall it. 2 ranks, 64 MiB in place, two rounds each: 4
// slots 13.0-15.3 ms, 8 slots 10.8-14.0, 16 slots 9.0-11.6 (RESULTS.md
// section 31).
constexpr std::int64_t kBroadcastSlots = 16;

std::int64_t chunks_for(std::int64_t count, std::size_t elem, int n) {
  const std::int64_t bytes = count * static_cast<std::int64_t>(elem);
  const std::int64_t target = std::clamp<std::int64_t>(kChunkBudgetBytes / n, kMinChunkBytes, kMaxChunkBytes);
  const std::int64_t most = std::max<std::int64_t>(1, kMaxPlanSteps / (8 * std::int64_t{n} * (n - 1)));
  return std::clamp<std::int64_t>((bytes + target - 1) / target, 1, most);
}

// Rank r's signals to, and waits on, each peer, chained by deps in the order
// they are added: the runtime counts a pair's signals, so they must be
// ordered, and so must the waits on them (plan.hpp).
class PairChains {
 public:
  PairChains(PlanBuilder& b, int r)
      : b_(b), r_(r), signal_(static_cast<std::size_t>(b.nranks()), -1), wait_(signal_) {}
  int signal(int q, Deps deps) {
    deps.push_back(signal_[static_cast<std::size_t>(q)]);
    return signal_[static_cast<std::size_t>(q)] = b_.signal(r_, q, std::move(deps));
  }
  int wait(int q) {
    return wait_[static_cast<std::size_t>(q)] = b_.wait(r_, q, {wait_[static_cast<std::size_t>(q)]});
  }

 private:
  PlanBuilder& b_;
  const int r_;
  std::vector<int> signal_, wait_;  // the last of each pair, -1 before the first
};

// Elements in a rank's largest block: what is cut into chunks (broadcast: the
// whole buffer, from the root).
std::int64_t largest_block(const PlanArgs& args) {
  return args.coll == Collective::AllGather || args.coll == Collective::Broadcast ? args.count
                                                                                 : block(args.count, args.nranks, 0).count;
}

// Slots of a chunk in a rank's Scratch.
std::int64_t slots_for(const PlanArgs& args, std::int64_t chunks) {
  if (args.coll == Collective::AllGather) return 1;
  if (args.coll == Collective::Broadcast) return std::min(chunks, kBroadcastSlots);
  return args.nranks;
}
}  // namespace

bool staged_supports(const PlanArgs& args) {
  // Device plans get no Scratch (one_sided.cpp).
  if (!one_sided_only(args) || !args.topology.device_of.empty()) return false;
  if (args.nranks < 2) return true;
  const std::int64_t c = largest_block(args);
  const std::int64_t K = chunks_for(c, args.elem_size, args.nranks);
  const std::int64_t slot = block(c, K, 0).count;
  return slots_for(args, K) * slot * static_cast<std::int64_t>(args.elem_size) <= kMaxScratchBytes;
}

Plan staged_allreduce(const PlanArgs& args) {
  PlanBuilder b(args, "staged");
  if (reads_input_trivial(b)) return b.finish();
  const int n = args.nranks;
  const auto u = [](int q) { return static_cast<std::size_t>(q); };
  std::vector<Block> blocks(u(n));
  for (int q = 0; q < n; ++q) blocks[u(q)] = block(args.count, n, q);
  // Block 0 is the largest: every block is cut into K chunks alike, so chunk
  // j of every block moves in round j.
  const std::int64_t K = chunks_for(blocks[0].count, args.elem_size, n);
  const std::int64_t slot = block(blocks[0].count, K, 0).count;
  const auto chunk = [&](int q, std::int64_t j) {
    const Block part = block(blocks[u(q)].count, K, j);
    return Block{blocks[u(q)].offset + part.offset, part.count};
  };
  const auto slot_of = [&](int q, std::int64_t count) { return scratch(q * slot, count); };

  for (int r = 0; r < n; ++r) {
    b.need_scratch(r, n * slot);
    PairChains pairs(b, r);
    const auto signal = [&](int q, Deps deps) { return pairs.signal(q, std::move(deps)); };
    const auto wait = [&](int q) { return pairs.wait(q); };
    // Per peer, from the previous chunk: this rank's copy into slot q, the
    // wait for q's "reduced" (q has read slot q), and the Get of q's slot.
    std::vector<int> staged_prev(u(n), -1), reduced_prev(u(n), -1), took_prev(u(n), -1);
    int copied_out_prev = -1;  // slot r copied to Output, previous chunk

    for (std::int64_t j = 0; j < K; ++j) {
      // a. Stage chunk j of every peer's block.
      for (int q = 0; q < n; ++q) {
        if (q == r) continue;
        const Block c = chunk(q, j);
        if (c.count > 0)
          staged_prev[u(q)] =
              b.copy(r, in(c.offset, c.count), slot_of(q, c.count), {reduced_prev[u(q)], staged_prev[u(q)]});
        signal(q, {staged_prev[u(q)], took_prev[u(q)]});
      }
      // b. Every peer's staged chunk j (and so its Get of slot r, chunk j-1).
      std::vector<int> arrived(u(n), -1);
      for (int q = 0; q < n; ++q)
        if (q != r) arrived[u(q)] = wait(q);
      // c. Reduce chunk j of block r into slot r, copy it out.
      const Block mine = chunk(r, j);
      int reduced = -1;
      for (int q = 0; q < n && mine.count > 0; ++q) {
        if (q == r) continue;
        Deps deps = arrived;
        deps.push_back(copied_out_prev);
        deps.push_back(reduced);
        const Span acc = reduced < 0 ? in(mine.offset, mine.count) : slot_of(r, mine.count);
        reduced = b.get_reduce(r, q, slot_of(r, mine.count), acc, slot_of(r, mine.count), std::move(deps));
      }
      if (mine.count > 0) copied_out_prev = b.copy(r, slot_of(r, mine.count), out(mine.offset, mine.count), {reduced});
      for (int q = 0; q < n; ++q)
        if (q != r) signal(q, {reduced, arrived[u(q)]});
      // d. Every peer's reduced chunk j, into the Output.
      for (int q = 0; q < n; ++q) {
        if (q == r) continue;
        reduced_prev[u(q)] = wait(q);
        const Block c = chunk(q, j);
        // In place, Output[c] is the Input that step a staged: after it.
        if (c.count > 0)
          took_prev[u(q)] =
              b.get(r, q, slot_of(q, c.count), out(c.offset, c.count), {reduced_prev[u(q)], staged_prev[u(q)]});
      }
    }
  }
  return b.finish();
}

Plan staged_allgather(const PlanArgs& args) {
  PlanBuilder b(args, "staged");
  if (reads_input_trivial(b)) return b.finish();
  const int n = args.nranks;
  const std::int64_t c = args.count;
  const auto u = [](int q) { return static_cast<std::size_t>(q); };
  const std::int64_t K = chunks_for(c, args.elem_size, n);
  const std::int64_t slot = block(c, K, 0).count;
  for (int r = 0; r < n; ++r) {
    b.need_scratch(r, slot);
    PairChains pairs(b, r);
    const auto signal = [&](int q, Deps deps) { return pairs.signal(q, std::move(deps)); };
    const auto wait = [&](int q) { return pairs.wait(q); };
    std::vector<int> taken(u(n), -1);  // each peer's "took" of the previous chunk
    int staged = -1;
    for (std::int64_t j = 0; j < K; ++j) {
      const Block part = block(c, K, j);
      // Refill the slot once every peer has taken the previous chunk.
      Deps free = taken;
      free.push_back(staged);
      staged = b.copy(r, in(part.offset, part.count), scratch(0, part.count), std::move(free));
      for (int q = 0; q < n; ++q)
        if (q != r) signal(q, {staged});
      b.copy(r, in(part.offset, part.count), out(r * c + part.offset, part.count), {staged});
      for (int q = 0; q < n; ++q) {
        if (q == r) continue;
        const int arrived = wait(q);
        const int took = b.get(r, q, scratch(0, part.count), out(q * c + part.offset, part.count), {arrived});
        if (j + 1 < K) signal(q, {took});
      }
      if (j + 1 < K)
        for (int q = 0; q < n; ++q)
          if (q != r) taken[u(q)] = wait(q);
    }
  }
  return b.finish();
}

Plan staged_broadcast(const PlanArgs& args) {
  PlanBuilder b(args, "staged");
  if (reads_input_trivial(b)) return b.finish();
  const int n = args.nranks, root = args.root;
  const std::int64_t c = args.count;
  const std::int64_t K = chunks_for(c, args.elem_size, n);
  const std::int64_t S = slots_for(args, K);
  const std::int64_t slot = block(c, K, 0).count;
  const auto slot_span = [&](std::int64_t j, std::int64_t count) { return scratch((j % S) * slot, count); };
  b.need_scratch(root, S * slot);
  PairChains roots(b, root);
  std::vector<PairChains> peers;
  peers.reserve(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r) peers.emplace_back(b, r);
  // Where no slot is refilled (K <= S) the root would wait on no peer, and
  // its Scratch (double-buffered across calls) could be reused two calls
  // later under a peer's read: each peer says "entered" first, and the root
  // waits for that after staging its last chunk.
  const bool entered = K <= S;
  if (entered)
    for (int q = 0; q < n; ++q)
      if (q != root) peers[static_cast<std::size_t>(q)].signal(root, {});
  std::vector<int> filled(static_cast<std::size_t>(S), -1);  // the root's last copy into each slot
  for (std::int64_t j = 0; j < K; ++j) {
    const Block part = block(c, K, j);
    // The slot is free once every peer took the chunk it held before.
    Deps free{filled[static_cast<std::size_t>(j % S)]};
    if (j >= S)
      for (int q = 0; q < n; ++q)
        if (q != root) free.push_back(roots.wait(q));
    const int staged = b.copy(root, in(part.offset, part.count), slot_span(j, part.count), std::move(free));
    filled[static_cast<std::size_t>(j % S)] = staged;
    for (int q = 0; q < n; ++q)
      if (q != root) roots.signal(q, {staged});
    // The root's own Output, from the chunk it has just read (in cache),
    // after the signals: out of place the runtime does not copy the whole
    // Input there first (reads_input); in place the copy is the identity.
    b.copy(root, in(part.offset, part.count), out(part.offset, part.count), {staged});
    for (int q = 0; q < n; ++q) {
      if (q == root) continue;
      PairChains& mine = peers[static_cast<std::size_t>(q)];
      const int arrived = mine.wait(root);
      const int got = b.get(q, root, slot_span(j, part.count), out(part.offset, part.count), {arrived});
      if (j + S < K) mine.signal(root, {got});  // the root refills this slot
    }
  }
  if (entered)
    for (int q = 0; q < n; ++q)
      if (q != root) roots.wait(q);
  return b.finish();
}

}  // namespace braid::plan
