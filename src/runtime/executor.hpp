// The plan executor: runs one rank's steps of a plan over the engine.
//
// Steps start as soon as their dependencies are done: sends and receives are
// posted at once (they may be many in flight), local copies and reductions
// run inline. A RecvReduce receives into a private staging slice, then
// reduces into its destination when the message has arrived. Each message's
// tag is (collective sequence number, slot), so successive or concurrent
// collectives on one group never match each other's messages.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "braid/error.hpp"
#include "braid/ops.hpp"
#include "braid/tensor.hpp"
#include "src/common/time.hpp"
#include "src/runtime/context.hpp"
#include "algorithms/plan.hpp"
#include "transports/one_sided.hpp"

namespace braid {

// A plan prepared for execution by one rank: its steps, plus the reverse
// edges and staging layout the executor needs, computed once and cached.
struct CompiledPlan {
  std::shared_ptr<const plan::Plan> plan;
  int rank = 0;                         // whose steps
  std::vector<std::int32_t> dep_count;  // per step
  std::vector<std::int32_t> next_begin, next;  // dependents, CSR
  std::vector<std::int64_t> stage_offset;      // RecvReduce: staging offset (elements)
  std::int64_t stage_count = 0;
  // One-sided plans: whether some peer reads this rank's Input / reads or
  // writes its Output (they are then described to peers each call), and how
  // many Waits this rank has on each peer (the window's counts advance by
  // that per call).
  bool peers_use_input = false, peers_use_output = false;
  std::vector<std::uint32_t> waits_on;
  // One-sided plans: nothing reads this rank's Output during the call, not
  // its own steps and not its peers; each write of it is final, so a large
  // one may bypass the cache (one_sided.cpp, streaming).
  bool output_write_only = false;
  // One-sided plans: elements this rank copies into its own Scratch (Copy
  // steps), for a peer to take: the hand-offs whose stores may go through
  // the cache or through memory (handoff.hpp).
  std::int64_t scratch_copy_count = 0;
  // All-gather: this rank's steps touch its Output only within one rank's
  // block at a time, and no peer reaches it, so the blocks may be separate
  // tensors (ExecBuffers::output_blocks: the list form, without staging).
  bool output_in_blocks = false;
  // A message plan run over the window's fast boxes (plan.hpp,
  // fits_fastbox) by the one-sided runner: per step, where its message
  // starts in the pair's box (lines; -1 for local steps).
  bool fastbox = false;
  std::vector<std::int32_t> box_line;
  // Fast-box plans: this rank's steps in an order it may run them one by
  // one, blocking on each receive (straight_order); empty: the scheduler.
  std::vector<std::int32_t> order;
  // A hash of what every rank must agree on for this call (collective,
  // group size, count, element size, root, algorithm), never 0. Plans the
  // one-sided runner runs carry it in their buffer descriptors and fast-box
  // flags, so a rank that passed other arguments is named, not read.
  std::uint32_t shape = 1;
  // What the call's messages carry (Envelope::shape): `shape`, except where
  // ranks' plans legitimately differ (uneven all-to-all).
  std::uint32_t message_shape = 1;
  const plan::RankPlan& steps() const { return plan->ranks[static_cast<std::size_t>(rank)]; }
  // Run by the one-sided runner (one_sided.cpp), in the group's turn order.
  bool runs_one_sided() const { return plan->one_sided || fastbox; }
};
// `fastbox`: the group's ranks share a host (and may use its shared memory),
// so a message plan that fits the fast boxes runs over them.
std::shared_ptr<const CompiledPlan> compile_plan(std::shared_ptr<const plan::Plan> p, int rank, bool fastbox = false);
// An order of `rank`'s steps of the message plan `p` that it can run one at
// a time, blocking on each receive, while every rank does the same with its
// own, if sends never block (fast boxes): empty when the plan stalls.
std::vector<std::int32_t> straight_order(const plan::Plan& p, int rank);

// Which steps of one call may start: the dependency counts and the ready
// list. Both executors (messages here, one-sided in one_sided.cpp) schedule
// with it; each thread keeps one per executor, so a call allocates nothing.
class StepSchedule {
 public:
  // A new call of `plan`: every step without dependencies is ready.
  void begin(const CompiledPlan& plan);
  // Starts ready steps (start(i) may finish() steps, making more ready)
  // until none is left.
  // Steps that only post or announce something (signals, waits, sends,
  // receives) start before steps that move data: a rank that finds a peer's
  // signal already there must not reduce megabytes before sending its own,
  // while the peer waits for it.
  // Steps that move data start in plan order, the lowest index first: the
  // builder writes a pipeline as chunk j's copy, its signal, chunk j+1's...,
  // so when several chunks become ready at once (a peer's signals found
  // together), chunk j is moved and announced first. Taking the last made
  // ready first instead moved them in reverse, and since a pair's signals
  // are chained, announced none until the last: a 2-rank staged broadcast
  // of 64 MiB ran in lockstep batches of 16 chunks, one side idle while the
  // other copied (bench/RESULTS.md section 42).
  template <class Start>
  void start_ready(Start&& start) {
    for (;;) {
      std::int32_t i;
      if (!urgent_.empty()) {
        i = urgent_.back();
        urgent_.pop_back();
      } else if (!ready_.empty()) {
        std::pop_heap(ready_.begin(), ready_.end(), std::greater<>{});
        i = ready_.back();
        ready_.pop_back();
      } else {
        return;
      }
      start(i);
    }
  }
  // Step i is done: the steps waiting only for it become ready.
  void finish(std::int32_t i);
  bool all_done() const { return done_ == total_; }
  // Nothing is ready or in flight, yet steps remain: a broken plan.
  [[noreturn]] void stalled(const char* what) const;

