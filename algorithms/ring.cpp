// Ring algorithms: the ranks form a ring r -> r+1 (mod n) and every message
// travels one hop. Each rank sends to one neighbour and receives from the
// other, so every link carries data all the time: the bandwidth-optimal
// choice for large messages (AllReduce moves 2(n-1)/n of the data per rank,
// the lower bound), at the price of n-1 or 2(n-1) latencies.
//
// Pipelining: each range that flows around the ring is cut into chunks of
// about kChunkBytes, and chunk j of one step depends only on chunk j of the
// step before. The engine issues a chunk as soon as its own input is there,
// so a rank forwards chunk 0 while chunk 1 is still arriving, and reductions
// overlap the wire instead of following it.
//
// Empty pieces (count < n, count 0) are left out. A piece keeps its size
// along its whole path, so its sender and receiver skip it alike and slot
// numbering stays paired.
#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "algorithms/builder.hpp"
#include "algorithms/generators.hpp"

namespace braid::plan {
namespace {

// ~512 KiB chunks: a message that size takes ~50 us at 10 GB/s and ~400 us
// at 10 Gb/s, one to two orders of magnitude above the per-message cost of
// every transport (1-20 us), so chunking costs little bandwidth; yet it is
// small enough that the pipeline fill (one chunk per hop) stays short and a
// chunk fits the shared-memory and staging buffers transports use.
constexpr std::int64_t kChunkBytes = 512 * 1024;
// A ring already pipelines across its n blocks, so chunking a block only
// overlaps the reduction and the next hop; a few chunks per block give almost
// all of that. Bounding them bounds the plan's size (steps grow with chunks
// x ranks x steps) for multi-GB calls.
constexpr std::int64_t kMaxChunksPerBlock = 16;
// A chain (Broadcast, Reduce) has no other pipelining: its fill costs n-2
// chunk times, so it keeps 512 KiB chunks much longer before the cap.
constexpr std::int64_t kMaxChunksPerChain = 512;

std::int64_t num_chunks(const PlanArgs& a, std::int64_t count, std::int64_t max_chunks) {
  const std::int64_t elem = std::max<std::int64_t>(1, static_cast<std::int64_t>(a.elem_size));
  const std::int64_t per_chunk = std::max<std::int64_t>(1, kChunkBytes / elem);
  return std::clamp<std::int64_t>((count + per_chunk - 1) / per_chunk, 1, max_chunks);
}

int ring_index(int x, int n) { return ((x % n) + n) % n; }

// Chunk j of block `blk` when `count` elements are cut into n blocks of
// `chunks` chunks each (AllReduce's Output).
Span block_chunk(std::int64_t count, int n, int blk, std::int64_t chunks, std::int64_t j) {
  const Block b = block(count, n, blk);
  const Block c = block(b.count, chunks, j);
  return out(b.offset + c.offset, c.count);
}

}  // namespace

// AllReduce = reduce-scatter then all-gather over n blocks of Output.
//   Reduce-scatter step s: rank r sends block r-s, receives block r-s-1 and
//   reduces it into its own; after n-1 steps rank r holds block r+1 reduced.
//   All-gather step s: rank r sends block r+1-s, receives block r-s (final).
// It reads the contribution from Input (reads_input): step 0 sends block r
// from there, and each reduction combines a block's Input with what arrives
// and writes Output (every block is reduced once, the first time this rank
// touches it); block r, never reduced here, is filled by the all-gather. So
// Output needs no copy of Input first: out of place, that copy of the whole
// vector cost as much as a third of a 2-rank call over TCP.
Plan ring_allreduce(const PlanArgs& args) {
  PlanBuilder b(args, "ring");
  if (reads_input_trivial(b)) return b.finish();
  const int n = args.nranks;
  const std::int64_t c = args.count;
  const std::int64_t chunks = num_chunks(args, block(c, n, 0).count, kMaxChunksPerBlock);
  auto piece = [&](int blk, std::int64_t j) {
    return block_chunk(c, n, ring_index(blk, n), chunks, j);
  };
  auto input = [&](Span s) { return in(s.offset, s.count); };

  const auto nchunks = static_cast<std::size_t>(chunks);
  for (int r : b.ranks()) {
    const int next = ring_index(r + 1, n), prev = ring_index(r - 1, n);
    // Per chunk: the last receive, whose result the next send forwards.
    std::vector<int> got(nchunks, -1);
    // Per step, per chunk: the reduce-scatter send, which reads the block
    // the all-gather later overwrites.
    std::vector<int> rs_sent(static_cast<std::size_t>(std::max(n - 1, 0)) * nchunks, -1);
    auto at = [&](int s, std::int64_t j) {
      return static_cast<std::size_t>(s) * nchunks + static_cast<std::size_t>(j);
    };
    for (int s = 0; s < n - 1; ++s) {
      for (std::int64_t j = 0; j < chunks; ++j) {
        int& g = got[static_cast<std::size_t>(j)];
        // Step 0 sends the rank's own contribution, later steps what the
        // step before reduced.
        const Span own = piece(r - s, j);
        rs_sent[at(s, j)] = send_piece(b, r, next, s == 0 ? input(own) : own, {g});
        // Block r-s-1 is untouched so far on this rank: nothing to wait for,
        // and its contribution is still in Input.
        const Span blk = piece(r - s - 1, j);
        g = recv_reduce_piece_with(b, r, prev, input(blk), blk);
      }
    }
    for (int s = 0; s < n - 1; ++s) {
      for (std::int64_t j = 0; j < chunks; ++j) {
        int& g = got[static_cast<std::size_t>(j)];
        send_piece(b, r, next, piece(r + 1 - s, j), {g});
        // Block r-s was read by reduce-scatter's send at step s (which itself
        // followed the reduction into it): overwrite it only after that send.
        g = recv_piece(b, r, prev, piece(r - s, j), {rs_sent[at(s, j)]});
      }
    }
  }
  return b.finish();
}

// ReduceScatter: block k of every rank's Input must end up reduced in
// Output of rank k. Step s (0..n-2): rank r sends its partial sum of block
// r-s-1 and receives the partial of block r-s-2, adding its own Input to it;
// the last step receives block r itself.
//
// Input is read-only, so partials live in two slots used alternately: Output
// (for steps s with n-2-s even, so the last step lands there) and one block
// of Scratch. A slot is refilled two steps after its previous use, once the
// send that forwarded the old partial has completed.
Plan ring_reducescatter(const PlanArgs& args) {
  PlanBuilder b(args, "ring");
  const int n = args.nranks;
  const std::int64_t c = args.count;
  const std::int64_t chunks = num_chunks(args, c, kMaxChunksPerBlock);
  auto input = [&](int blk, std::int64_t j) {
    const Block ch = block(c, chunks, j);
    return in(ring_index(blk, n) * c + ch.offset, ch.count);
  };
  auto slot = [&](int s, std::int64_t j) {
    const Block ch = block(c, chunks, j);
    return (n - 2 - s) % 2 == 0 ? out(ch.offset, ch.count) : scratch(ch.offset, ch.count);
  };

  for (int r : b.ranks()) {
    const int next = ring_index(r + 1, n), prev = ring_index(r - 1, n);
    if (n == 1) {
      copy_piece(b, r, in(0, c), out(0, c));
      continue;
    }
    if (n > 2) b.need_scratch(r, c);
    std::vector<int> got(static_cast<std::size_t>(chunks), -1);   // last receive per chunk
    std::vector<int> sent(static_cast<std::size_t>(chunks), -1);  // last send per chunk
    for (int s = 0; s < n - 1; ++s) {
      for (std::int64_t j = 0; j < chunks; ++j) {
        auto& g = got[static_cast<std::size_t>(j)];
        auto& sn = sent[static_cast<std::size_t>(j)];
        // Step 0 forwards the rank's own contribution straight from Input.
        const Span src = s == 0 ? input(r - 1, j) : slot(s - 1, j);
        const int prev_send = sn;
        sn = send_piece(b, r, next, src, {g});
        // slot(s) == slot(s-2), last read by the send of step s-1.
        const int own = copy_piece(b, r, input(r - s - 2, j), slot(s, j), {prev_send});
        g = recv_reduce_piece(b, r, prev, slot(s, j), {own});
      }
    }
  }
  return b.finish();
}

// AllGather: step s, rank r forwards block r-s (its own at step 0) and
// receives block r-s-1, which it forwards at the next step.
// It reads its own block from Input (reads_input): step 0 sends it from
// there, and the copy into its place in Output is the rank's last step,
// which runs while the sends drain instead of before the first one.
Plan ring_allgather(const PlanArgs& args) {
  PlanBuilder b(args, "ring");
  b.reads_input();
  const int n = args.nranks;
  const std::int64_t c = args.count;
  const std::int64_t chunks = num_chunks(args, c, kMaxChunksPerBlock);
  auto piece = [&](int blk, std::int64_t j) {
    const Block ch = block(c, chunks, j);
    return out(ring_index(blk, n) * c + ch.offset, ch.count);
  };

  for (int r : b.ranks()) {
    const int next = ring_index(r + 1, n), prev = ring_index(r - 1, n);
    std::vector<int> got(static_cast<std::size_t>(chunks), -1);
    for (int s = 0; s < n - 1; ++s) {
      for (std::int64_t j = 0; j < chunks; ++j) {
        auto& g = got[static_cast<std::size_t>(j)];
        const Block ch = block(c, chunks, j);
        send_piece(b, r, next, s == 0 ? in(ch.offset, ch.count) : piece(r - s, j), {g});
        g = recv_piece(b, r, prev, piece(r - s - 1, j));
      }
    }
    copy_piece(b, r, in(0, c), out(static_cast<std::int64_t>(r) * c, c));
  }
  return b.finish();
}

// Broadcast: a pipelined chain root -> root+1 -> ... -> root-1. Every rank
// forwards chunk j as soon as it has it, so after the n-2 chunk times of the
// fill every link is busy: time ~ (n-2 + chunks) chunk times.
Plan ring_broadcast(const PlanArgs& args) {
  PlanBuilder b(args, "ring");
  const int n = args.nranks;
  const std::int64_t c = args.count;
  const std::int64_t chunks = num_chunks(args, c, kMaxChunksPerChain);

  for (int r : b.ranks()) {
    const int v = ring_index(r - args.root, n);  // position along the chain
    const int next = ring_index(r + 1, n), prev = ring_index(r - 1, n);
    for (std::int64_t j = 0; j < chunks; ++j) {
      const Block ch = block(c, chunks, j);
      const int got = v > 0 ? recv_piece(b, r, prev, out(ch.offset, ch.count)) : -1;
      if (v < n - 1) send_piece(b, r, next, out(ch.offset, ch.count), {got});
    }
  }
  b.root_reads_input();
  return b.finish();
}

// Reduce: the same pipelined chain run backwards into the root,
// root+1 -> root+2 -> ... -> root. Each rank adds its contribution to chunk
// j and passes it on; non-roots reduce into their private copy of Output.
// The chain reads contributions from Input (reads_input): its first rank
// sends from there, and each other combines its Input with what arrives.
Plan ring_reduce(const PlanArgs& args) {
  PlanBuilder b(args, "ring");
  if (reads_input_trivial(b)) return b.finish();
  const int n = args.nranks;
  const std::int64_t c = args.count;
  const std::int64_t chunks = num_chunks(args, c, kMaxChunksPerChain);

  for (int r : b.ranks()) {
    const int v = ring_index(r - args.root - 1, n);  // 0 starts the chain, n-1 is the root
    const int next = ring_index(r + 1, n), prev = ring_index(r - 1, n);
    for (std::int64_t j = 0; j < chunks; ++j) {
      const Block ch = block(c, chunks, j);
      const Span sum = out(ch.offset, ch.count);
      const int got = v > 0 ? recv_reduce_piece_with(b, r, prev, in(ch.offset, ch.count), sum) : -1;
      if (v < n - 1) send_piece(b, r, next, folded(sum, got), {got});
    }
  }
  return b.finish();
}

}  // namespace braid::plan
