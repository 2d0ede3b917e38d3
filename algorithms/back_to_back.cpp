// Calls issued back to back: what a benchmark's timed loop measures.
//
// A loop of blocking calls with no barrier between them (braid-bench,
// nccl-tests, the OSU benchmarks) does not time one call's latency: a rank
// starts call k+1 as soon as its own part of call k is done, so ranks that
// finish early run ahead. A broadcast's root, whose part ends when its last
// send does, starts the next broadcast while the leaves still receive this
// one; a loop of small broadcasts then costs about the root's sending time
// per call, not the depth of the tree (8-byte broadcast, 4 hosts x 2 ranks:
// 17 us a call in a loop, where one call takes 150, bench/RESULTS.md
// section 35).
//
// The plan built here is `calls` copies of the plan, rank by rank, one after
// the other. Copy k > 0 starts on each rank with a Copy step that depends on
// every step of that rank's copy k-1 (the call has returned) and carries the
// executor's copy into Output that begins each call (cost_model.cpp prices
// it for copy 0); each of the copy's steps without dependencies waits for
// it. Messages and signals of copy k keep their own slots (slot + k x the
// plan's slot span), so each matches its own call's partner, as the
// runtime's sequence numbers and counted signals make them. The simulator
// prices the result like any plan; it is never run or verified: the copies
// reuse the same buffers.
#include <algorithm>

#include "algorithms/cost_model.hpp"
#include "src/common/errors.hpp"

namespace braid::plan {

Plan back_to_back(const Plan& p, int calls, std::int64_t begin_copy) {
  if (calls < 1) fail(ErrorCode::InvalidArgument, "back_to_back: {} calls; expected at least 1", calls);
  Plan out = p;
  if (calls == 1) return out;
  std::int32_t slots = 0;
  for (const RankPlan& rp : p.ranks)
    for (const Step& s : rp.steps) slots = std::max(slots, s.slot + 1);
  for (std::size_t r = 0; r < p.ranks.size(); ++r) {
    const std::vector<Step>& one = p.ranks[r].steps;
    const auto m = static_cast<std::int32_t>(one.size());
    // The steps no later step of the rank depends on: the call has
    // returned on this rank once they have finished.
    std::vector<char> needed(one.size(), 0);
    for (const Step& s : one)
      for (std::int32_t d : s.deps) needed[static_cast<std::size_t>(d)] = 1;
    std::vector<Step>& steps = out.ranks[r].steps;
    std::int32_t last_base = 0;  // where the previous copy's steps begin
    for (int k = 1; k < calls; ++k) {
      Step begin;
      begin.kind = StepKind::Copy;
      begin.src = {Buf::Input, 0, begin_copy};
      begin.dst = {Buf::Output, 0, begin_copy};
      for (std::int32_t i = 0; i < m; ++i)
        if (!needed[static_cast<std::size_t>(i)]) begin.deps.push_back(last_base + i);
      const auto begin_at = static_cast<std::int32_t>(steps.size());
      steps.push_back(std::move(begin));
      const std::int32_t base = begin_at + 1;
      for (const Step& s : one) {
        Step c = s;
        c.slot += k * slots;
        for (std::int32_t& d : c.deps) d += base;
        if (c.deps.empty()) c.deps.push_back(begin_at);
        steps.push_back(std::move(c));
      }
      last_base = base;
    }
  }
  return out;
}

}  // namespace braid::plan
