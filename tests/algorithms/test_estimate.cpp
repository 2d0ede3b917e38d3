// The closed-form estimates (estimate.hpp) against the simulator, where both
// run: the formula of a ring, a doubling, a binomial tree, ... follows its
// simulated time, and the algorithm the formulas choose is, simulated, close
// to the simulator's own choice -- which is what the choice above
// kSimulateRanks relies on. And above it: every collective gets a choice on
// 1,024 hosts x 8 ranks, priced without building a whole plan.
#include <catch2/catch.hpp>
#include <fmt/core.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "algorithms/cost_model.hpp"
#include "algorithms/estimate.hpp"
#include "algorithms/registry.hpp"
#include "tests/algorithms/plan_args.hpp"

using namespace braid::plan;

namespace {

struct Layout {
  const char* name;
  int ranks;
  int hosts;  // blocks of ranks; 1: one host
  LinkCosts links;
};

std::vector<int> blocks(int ranks, int hosts) {
  std::vector<int> of;
  for (int r = 0; hosts > 1 && r < ranks; ++r) of.push_back(r * hosts / ranks);
  return of;
}

std::vector<Layout> layouts() {
  return {
      {"64 ranks, TCP", 64, 1, {kTcpLoopback, kTcpLoopback}},
      {"13 ranks, TCP", 13, 1, {kTcpLoopback, kTcpLoopback}},
      {"8 hosts x 8, shm inside, TCP across", 64, 8, link_costs(kSharedMemory, kTcpLoopback, blocks(64, 8))},
      {"16 hosts x 8, shm inside, TCP across", 128, 16, link_costs(kSharedMemory, kTcpLoopback, blocks(128, 16))},
  };
}

PlanArgs args_for(Collective c, const Layout& l, double bytes) {
  std::int64_t count = static_cast<std::int64_t>(bytes / 4);
  const bool blocks_each = c == Collective::AllGather || c == Collective::ReduceScatter || c == Collective::Gather ||
                           c == Collective::Scatter || c == Collective::AllToAll;
  if (blocks_each) count /= l.ranks;
  if (c == Collective::Barrier) count = 0;
  PlanArgs a = verify_test::make_args(c, l.ranks, count);
  a.topology.host_of = blocks(l.ranks, l.hosts);
  a.topology.host_shares_memory = l.hosts > 1;
  return a;
}

const std::vector<double> kBytes = {8, 2048, 32768, 524288, 8388608};

// The formulas that follow their plan round by round: ring, doubling,
// binomial tree, Bruck's all-gather, direct gather and scatter. (The others
// -- the two trees, the hierarchical plans, all-to-all, dissemination -- are
// rougher: where many messages share a host's link at once, the
// simulator's one port per rank serialises them in ways no short formula
// follows; the choice test below covers them.)
bool close_formula(const Algorithm& a) {
  const std::string n = a.name;
  if (n == "ring" || n == "recursive_doubling" || n == "halving_doubling" || n == "tree") return true;
  if (n == "bruck") return a.coll == Collective::AllGather;
  if (n == "direct") return a.coll != Collective::AllToAll;
  return false;
}

}  // namespace

TEST_CASE("the round-by-round formulas follow the simulator within 35 percent", "[estimate]") {
  std::vector<std::string> failures;
  int compared = 0;
  for (const Layout& l : layouts())
    for (const Algorithm& alg : algorithms()) {
      if (!alg.estimate || !close_formula(alg)) continue;
      for (double b : kBytes) {
        const PlanArgs a = args_for(alg.coll, l, b);
        if (alg.supports && !alg.supports(a)) continue;
        const double sim = predict_seconds(alg.build(a), l.links);
        const double est = estimate_seconds(alg, a, l.links);
        ++compared;
        if (sim == 0 && est == 0) continue;  // no data: no messages
        if (!(est > 0) || !(sim > 0) || est > 1.35 * sim || est < sim / 1.35)
          failures.push_back(fmt::format("{} / {} on {}, {} bytes: formula {:.1f} us, simulated {:.1f} us",
                                         collective_name(alg.coll), alg.name, l.name, b, est * 1e6, sim * 1e6));
      }
    }
  CHECK(compared > 150);
  verify_test::report_failures(failures);
}

