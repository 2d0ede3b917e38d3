// straight_order (src/runtime/straight_order.cpp): the order in which a rank
// runs a fast-box plan one step at a time. Checked here against a separate
// run of all ranks that blocks each on its next receive, for every message
// algorithm whose plans fit the fast boxes; and on hand-made plans, one
// where the steps' own order would deadlock and one that cannot run at all.
#include <catch2/catch.hpp>
#include <fmt/core.h>

#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "algorithms/builder.hpp"
#include "src/runtime/executor.hpp"
#include "algorithms/plan.hpp"
#include "tests/algorithms/plan_args.hpp"
#include "algorithms/registry.hpp"

using namespace braid::plan;

namespace {

bool is_recv(StepKind k) { return k == StepKind::Recv || k == StepKind::RecvReduce; }

// "" if every rank, running orders[r] one step at a time and blocking on
// each receive until its message was sent, finishes; else what went wrong.
std::string run_blocking(const Plan& p, const std::vector<std::vector<std::int32_t>>& orders) {
  const int n = static_cast<int>(p.ranks.size());
  for (int r = 0; r < n; ++r) {
    const auto& steps = p.ranks[static_cast<std::size_t>(r)].steps;
    const auto& o = orders[static_cast<std::size_t>(r)];
    if (o.size() != steps.size()) return fmt::format("rank {}: {} steps ordered of {}", r, o.size(), steps.size());
    std::vector<int> pos(steps.size(), -1);
    for (std::size_t k = 0; k < o.size(); ++k) {
      if (o[k] < 0 || static_cast<std::size_t>(o[k]) >= steps.size() || pos[static_cast<std::size_t>(o[k])] >= 0)
        return fmt::format("rank {}: not a permutation of its steps", r);
      pos[static_cast<std::size_t>(o[k])] = static_cast<int>(k);
    }
    for (std::size_t i = 0; i < steps.size(); ++i)
      for (auto d : steps[i].deps)
        if (pos[static_cast<std::size_t>(d)] > pos[i]) return fmt::format("rank {}: step {} before its dependency {}", r, i, d);
  }
  std::set<std::tuple<int, int, std::int32_t>> sent;
  std::vector<std::size_t> at(static_cast<std::size_t>(n), 0);
  for (bool moved = true; moved;) {
    moved = false;
    for (int r = 0; r < n; ++r) {
      const auto& steps = p.ranks[static_cast<std::size_t>(r)].steps;
      auto& k = at[static_cast<std::size_t>(r)];
      while (k < orders[static_cast<std::size_t>(r)].size()) {
        const Step& s = steps[static_cast<std::size_t>(orders[static_cast<std::size_t>(r)][k])];
        if (is_recv(s.kind) && !sent.count({s.peer, r, s.slot})) break;
        if (s.kind == StepKind::Send) sent.insert({r, s.peer, s.slot});
        ++k;
        moved = true;
      }
    }
  }
  for (int r = 0; r < n; ++r)
    if (at[static_cast<std::size_t>(r)] < orders[static_cast<std::size_t>(r)].size())
      return fmt::format("rank {} blocks for ever at its step {}", r, at[static_cast<std::size_t>(r)]);
  return "";
}

std::vector<std::vector<std::int32_t>> orders_of(const Plan& p) {
  std::vector<std::vector<std::int32_t>> o;
  for (int r = 0; r < static_cast<int>(p.ranks.size()); ++r) o.push_back(braid::straight_order(p, r));
  return o;
}

}  // namespace

TEST_CASE("straight orders of every fast-box message plan run to the end", "[straight_order]") {
  std::vector<std::string> failures;
  int checked = 0;
  for (const Algorithm& alg : algorithms()) {
    for (int n : {1, 2, 3, 4, 5, 7, 8, 9, 16}) {
      for (std::int64_t count : {std::int64_t{0}, std::int64_t{1}, std::int64_t{n - 1}, std::int64_t{2 * n + 3}, std::int64_t{64}}) {
        for (int root : {0, n - 1}) {
          PlanArgs args = verify_test::host_args(alg.coll, n, alg.coll == Collective::Barrier ? 0 : count, root);
          if (alg.supports && !alg.supports(args)) continue;
          const Plan p = alg.build(args);
          if (p.one_sided || !fits_fastbox(p)) continue;
          ++checked;
          const std::string what =
              fmt::format("{} / {} n={} count={} root={}", collective_name(alg.coll), alg.name, n, count, root);
          const std::string why = run_blocking(p, orders_of(p));
          if (!why.empty()) failures.push_back(what + ": " + why);
          // And the runtime takes the straight path for it.
          const auto shared = std::make_shared<const Plan>(p);
          for (int r = 0; r < n; ++r) {
            const auto compiled = braid::compile_plan(shared, r, true);
            if (!compiled->fastbox || compiled->order.size() != p.ranks[static_cast<std::size_t>(r)].steps.size())
              failures.push_back(fmt::format("{}: rank {} would not run it in a straight order", what, r));
          }
        }
      }
    }
  }
  INFO(checked << " plans");
  CHECK(checked > 500);
  verify_test::report_failures(failures);
}

TEST_CASE("a straight order waits first for the message that was sent first", "[straight_order]") {
  // Rank 0 receives from 1 and from 2, and sends to 1 once it has 2's
  // message; rank 1 sends to 0 only after 0's message. Rank 0 blocking on
  // its first step (the receive from 1) would wait for ever.
  PlanBuilder b(verify_test::make_args(Collective::AllGather, 3, 1), "crossed");
  const int from1 = b.recv(0, 1, out(1, 1));
  const int from2 = b.recv(0, 2, out(2, 1));
  b.send(0, 1, in(0, 1), {from2});
  const int got = b.recv(1, 0, out(0, 1));
  b.send(1, 0, in(0, 1), {got});
  b.send(2, 0, in(0, 1));
  const Plan p = b.finish();
  const auto orders = orders_of(p);
  CHECK(orders[0] == std::vector<std::int32_t>{from2, 2, from1});
  CHECK(run_blocking(p, orders).empty());
  // The steps' own order, blocking, does deadlock.
  std::vector<std::vector<std::int32_t>> plain;
  for (const auto& rp : p.ranks) {
    plain.emplace_back();
    for (std::size_t i = 0; i < rp.steps.size(); ++i) plain.back().push_back(static_cast<std::int32_t>(i));
  }
  CHECK_FALSE(run_blocking(p, plain).empty());
}

TEST_CASE("a plan whose ranks each receive before sending gets no straight order", "[straight_order]") {
  PlanBuilder b(verify_test::make_args(Collective::AllGather, 2, 1), "stuck");
  for (int r = 0; r < 2; ++r) {
    const int got = b.recv(r, 1 - r, out(1 - r, 1));
    b.send(r, 1 - r, in(0, 1), {got});
  }
  const Plan p = b.finish();
  CHECK(braid::straight_order(p, 0).empty());
  CHECK(braid::straight_order(p, 1).empty());
}