 private:
  const CompiledPlan* plan_ = nullptr;
  void make_ready(std::int32_t i);
  std::vector<std::int32_t> waiting_, urgent_;
  std::vector<std::int32_t> ready_;  // a min-heap of step indices
  std::size_t done_ = 0, total_ = 0;
};

struct ExecBuffers {
  const void* input = nullptr;
  void* output = nullptr;
  // Output as separate blocks of block_count elements each (nblocks of
  // them), when the plan allows it (CompiledPlan::output_in_blocks).
  char* const* output_blocks = nullptr;
  std::int64_t block_count = 0;
  std::int64_t nblocks = 0;
};

// Where a plan's span lies in this rank's memory (nullptr for a buffer the
// rank does not have); both runners resolve spans through it.
inline char* span_ptr(const ExecBuffers& b, char* scratch, std::size_t elem, const plan::Span& s) {
  char* base = nullptr;
  switch (s.buf) {
    case plan::Buf::Input: base = const_cast<char*>(static_cast<const char*>(b.input)); break;
    case plan::Buf::Output:
      if (b.output_blocks) {
        // An empty span may sit just past the last block: it stays there.
        const std::int64_t blk = std::min(s.offset / b.block_count, b.nblocks - 1);
        return b.output_blocks[blk] + static_cast<std::size_t>(s.offset - blk * b.block_count) * elem;
      }
      base = static_cast<char*>(b.output);
      break;
    case plan::Buf::Scratch: base = scratch; break;
  }
  return base ? base + static_cast<std::size_t>(s.offset) * elem : nullptr;
}

struct ExecCall {
  const CompiledPlan* plan = nullptr;
  detail::GroupImpl* group = nullptr;
  ExecBuffers buffers;
  DType dtype = DType::Float32;
  ReduceOp op = ReduceOp::Sum;
  std::uint64_t seq = 0;
  Millis timeout{0};
  Deadline deadline{};
  const char* what = "collective";  // for error messages
  std::uint64_t ticket = 0;  // one-sided plans: the call's turn on the group
  // One-sided plans on CUDA device memory (CUDA IPC between the ranks):
  // the buffers are on this device (-1: host memory), and device work is
  // ordered on this stream (a cudaStream_t; nullptr is the legacy default).
  int device = -1;
  void* stream = nullptr;
};

// The call's fingerprint: what a peer must run alike, as one word carried
// by every message of the call (Envelope::shape) and published with its
// buffers, fast-box flags and Ledger::doing: the plan's shape (20 bits of
// it: collective, group size, count, element size, root, algorithm) over
// the collective, the reduce op and the dtype (4 bits each, + 1), which
// plans shared between dtypes of one size do not include. A fast-box flag
// word keeps its low 17 bits, the low byte whole, so a peer's dtype and op
// can be read back from any of them (other_arguments).
inline std::uint32_t shape_of(const ExecCall& c) {
  return (c.plan->shape << 12) | ((static_cast<std::uint32_t>(c.plan->plan->args.coll) + 1) << 8) |
         ((static_cast<std::uint32_t>(c.op) + 1) << 4) | (static_cast<std::uint32_t>(c.dtype) + 1);
}
inline std::uint32_t message_shape_of(const ExecCall& c) {
  return (c.plan->message_shape << 12) | (shape_of(c) & 0xfff);
}
// Whether a peer's fingerprint has this call's collective, op and dtype.
bool same_call_kind(const ExecCall& call, std::uint32_t theirs);
// The error for peer `who` (a global rank) whose call has fingerprint
// `theirs` where this rank runs `call`: names what differs where the word
// tells (collective, dtype, op), else says counts, root or algorithm.
Error other_arguments(const ExecCall& call, int who, std::uint32_t theirs);

// Runs the plan to completion on the calling thread; throws braid::Error on
// timeout or failure (after withdrawing whatever it still had in flight).
void execute(Engine& engine, const ExecCall& call);
// The same for one-sided plans and fast-box message plans (one_sided.cpp);
// execute() hands them over.
void execute_one_sided(Engine& engine, const ExecCall& call);
// The group's one-sided window (GroupImpl::window_kind), made on first use.
// On one host every member's first collective makes it, whatever its plan:
// a rank running a call as messages must be visible to a peer that runs it
// through the window (Ledger::doing).
onesided::Window& group_window(Engine& engine, detail::GroupImpl& g, Deadline deadline);
// "1, 3": the distinct ranks, ascending, for "waiting for rank(s) ..."
// (several requests or waits on one peer name it once).
std::string rank_list(std::vector<int> ranks);
// The error for a peer (world rank) that runs this call the other way: on
// the engine as messages, or through the group's window (it passed other
// counts, so its plan is of the other kind).
Error runs_otherwise(const ExecCall& call, int peer, bool peer_through_window);
// The error for a peer that marked its window failed (f): its error, with
// its code, naming the rank its error names (a dead peer stays the one
// named), else (nobody, or this rank) the peer that gave up. A failure it
// names is recorded first (failed_ranks() then holds it).
[[noreturn]] void throw_peer_gave_up(Engine& e, const onesided::Window& w, int peer, const onesided::Failure& f,
                                     const ExecCall& call);
// Peer q of window w is gone: if it said it had learned of a failure first
// (Ledger::knew_failed), that failure is noted, before q's own: it is why q
// left. True if it said so.
bool left_knowing(Engine& e, const onesided::Window& w, int q);
// The window if it is made, else nullptr.
onesided::Window* ready_window(detail::GroupImpl& g);
// Which call this is, for Ledger::doing: its ticket (one-sided runner) or
// the tickets taken before it (message plans), and its sequence number
// (message plans) or the sequence numbers taken before it (one-sided). Two
// ranks running the same call agree on both whichever way each runs it, as
// long as their earlier calls agreed in kind; a message call issued just
// before a one-sided one differs from it in the second.
inline std::uint64_t call_identity(const ExecCall& c) {
  return std::uint64_t{1} << 63 | (c.ticket & 0x7fffffffu) << 32 | (c.seq & 0xffffffffu);
}
// Says in the window what this rank runs (Ledger::doing) while it lives.
class Doing {
 public:
  Doing(onesided::Window& w, bool one_sided, const ExecCall& c) : w_(w.ledger()), one_sided_(one_sided) {
    w_.doing(one_sided_, call_identity(c), shape_of(c));
  }
  ~Doing() { w_.doing(one_sided_, 0); }
  Doing(const Doing&) = delete;
  Doing& operator=(const Doing&) = delete;

 private:
  onesided::Ledger& w_;
  bool one_sided_;
};
// A call with a turn (runs_one_sided) that failed before it could run:
// waits for its turn, marks the group's window failed with `why` (peers may
// wait for this rank's part) and hands the turn on.
void abandon_one_sided(Engine& engine, const ExecCall& call, const std::exception_ptr& why);

}  // namespace braid
