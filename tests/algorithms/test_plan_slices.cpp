// Slices (PlanArgs::slice_rank): a rank that builds only its own steps gets
// exactly its list of the whole plan -- the same steps, peers, slots, spans
// and deps -- so ranks that each build their own slice still run one
// verified plan. Checked for every registered algorithm over group sizes,
// roots and counts, and for the host-aware ones over host grids.
#include <catch2/catch.hpp>
#include <fmt/core.h>
#include <fmt/ranges.h>

#include <string>
#include <vector>

#include "algorithms/plan.hpp"
#include "algorithms/registry.hpp"
#include "tests/algorithms/plan_args.hpp"

using namespace braid::plan;

namespace {

bool same_span(const Span& a, const Span& b) { return a.buf == b.buf && a.offset == b.offset && a.count == b.count; }

// What differs between rank r's list in `whole` and in `slice`, or "".
std::string slice_differs(const Plan& whole, const Plan& slice, int r) {
  if (slice.ranks.size() != whole.ranks.size()) return fmt::format("{} rank lists, not {}", slice.ranks.size(), whole.ranks.size());
  for (std::size_t q = 0; q < slice.ranks.size(); ++q)
    if (static_cast<int>(q) != r && (!slice.ranks[q].steps.empty() || slice.ranks[q].scratch_count != 0))
      return fmt::format("rank {}'s slice holds steps of rank {}", r, q);
  const RankPlan& a = whole.ranks[static_cast<std::size_t>(r)];
  const RankPlan& b = slice.ranks[static_cast<std::size_t>(r)];
  if (a.scratch_count != b.scratch_count) return fmt::format("scratch {} in the slice, {} in the whole", b.scratch_count, a.scratch_count);
  if (a.steps.size() != b.steps.size()) return fmt::format("{} steps in the slice, {} in the whole", b.steps.size(), a.steps.size());
  for (std::size_t i = 0; i < a.steps.size(); ++i) {
    const Step& x = a.steps[i];
    const Step& y = b.steps[i];
    if (x.kind != y.kind || x.peer != y.peer || x.slot != y.slot || !same_span(x.src, y.src) ||
        !same_span(x.dst, y.dst) || !same_span(x.acc, y.acc) || x.deps != y.deps)
      return fmt::format("step {}: slice '{}', whole '{}'", i, to_string(y), to_string(x));
  }
  if (slice.reads_input != whole.reads_input) return "reads_input differs";
  if (slice.algorithm != whole.algorithm) return "algorithm differs";
  return {};
}

// Every rank's slice of alg on args against the whole plan; failures appended.
void check_slices(const Algorithm& alg, PlanArgs args, const std::string& where, std::vector<std::string>* failures,
                  int* plans) {
  if (alg.supports && !alg.supports(args)) return;
  const Plan whole = alg.build(args);
  for (int r = 0; r < args.nranks; ++r) {
    args.slice_rank = r;
    const Plan slice = alg.build(args);
    if (auto e = slice_differs(whole, slice, r); !e.empty())
      failures->push_back(fmt::format("{} / {} n={} root={} count={}{} rank {}: {}", collective_name(alg.coll), alg.name,
                                      args.nranks, args.root, args.count, where, r, e));
  }
  ++*plans;
}

}  // namespace

TEST_CASE("a rank's slice of every registered algorithm is its list of the whole plan", "[plan][slice]") {
  std::vector<std::string> failures;
  int plans = 0;
  for (const Algorithm& alg : algorithms()) {
    for (int n : {1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 16, 17, 31, 64}) {
      for (int root : verify_test::roots_for(alg.coll, n)) {
        for (std::int64_t count : {std::int64_t{0}, std::int64_t{1}, std::int64_t{2 * n + 3}, std::int64_t{10007}}) {
          for (bool one_host : {false, true}) {
            PlanArgs args = verify_test::make_args(alg.coll, n, alg.coll == Collective::Barrier ? 0 : count, root);
            args.topology.one_host = one_host;
            check_slices(alg, args, one_host ? " one host" : "", &failures, &plans);
          }
          if (alg.coll == Collective::Barrier) break;
        }
        // Chunked pipelines: 4 KiB elements cut large calls into many pieces.
        if (alg.coll != Collective::Barrier && n <= 17)
          check_slices(alg, verify_test::make_args(alg.coll, n, 10007, root, 4096), " 4 KiB elements", &failures, &plans);
      }
    }
  }
  INFO(fmt::format("{} plans, every rank's slice of each", plans));
  CHECK(plans > 1000);
  verify_test::report_failures(failures);
}

TEST_CASE("slices of the host-aware plans on host grids, uneven and interleaved ones included", "[plan][slice][hosts]") {
  const std::vector<std::vector<int>> layouts = {
      {0, 0, 1, 1},
      {0, 0, 0, 0, 1, 1, 1, 1},
      {0, 1, 0, 1, 0, 1},
      {0, 0, 1, 2, 2, 2},
      {1, 0, 2, 1, 1, 0, 2},
      {0, 0, 0, 1, 2, 2, 2, 2, 2, 3, 3},
      {0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4},
  };
  std::vector<std::string> failures;
  int plans = 0;
  for (const Algorithm& alg : algorithms()) {
    if (alg.offered == nullptr || !std::string(alg.name).starts_with("hierarchical")) continue;
    for (const auto& layout : layouts) {
      const int n = static_cast<int>(layout.size());
      for (int root : verify_test::roots_for(alg.coll, n))
        for (std::int64_t count : {std::int64_t{0}, std::int64_t{1}, std::int64_t{n - 1}, std::int64_t{100003}}) {
          PlanArgs args = verify_test::make_args(alg.coll, n, alg.coll == Collective::Barrier ? 0 : count, root);
          args.topology.host_of = layout;
          check_slices(alg, args, fmt::format(" hosts {}", fmt::join(layout, ",")), &failures, &plans);
          if (alg.coll == Collective::Barrier) break;
        }
    }
  }
  CHECK(plans > 100);
  verify_test::report_failures(failures);
}
