// Plan: what an algorithm emits. A plan is pure data: for each rank of the
// group, a list of steps over element ranges of three buffers, with the
// dependencies between steps. The same plan is executed by the engine,
// checked by the verifier, timed by the cost model and printed.
//
// Buffers, in elements of the call's dtype (never bytes):
//   Input   the rank's input, read-only;
//   Output  the rank's output; the executor initialises it before step 0
//           (see "Buffer contract" below), the plan leaves the result in it;
//   Scratch plan-private memory of RankPlan::scratch_count elements.
//
// Buffer contract per collective (n = group size, c = PlanArgs::count):
//   Broadcast      Output[c]; on root it holds the data at start.
//   AllReduce      Output[c] holds the rank's own contribution at start.
//   Reduce         Output[c] holds the rank's own contribution at start
//                  (on non-roots the executor gives the plan a private copy);
//                  only root's Output must hold the result at the end.
//   AllGather      Input[c]; Output[n*c] with the rank's block already in
//                  Output[r*c, (r+1)*c) at start.
//   Gather         Input[c]; on root, Output[n*c] with root's own block
//                  already in place; non-roots have no Output.
//   Scatter        on root Input[n*c]; Output[c] (root's own block is
//                  already in place at start).
//   ReduceScatter  Input[n*c] (read-only); Output[c] starts unwritten and
//                  must end holding block r reduced over all ranks.
//   AllToAll       Input[n*c]; Output[n*c] with block r (from itself)
//                  already in place. Uneven splits use PlanArgs::splits.
//   Barrier        no data; zero-element messages only.
//
// Step semantics (peers are group ranks):
//   Send        send src to peer;
//   Recv        receive from peer into dst;
//   RecvReduce  receive from peer, dst = acc (op) received; acc is a local
//               span of dst's count, or empty (the default) for dst itself:
//               Input there spares a reads_input plan the copy of the
//               contribution into Output;
//   Copy        dst = src (local);
//   Reduce      dst = acc (op) src (local); acc as for RecvReduce, empty
//               for dst itself.
// A Send and a Recv/RecvReduce match when (sender, receiver, slot) are equal;
// their counts must be equal. Slots are unique per ordered pair of ranks in a
// plan. A step may start once every step in `deps` (indices into the same
// rank's list) has completed; steps with no path between them may run
// concurrently, so they must not touch overlapping memory where one writes.
//
// One-sided steps (ranks that reach each other's memory: one host, shared
// memory, or RDMA; see Topology::one_host and Topology::rdma):
//   Signal     tell peer that every step this one depends on is done;
//   Wait       done once peer's Signal with the same slot has been issued;
//   Get        dst = peer's src (src names a span of the PEER's buffers);
//   GetReduce  dst = acc (op) peer's src; acc is a local span of dst's count
//              (it may be dst itself, or Input to spare a copy);
//   Put        peer's dst = src (src is LOCAL, dst names a span of the
//              PEER's Output or Scratch, never its Input): the write that
//              lets one rank deliver a result to every rank in one pass.
// Signal/Wait match like Send/Recv on (sender, receiver, slot). A plan uses
// messages or one-sided steps, never both. Signals from one rank to one peer
// must be ordered by deps, and so must that peer's Waits on it, in the same
// slot order (the runtime counts signals; it does not tag them).
// Rules the verifier enforces for one-sided plans ("hb" = happens-before
// through deps and Signal->Wait edges):
//   - a peer's span is read only where every write of it by its owner is hb
//     the read or the read is hb the write (no race across ranks);
//   - a Put into a peer's span is ordered (hb one way or the other) with
//     every step of that peer, and every other Get/GetReduce/Put of any
//     rank, that reads or writes overlapping memory of the peer;
//   - a Get/GetReduce/Put of a peer's memory has a Signal of that peer hb
//     it (the peer has entered the call; its buffers are only valid then);
//   - a Get of a peer's Input or Output, and a Put into a peer's Output or
//     Scratch, is hb some step of that peer, so the owner does not return
//     (and let the caller reuse the buffer) before it;
//   - a rank whose Scratch a peer reads or writes must Wait on that peer
//     somewhere in the plan: the runtime double-buffers Scratch across
//     calls, and that Wait is what keeps call k+2 from touching what a peer
//     still reads or writes in call k.
// Peers' Scratch of one-sided plans lives in shared memory.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "braid/ops.hpp"
#include "braid/tensor.hpp"

