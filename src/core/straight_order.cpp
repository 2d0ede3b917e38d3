// One order in which a rank can run a fast-box plan's steps one by one,
// blocking on each receive, without any rank waiting forever.
//
// The scheduler (StepSchedule) starts every ready step and waits on all
// pending receives at once; for a message plan of a few tiny messages its
// bookkeeping costs about as much as the messages. Fast-box sends never
// wait for their receiver (only for calls long past: one_sided.cpp), so a
// rank may instead follow a fixed list -- if the list never blocks a rank on
// a message whose sender is itself blocked behind it.
//
// Such lists come from running the whole plan in rounds: in each round every
// rank runs, in its list, whatever is ready -- sends first, then receives
// whose message was sent in an earlier round, then local steps, until
// nothing more is. By induction on rounds every step completes: a receive of
// round k waits only for a send of a round before k, and everything of those
// rounds completes. A plan that stalls gets no list (the scheduler runs it,
// and reports it).
#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "core/executor.hpp"

namespace braid {

std::vector<std::int32_t> straight_order(const plan::Plan& p, int rank) {
  const int n = static_cast<int>(p.ranks.size());
  using Msg = std::tuple<int, int, std::int32_t>;  // from, to, slot
  std::vector<std::vector<std::int32_t>> waiting(static_cast<std::size_t>(n));
  std::vector<std::vector<std::vector<std::int32_t>>> dependents(static_cast<std::size_t>(n));
  std::vector<std::vector<bool>> done(static_cast<std::size_t>(n));
  std::size_t left = 0;
  for (int r = 0; r < n; ++r) {
    const auto& steps = p.ranks[static_cast<std::size_t>(r)].steps;
    auto& wt = waiting[static_cast<std::size_t>(r)];
    auto& dp = dependents[static_cast<std::size_t>(r)];
    wt.assign(steps.size(), 0);
    dp.assign(steps.size(), {});
    done[static_cast<std::size_t>(r)].assign(steps.size(), false);
    left += steps.size();
    for (std::size_t i = 0; i < steps.size(); ++i) {
      for (auto d : steps[i].deps) {
        if (d < 0 || static_cast<std::size_t>(d) >= steps.size()) return {};
        ++wt[i];
        dp[static_cast<std::size_t>(d)].push_back(static_cast<std::int32_t>(i));
      }
    }
  }
  auto is_recv = [](plan::StepKind k) { return k == plan::StepKind::Recv || k == plan::StepKind::RecvReduce; };
  // 0: sends, 1: receives, 2: local steps -- the order of preference in a round.
  auto rank_of = [&](plan::StepKind k) { return k == plan::StepKind::Send ? 0 : is_recv(k) ? 1 : 2; };
  std::set<Msg> sent;  // in rounds before this one
  std::vector<std::int32_t> order;
  while (left > 0) {
    std::set<Msg> sent_now;
    bool progress = false;
    for (int r = 0; r < n; ++r) {
      const auto& steps = p.ranks[static_cast<std::size_t>(r)].steps;
      auto& wt = waiting[static_cast<std::size_t>(r)];
      auto& dn = done[static_cast<std::size_t>(r)];
      for (;;) {
        std::int32_t pick = -1;
        for (std::size_t i = 0; i < steps.size(); ++i) {
          const auto& s = steps[i];
          if (dn[i] || wt[i] != 0) continue;
          if (is_recv(s.kind) && !sent.count(Msg{s.peer, r, s.slot})) continue;
          if (pick < 0 || rank_of(s.kind) < rank_of(steps[static_cast<std::size_t>(pick)].kind))
            pick = static_cast<std::int32_t>(i);
        }
        if (pick < 0) break;
        const auto& s = steps[static_cast<std::size_t>(pick)];
        dn[static_cast<std::size_t>(pick)] = true;
        --left;
        progress = true;
        if (s.kind == plan::StepKind::Send) sent_now.insert(Msg{r, s.peer, s.slot});
        for (auto d : dependents[static_cast<std::size_t>(r)][static_cast<std::size_t>(pick)]) --wt[static_cast<std::size_t>(d)];
        if (r == rank) order.push_back(pick);
      }
    }
    if (!progress) return {};
    sent.insert(sent_now.begin(), sent_now.end());
  }
  return order;
}

}  // namespace braid
