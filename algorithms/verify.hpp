// The symbolic verifier: proves a plan correct for one set of PlanArgs
// without running any process.
//
// It checks, in order, and reports the first failure:
//  1. structure: spans inside their buffers (Input never written), peers in
//     range and not self, deps pointing to earlier steps of the same rank
//     (so the graph is acyclic), every Send meeting exactly one
//     Recv/RecvReduce with the same (sender, receiver, slot) and count;
//  2. races: two steps of a rank with no dependency path between them must
//     not touch overlapping elements of one buffer where either writes;
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
// Cost is independent of `count`: buffers are kept as runs of consecutive
// values, so a 1M-element plan verifies as fast as a 1K one with the same
// steps. Groups of up to 64 ranks are supported.
#pragma once

#include <string>

#include "plan.hpp"

namespace braid::plan {

inline constexpr int kMaxVerifyRanks = 64;

struct VerifyResult {
  bool ok = true;
  std::string error;  // empty when ok; otherwise what failed, where
};

VerifyResult verify(const Plan& plan);

}  // namespace braid::plan
