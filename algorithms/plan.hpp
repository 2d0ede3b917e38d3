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
//   RecvReduce  receive from peer, dst = dst (op) received;
//   Copy        dst = src (local);
//   Reduce      dst = dst (op) src (local).
// A Send and a Recv/RecvReduce match when (sender, receiver, slot) are equal;
// their counts must be equal. Slots are unique per ordered pair of ranks in a
// plan. A step may start once every step in `deps` (indices into the same
// rank's list) has completed; steps with no path between them may run
// concurrently, so they must not touch overlapping memory where one writes.
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

enum class StepKind : std::uint8_t { Send, Recv, RecvReduce, Copy, Reduce };
const char* step_kind_name(StepKind k);

struct Step {
  StepKind kind = StepKind::Send;
  int peer = -1;      // group rank; Send/Recv/RecvReduce only
  std::int32_t slot = 0;  // message id between (sender, receiver)
  Span src;           // Send, Copy, Reduce
  Span dst;           // Recv, RecvReduce, Copy, Reduce
  std::vector<std::int32_t> deps;
};

struct RankPlan {
  std::vector<Step> steps;
  std::int64_t scratch_count = 0;  // elements
};

// Physical facts the choice may use. Filled by the runtime; plans must be
// correct whatever it says.
struct Topology {
  std::vector<int> host_of;  // host index per group rank (empty: unknown)
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
};

struct Plan {
  Collective coll = Collective::AllReduce;
  std::string algorithm;
  PlanArgs args;
  std::vector<RankPlan> ranks;  // one per group rank
};

// Element counts of each buffer for `rank` under the buffer contract.
std::int64_t input_count(const PlanArgs& a, int rank);
std::int64_t output_count(const PlanArgs& a, int rank);
// Whether the collective combines values with a reduce op.
bool is_reduction(Collective c);

// Human-readable dump, one line per step (braid-sim --plan).
std::string to_string(const Plan& p);
std::string to_string(const Step& step);  // one line of the above

}  // namespace braid::plan