namespace braid::plan {

enum class Collective : std::uint8_t {
  Broadcast,
  AllReduce,
  Reduce,
  AllGather,
  Gather,
  Scatter,
  ReduceScatter,
  AllToAll,
  Barrier,
};
inline constexpr int kNumCollectives = 9;
const char* collective_name(Collective c);  // "allreduce", "broadcast", ... (NCCL spelling)
// Parses NCCL's spelling ("allreduce", "reducescatter", ...); false if unknown.
bool parse_collective(const std::string& name, Collective* out);

enum class Buf : std::uint8_t { Input, Output, Scratch };

struct Span {
  Buf buf = Buf::Output;
  std::int64_t offset = 0;  // elements
  std::int64_t count = 0;   // elements
};

// New kinds go at the end: the values are stable (runtimes switch on them).
enum class StepKind : std::uint8_t { Send, Recv, RecvReduce, Copy, Reduce, Signal, Wait, Get, GetReduce, Put };
// Signal, Wait, Get, GetReduce, Put
bool is_one_sided(StepKind k);
const char* step_kind_name(StepKind k);

struct Step {
  StepKind kind = StepKind::Send;
  int peer = -1;      // group rank; all kinds but Copy/Reduce
  std::int32_t slot = 0;  // message/signal id between (sender, receiver)
  Span src;           // Send, Copy, Reduce, Put; Get/GetReduce: the peer's span
  Span dst;           // Recv, RecvReduce, Copy, Reduce, Get, GetReduce; Put: the peer's span
  Span acc;           // GetReduce, RecvReduce, Reduce: the local operand (may equal dst; empty: dst)
  std::vector<std::int32_t> deps;
};

// The local operand a GetReduce, RecvReduce or Reduce combines with: acc, or
// dst where acc is empty (a RecvReduce or Reduce that accumulates in place).
inline const Span& operand(const Step& s) { return s.acc.count > 0 ? s.acc : s.dst; }

struct RankPlan {
  std::vector<Step> steps;
  std::int64_t scratch_count = 0;  // elements
};

// Physical facts the choice may use. Filled by the runtime; plans must be
// correct whatever it says.
struct Topology {
  std::vector<int> host_of;  // host index per group rank (empty: unknown)
  // Every rank can map every other's memory (one host, shared-memory
  // transport): one-sided plans are possible. Their `supports` checks it.
  bool one_host = false;
  // Not one host, but every pair of ranks is joined by an RDMA window
  // (backend 'verbs', transports/verbs/window.hpp): one-sided plans run over
  // RDMA READ and WRITE, and every Get or Put crosses a link.
  bool rdma = false;
  // Ranks of one host reach each other through shared memory (backend
  // 'auto', 'shm', 'cuda'); otherwise through what the backend forces. Only
  // prices the pairs of a group that spans hosts (cost_model.hpp, LinkCosts).
  bool host_shares_memory = false;
  // Plans on CUDA device memory: an index per group rank naming its GPU
  // (ranks with equal indices share one). Empty: host memory, or unknown.
  // Ranks sharing a GPU gain nothing from splitting device work between
  // them (the GPU time-slices between processes, and each switch costs).
  std::vector<int> device_of;
  // One host whose ranks outnumber its CPUs (src/runtime/cpu_sets.hpp): a
  // rank that waits for a peer mostly waits for that peer to be scheduled,
  // so every round of signals or messages costs a context switch. Every
  // rank of a one-host group computes it from the same CPU lists.
  bool shared_cpus = false;
  // One host, and every rank's Input and Output are shareable memory
  // (braid::mem_alloc; OpOptions::shareable_buffers): a peer reaches them
  // through a mapping, at the cost of a local copy, not process_vm_readv.
  bool mapped_buffers = false;
  // Hosts emulated on one machine (network namespaces of one kernel) share
  // its CPUs: the machine index per group rank (empty: each host a machine
  // of its own) and how many CPUs that machine has. Between two such hosts
  // TCP is the kernel copying on both ends, and the machine's CPUs carry
  // every stream at once: a link faster than that (an unshaped veth) is
  // not what a collective gets (cost_model.hpp). braid-sim --machine-cpus
  // prices with it; the runtime's choice does not (tools/braid_sim.cpp,
  // runtime_choice, says why).
  std::vector<int> machine_of;
  int machine_cpus = 0;
  // One TCP stream's time per byte between two of its namespaces, as
  // measured (iperf3, unshaped); 0: kMachineStreamSPerByte.
  double machine_stream_s_per_byte = 0;
};

struct PlanArgs {
  Collective coll = Collective::AllReduce;
  int nranks = 1;
  std::int64_t count = 0;  // see the buffer contract
  std::size_t elem_size = 4;  // bytes per element: algorithms size chunks with it
  int root = 0;               // group rank
  // AllToAll with uneven splits: splits[i][j] = elements rank i sends rank j
  // (empty for the even case, where every block has `count` elements).
  std::vector<std::vector<std::int64_t>> splits;
  Topology topology;
  // >= 0: build only this rank's steps (a slice). The plan still has one
  // RankPlan per rank, the others empty. A rank's slice holds exactly the
  // steps, slots and deps of its list in the whole plan (test_plan_slices),
  // so ranks that each build their own slice run one plan. Building a slice
  // costs about the rank's own steps where the algorithm loops over
  // PlanBuilder::ranks(), not the whole plan's: what a rank of a large world
  // builds (bench/plan_scale). Only for message plans between hosts: the
  // fast boxes and one-sided plans read the other ranks' lists.
  int slice_rank = -1;
};

struct Plan {
  Collective coll = Collective::AllReduce;
  std::string algorithm;
  PlanArgs args;
  std::vector<RankPlan> ranks;  // one per group rank
  // AllReduce and Reduce: false (the contract above): Output holds the
  // rank's contribution at start. true: Input[count] holds it (read-only)
  // and Output starts unwritten, sparing the copy of a large input; for an
  // in-place call Input and Output are the same memory, so the plan must be
  // correct both ways (the verifier checks both).
  // Broadcast: true: the root's data is in its Input[count] (read-only)
  // and its Output starts unwritten (PlanBuilder::root_reads_input).
  // AllGather: true: the rank's own block of Output starts unwritten too,
  // and the plan fills it. In place Input is that block, so the verifier
  // requires every write into it to be the rank's own Copy from Input at
  // the same place (the identity there, which the runtime skips).
  bool reads_input = false;
  // Uses one-sided steps (set by the builder; the executor runs such plans
  // on the one-host runtime, not on messages).
  bool one_sided = false;
};

// Fast boxes. Between ranks of one host, a message plan whose messages are
// small runs without the engine: each ordered pair of ranks has a box of
// kFastboxLines cache lines in the receiver's shared-memory block, per call.
// A line carries 56 bytes of a message and, in its last 8 bytes, a flag word
// the receiver polls (so data and "it has arrived" travel in one line for
// messages up to 56 bytes). Those 8 bytes never hold data: the word a reader
// polls holds a flag of this call or of an older one, never another call's
// data, whatever layout that call had. The pair's messages of one call lie
// one after the other in slot order, each from a line boundary.
inline constexpr std::int64_t kFastboxLines = 80;
inline constexpr std::int64_t kFastboxLineBytes = 56;  // data per line
// Cache lines a message of `bytes` occupies in a box (at least one: its flag).
constexpr std::int64_t fastbox_lines(std::int64_t bytes) {
  return bytes <= 0 ? 1 : (bytes + kFastboxLineBytes - 1) / kFastboxLineBytes;
}
// Whether every ordered pair's messages of `p` fit one box: then the plan
// runs over fast boxes on one host. False for one-sided plans, and for
// uneven all-to-all, where a rank's plan knows only its own row and column
// of the splits: every rank must decide alike, and decides from the whole
// plan, so the plan must be the same on every rank.
bool fits_fastbox(const Plan& p);

// AllToAll splits are empty (even) or nranks rows of nranks non-negative counts.
bool splits_well_formed(const PlanArgs& a);

// Element counts of each buffer for `rank` under the buffer contract.
std::int64_t input_count(const PlanArgs& a, int rank);
// The same for a built plan: a reads_input plan's Input holds the count.
std::int64_t input_count(const Plan& p, int rank);
std::int64_t output_count(const PlanArgs& a, int rank);
// Whether the collective combines values with a reduce op.
bool is_reduction(Collective c);

// Human-readable dump, one line per step (braid-sim --plan).
std::string to_string(const Plan& p);
std::string to_string(const Step& step);  // one line of the above

}  // namespace braid::plan