// Among the flat algorithms. The hierarchical plans are left out: they send
// many messages at once, and the simulator's one port per rank, taken in
// order of readiness, lets a message whose receiver is busy hold its
// sender's port idle meanwhile, so it prices them far above their rounds
// (all-gather on 8 hosts x 8 ranks, 2 KiB: 3.6 ms simulated, 0.1 ms by
// formula); which is nearer the truth at that scale is not measured here.
TEST_CASE("the formulas' choice, simulated, is within 25 percent of the simulator's choice", "[estimate]") {
  std::vector<std::string> failures;
  int compared = 0;
  for (const Layout& l : layouts())
    for (int c = 0; c < kNumCollectives; ++c) {
      const auto coll = static_cast<Collective>(c);
      for (double b : kBytes) {
        const PlanArgs a = args_for(coll, l, b);
        double best_sim = std::numeric_limits<double>::infinity(), best_est = best_sim, chosen_sim = best_sim;
        std::string sim_name, est_name;
        for (const Algorithm& alg : algorithms()) {
          if (alg.coll != coll || !alg.automatic || (alg.supports && !alg.supports(a)) || (alg.offered && !alg.offered(a)) ||
              std::string(alg.name).starts_with("hierarchical"))
            continue;
          const double sim = predict_seconds(alg.build(a), l.links);
          const double est = estimate_seconds(alg, a, l.links);
          if (sim < best_sim) best_sim = sim, sim_name = alg.name;
          if (est >= 0 && est < best_est) best_est = est, est_name = alg.name, chosen_sim = sim;
        }
        if (est_name.empty()) continue;
        ++compared;
        if (chosen_sim > 1.25 * best_sim)
          failures.push_back(fmt::format("{} on {}, {} bytes: formulas choose {} ({:.1f} us simulated), the simulator {} ({:.1f} us)",
                                         collective_name(coll), l.name, b, est_name, chosen_sim * 1e6, sim_name, best_sim * 1e6));
        if (coll == Collective::Barrier) break;
      }
    }
  CHECK(compared > 100);
  verify_test::report_failures(failures);
}

TEST_CASE("above kSimulateRanks the choice is priced by formula: 1,024 hosts x 8 ranks", "[estimate][scale]") {
  const int n = 8192, hosts = 1024;
  const LinkCosts links = link_costs(kSharedMemory, kTcpLoopback, blocks(n, hosts));
  for (int c = 0; c < kNumCollectives; ++c) {
    const auto coll = static_cast<Collective>(c);
    for (double b : {8.0, 1048576.0, 67108864.0}) {
      PlanArgs a = args_for(coll, Layout{"", n, hosts, links}, b * n / 64);
      INFO(fmt::format("{} of {} bytes", collective_name(coll), b));
      const Algorithm* chosen = choose(coll, a, links);
      REQUIRE(chosen != nullptr);
      // The choice is the least estimate among the algorithms offered.
      const double t = estimate_seconds(*chosen, a, links);
      REQUIRE(t >= 0);
      for (const Algorithm& alg : algorithms())
        if (alg.coll == coll && alg.automatic && (!alg.supports || alg.supports(a)) && (!alg.offered || alg.offered(a)) &&
            alg.estimate)
          CHECK(t <= estimate_seconds(alg, a, links));
      // And a rank builds its own slice of it, nobody else's.
      a.slice_rank = n / 2 + 3;
      const Plan slice = chosen->build(a);
      std::size_t others = 0;
      for (std::size_t r = 0; r < slice.ranks.size(); ++r)
        if (static_cast<int>(r) != a.slice_rank) others += slice.ranks[r].steps.size();
      CHECK(others == 0);
      if (coll != Collective::Barrier && a.count > 0) CHECK_FALSE(slice.ranks[static_cast<std::size_t>(a.slice_rank)].steps.empty());
      if (coll == Collective::Barrier) break;
    }
  }
}
