// "push" all-reduce for one host: rank r reduces block r of every rank's
// Input and writes the result straight into every rank's Output, its own by
// the reduction and the peers' with Put. Each element is read once from
// every Input and written once into every Output: a rank reads N bytes and
// writes N, the floor of an all-reduce. "twoshot" moves more (5N bytes in
// all against 4N on 2 ranks), because its second phase reads each reduced
// block back out of its owner's Output (a Get) instead of having the owner
// deliver it.
//
// That floor needs a runtime that fuses the reduction chain of a rank with
// its Puts (load every input once, store to every output once), as the
// device runner does. Run step by step, the Puts read the reduced block back
// once more, so on the CPU push moves what twoshot moves and wins only by one
// signal round fewer (two rounds instead of three).
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
#include <cstdint>
#include <vector>

#include "builder.hpp"
#include "generators.hpp"

namespace braid::plan {

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
    std::vector<int> ready(u(n), -1), entered(u(n), -1), last_touch(u(n), -1);
    for (int q = 0; q < n; ++q)
      if (q != r) ready[u(q)] = b.signal(r, q);
    for (int q = 0; q < n; ++q)
      if (q != r) entered[u(q)] = b.wait(r, q);

    // An empty block (count < n) has no data steps; its signals stay so that
    // every pair's signal counts match.
    const Block mine = owner_index[u(r)] < 0 ? Block{0, 0} : block(c, owners, owner_index[u(r)]);
    if (mine.count > 0) {
      const Span in_r = in(mine.offset, mine.count), out_r = out(mine.offset, mine.count);
      // Output[B_r] = Input[B_r] op every peer's Input[B_r], peers in rank order.
      int reduced = -1;
      for (int q = 0; q < n; ++q)
        if (q != r) reduced = b.get_reduce(r, q, in_r, reduced < 0 ? in_r : out_r, out_r, {entered[u(q)], reduced});
      // Deliver it: peers r+1, r+2, ... so that the ranks do not all write
      // into rank 0 first.
      for (int k = 1; k < n; ++k) {
        const int q = (r + k) % n;
        last_touch[u(q)] = b.put(r, q, out_r, out_r, {reduced, entered[u(q)]});
      }
    }

    // Exit round: done with q's memory once the Put into it has run.
    for (int q = 0; q < n; ++q)
      if (q != r) b.signal(r, q, {ready[u(q)], last_touch[u(q)]});
    for (int q = 0; q < n; ++q)
      if (q != r) b.wait(r, q, {entered[u(q)]});
  }
  return b.finish();
}

}  // namespace braid::plan
