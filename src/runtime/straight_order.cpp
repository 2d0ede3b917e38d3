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
// rank runs whatever of its steps is ready -- sends first, then local steps
// (one may lead to a send), then receives whose message was sent in an
// earlier round -- until nothing more is. By induction on rounds every step
// completes: a receive of round k waits only for a send of a round before k,
// and everything of those rounds completes. A plan that stalls gets no list
// (the scheduler runs it, and reports it). The run is event-driven: each
// step is touched once per dependency, so the cost is linear in the plan.
#include <array>
#include <deque>
#include <unordered_map>

#include "src/runtime/executor.hpp"

namespace braid {

namespace {
bool is_recv(plan::StepKind k) { return k == plan::StepKind::Recv || k == plan::StepKind::RecvReduce; }
int queue_of(plan::StepKind k) { return k == plan::StepKind::Send ? 0 : is_recv(k) ? 2 : 1; }
}  // namespace

std::vector<std::int32_t> straight_order(const plan::Plan& p, int rank) {
  const int n = static_cast<int>(p.ranks.size());
  const auto u = [](auto i) { return static_cast<std::size_t>(i); };
  // Where each message is received: (from, to, slot) -> the receiving step.
  auto key = [n](int from, int to, std::int32_t slot) {
    return (static_cast<std::uint64_t>(from) * static_cast<std::uint64_t>(n) + static_cast<std::uint64_t>(to)) << 32 |
           static_cast<std::uint32_t>(slot);
  };
  std::unordered_map<std::uint64_t, std::int32_t> receiver;
  // Per rank and step: what it still waits for (its dependencies, and for a
  // receive its message), and who waits for it.
  std::vector<std::vector<std::int32_t>> waiting(u(n));
  std::vector<std::vector<std::int32_t>> next_begin(u(n)), next(u(n));
  std::size_t left = 0;
  for (int r = 0; r < n; ++r) {
    const auto& steps = p.ranks[u(r)].steps;
    auto& wt = waiting[u(r)];
    wt.assign(steps.size(), 0);
    auto& nb = next_begin[u(r)];
    nb.assign(steps.size() + 1, 0);
    left += steps.size();
    for (std::size_t i = 0; i < steps.size(); ++i) {
      const auto& s = steps[i];
      if (is_recv(s.kind)) {
        if (s.peer < 0 || s.peer >= n || !receiver.emplace(key(s.peer, r, s.slot), static_cast<std::int32_t>(i)).second)
          return {};
        ++wt[i];
      }
      for (auto d : s.deps) {
        if (d < 0 || u(d) >= steps.size()) return {};
        ++wt[i];
        ++nb[u(d) + 1];
      }
    }
    for (std::size_t i = 0; i < steps.size(); ++i) nb[i + 1] += nb[i];
    auto& nx = next[u(r)];
    nx.resize(u(nb[steps.size()]));
    std::vector<std::int32_t> fill(nb.begin(), nb.end() - 1);
    for (std::size_t i = 0; i < steps.size(); ++i)
      for (auto d : steps[i].deps) nx[u(fill[u(d)]++)] = static_cast<std::int32_t>(i);
  }
  // Per rank, its ready steps by kind (sends, local steps, receives).
  std::vector<std::array<std::deque<std::int32_t>, 3>> ready(u(n));
  auto make_ready = [&](int r, std::int32_t i) {
    ready[u(r)][u(queue_of(p.ranks[u(r)].steps[u(i)].kind))].push_back(i);
  };
  for (int r = 0; r < n; ++r)
    for (std::size_t i = 0; i < waiting[u(r)].size(); ++i)
      if (waiting[u(r)][i] == 0) make_ready(r, static_cast<std::int32_t>(i));
  std::vector<std::int32_t> order;
  while (left > 0) {
    bool progress = false;
    std::vector<std::pair<int, std::int32_t>> sent_now;
    for (int r = 0; r < n; ++r) {
      auto& q = ready[u(r)];
      for (;;) {
        auto& from = !q[0].empty() ? q[0] : !q[1].empty() ? q[1] : q[2];
        if (from.empty()) break;
        const std::int32_t i = from.front();
        from.pop_front();
        const auto& s = p.ranks[u(r)].steps[u(i)];
        --left;
        progress = true;
        if (r == rank) order.push_back(i);
        if (s.kind == plan::StepKind::Send) {
          if (s.peer < 0 || s.peer >= n) return {};
          const auto it = receiver.find(key(r, s.peer, s.slot));
          if (it == receiver.end()) return {};  // nobody receives it: not a plan the runtime can run
          sent_now.emplace_back(s.peer, it->second);
        }
        for (std::int32_t k = next_begin[u(r)][u(i)]; k < next_begin[u(r)][u(i) + 1]; ++k) {
          const std::int32_t d = next[u(r)][u(k)];
          if (--waiting[u(r)][u(d)] == 0) make_ready(r, d);
        }
      }
    }
    // Messages sent in this round may be received from the next one on.
    for (const auto& [r, i] : sent_now)
      if (--waiting[u(r)][u(i)] == 0) {
        make_ready(r, i);
        progress = true;
      }
    if (!progress) return {};
  }
  return order;
}

}  // namespace braid
