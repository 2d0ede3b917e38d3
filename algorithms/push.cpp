// "push" all-reduce for one host: rank r reduces block r of every rank's
// Input and writes the result straight into every rank's Output, its own by
// the reduction and the peers' with Put. Each element is read once from
// every Input and written once into every Output: a rank reads N bytes and
// writes N, the floor of an all-reduce. "twoshot" moves more (5N bytes in
// all against 4N on 2 ranks), because its second phase reads each reduced
// block back out of its owner's Output (a Get) instead of having the owner
// deliver it.
//
// That floor needs the reduced bytes to go out while they are still in
// cache. The device runner fuses a rank's reduction chain with its Puts. On
// host memory the block is cut into chunks of about kHostChunkBytes, each
// reduced and then Put at once, so a Put reads its chunk from cache; whole
// blocks would be read back from memory once more, and push would move what
// twoshot moves. (A bare 2-process prototype, bench/probes/cma_allreduce,
// 16 MiB: 2.32-2.45 ms chunked against 2.57-2.58 for twoshot's schedule.)
// On host memory "staged" (staged.cpp) now does better still: the same
// schedule with every byte relayed through shared Scratch instead of
// process_vm_readv/writev, so the cost model picks it there; push is for
// device memory, and for mem_alloc buffers when named.
//
// Ranks sharing a GPU (Topology::device_of) split nothing between them: the
// lowest rank on each GPU reduces that GPU's share of the blocks for all of
// them, and the others only signal and wait. A GPU runs one process's work
// at a time, and every switch between processes costs far more than the
// kernels of a small block; with all ranks on one GPU a single kernel reads
// every Input once and writes every Output once. With device_of empty (host
// memory) every rank owns one block.
//
// Synchronisation, per pair of ranks:
//   entry: "my Input is readable and my Output writable" (a rank's buffers
//          are only valid once it has entered the call);
//   exit:  "I am done with your memory", after the last Put into the peer
//          (which follows every read of it); each rank leaves once every
//          peer has said so, so its Output holds every block by then and no
//          peer still reads its Input.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "algorithms/builder.hpp"
#include "algorithms/generators.hpp"

namespace braid::plan {

namespace {
// Host memory: chunks small enough to stay in L2 between their reduction and
// their Puts (the cost model prices such Puts as hot up to 1 MiB), and at
// most kMaxHostChunks of them per block (plans stay small for the verifier
// and the cache of plans). 2 ranks, 16 MiB, 4 alternating runs: 256 KiB
// chunks 2.45-2.59 ms (in place 1.92-2.17), 1 MiB 2.46-2.63 (2.32-2.54),
// twoshot 2.63-3.07 (2.30-2.66).
constexpr std::int64_t kHostChunkBytes = 256 * 1024;
constexpr std::int64_t kMaxHostChunks = 256;
std::int64_t host_chunks(std::int64_t count, std::size_t elem) {
  const std::int64_t bytes = count * static_cast<std::int64_t>(elem);
  return std::clamp<std::int64_t>((bytes + kHostChunkBytes - 1) / kHostChunkBytes, 1, kMaxHostChunks);
}
}  // namespace

// AllReduce (reads_input): Input holds the contribution, Output starts
// unwritten; in place they are one buffer, and the plan is right both ways:
// rank q's Input block r is read only by rank r, before r's Put overwrites
// it (in place it is q's Output block r).
//
// The order of the reduction: the own contribution first, then the peers'
// in rank order. Starting from the own block is what makes it correct in
// place without a staging copy: the first GetReduce reads Input[B_r] as its
// operand and writes Output[B_r], which is the same memory there, before
// anything else can. Strict rank order (x_0 op x_1 op ...) would overwrite
// x_r with x_0 first, or need x_r staged in Scratch, which plans on device
// memory do not get. Each block is reduced by one rank only, so every rank
// still holds the same bits; for ranks 0 and 1 the order is rank order
// (x_1 op x_0 == x_0 op x_1 for one op), so on 2 ranks the result is the
// one "oneshot" computes.
Plan push_allreduce(const PlanArgs& args) {
  PlanBuilder b(args, "push");
  if (reads_input_trivial(b)) return b.finish();
  const int n = args.nranks;
  const std::int64_t c = args.count;
  const auto u = [](int q) { return static_cast<std::size_t>(q); };
  // Which ranks own blocks: one per GPU when the ranks' GPUs are known.
  const std::vector<int>& dev = args.topology.device_of;
  std::vector<int> owner_index(u(n), -1);
  int owners = 0;
  for (int r = 0; r < n; ++r) {
    bool first_on_gpu = true;
    if (static_cast<int>(dev.size()) == n)
      for (int q = 0; q < r; ++q) first_on_gpu = first_on_gpu && dev[u(q)] != dev[u(r)];
    if (first_on_gpu) owner_index[u(r)] = owners++;
  }
  for (int r = 0; r < n; ++r) {
    // Entry round. Per pair, the exit signal and wait below follow these
    // (the runtime counts signals; plan.hpp).
    std::vector<int> ready(u(n), -1), entered(u(n), -1);
    for (int q = 0; q < n; ++q)
      if (q != r) ready[u(q)] = b.signal(r, q);
    for (int q = 0; q < n; ++q)
      if (q != r) entered[u(q)] = b.wait(r, q);

    // An empty block (count < n) has no data steps; its signals stay so that
    // every pair's signal counts match.
    const Block mine = owner_index[u(r)] < 0 ? Block{0, 0} : block(c, owners, owner_index[u(r)]);
    // Host memory: the block in chunks, each delivered right after it is
    // reduced, while it is still in cache (see the top).
    const std::int64_t chunks = dev.empty() ? host_chunks(mine.count, args.elem_size) : 1;
    std::vector<Deps> puts_into(u(n));
    for (std::int64_t k = 0; k < chunks && mine.count > 0; ++k) {
      const Block part = block(mine.count, chunks, k);
      const Span in_r = in(mine.offset + part.offset, part.count), out_r = out(mine.offset + part.offset, part.count);
      // Output[B_r] = Input[B_r] op every peer's Input[B_r], peers in rank order.
      int reduced = -1;
      for (int q = 0; q < n; ++q)
        if (q != r) reduced = b.get_reduce(r, q, in_r, reduced < 0 ? in_r : out_r, out_r, {entered[u(q)], reduced});
      // Deliver it: peers r+1, r+2, ... so that the ranks do not all write
      // into rank 0 first.
      for (int j = 1; j < n; ++j) {
        const int q = (r + j) % n;
        puts_into[u(q)].push_back(b.put(r, q, out_r, out_r, {reduced, entered[u(q)]}));
      }
    }

    // Exit round: done with q's memory once every Put into it has run.
    for (int q = 0; q < n; ++q)
      if (q != r) {
        Deps after = puts_into[u(q)];
        after.push_back(ready[u(q)]);
        b.signal(r, q, std::move(after));
      }
    for (int q = 0; q < n; ++q)
      if (q != r) b.wait(r, q, {entered[u(q)]});
  }
  return b.finish();
}

}  // namespace braid::plan
