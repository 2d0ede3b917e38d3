// The symbolic verifier: proves a plan correct for one set of PlanArgs
// without running any process.
//
// It checks, in order, and reports the first failure:
//  1. structure: spans inside their buffers (Input never written), peers in
//     range and not self, deps pointing to earlier steps of the same rank
//     (so the graph is acyclic), every Send meeting exactly one
//     Recv/RecvReduce with the same (sender, receiver, slot) and count; a
//     RecvReduce's acc, where given, lies in its own buffers, of dst's count,
//     either exactly dst or not overlapping it;
//  2. races: two steps of a rank with no dependency path between them must
//     not touch overlapping elements of one buffer where either writes (a
//     RecvReduce writes dst and reads acc);
//  3. semantics: the plan is executed symbolically. Each element holds a
//     value (a set of contributing ranks plus the element index it is for,
//     or "unwritten"); reading an unwritten element, combining values for
//     different indices or counting a rank twice is an error; so is a
//     deadlock. A message moves when both its Send and its Recv are ready
//     (rendezvous): real transports block large sends until the receiver
//     posts, so a plan that only works with unbounded buffering is rejected.
//  4. the result: every element the buffer contract requires holds exactly
//     the right value; for a barrier, every rank has (transitively through
//     messages) heard from every other before its last step finishes.
//
// One-sided plans (plan.hpp, "One-sided steps") are checked the same way,
// plus:
//  1'. structure: the plan is all messages or all one-sided steps and says so
//     (Plan::one_sided); every Signal meets exactly one Wait with the same
//     (sender, receiver, slot); a Get/GetReduce source lies in the PEER's
//     buffer, its destination and operand (acc) in its own, all of one count,
//     with acc either exactly dst or not overlapping it; a Put's source lies
//     in its own buffers and its destination in the PEER's Output or Scratch
//     (never Input; sized as that peer's), of one count; each rank's signals
//     to one peer, and its waits on one peer, are ordered by deps in slot
//     order (the runtime counts signals instead of tagging them);
//  2'. races: within a rank as above (a Get writes dst, a GetReduce also
//     reads acc, a Put reads src); across ranks, with happens-before = deps
//     plus Signal -> Wait: a Get/GetReduce of a span of peer p is ordered
//     with every step of p that writes it; a Put into it is ordered with
//     every step of p that reads or writes it and with every other access
//     (Get/GetReduce/Put, by any rank) to it; p has signalled (it entered
//     the call) before any access to its memory; a read of p's Input/Output,
//     and any write into p, happens before some step of p (p cannot return,
//     and reuse the buffer or hand back a result, first); a p whose Scratch
//     is read or written waits on that rank somewhere (Scratch is
//     double-buffered across calls);
//  3'. semantics: a Wait runs once its Signal was issued, a Get copies the
//     peer's current values and a Put sets them (2' makes these the only
//     possible ones), a GetReduce combines like RecvReduce; a Wait whose
//     Signal can never be issued is a deadlock.
// A reads_input plan (AllReduce/Reduce reading Input[count], a Broadcast
// root reading it) is verified twice: with Input and Output distinct, then
// in place, with every Input span being the Output span at the same offset
// (writes to Output, a peer's Put included, change what Input reads
// return; 2' treats them as one buffer); both must pass, and a failure of
// the second says "in place".
//
// Cost is independent of `count`: buffers are kept as runs of consecutive
// values, so a 1M-element plan verifies as fast as a 1K one with the same
// steps. Groups of up to 64 ranks are supported.
#pragma once

#include <string>

#include "algorithms/plan.hpp"

namespace braid::plan {

inline constexpr int kMaxVerifyRanks = 64;

struct VerifyResult {
  bool ok = true;
  std::string error;  // empty when ok; otherwise what failed, where
};

VerifyResult verify(const Plan& plan);

}  // namespace braid::plan
