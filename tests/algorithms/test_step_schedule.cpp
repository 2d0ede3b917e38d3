// StepSchedule (src/runtime/executor.hpp): which ready step a runner starts
// next. Data steps start in plan order, so a pipeline whose chunks become
// ready together (a peer's signals found at once) moves and announces chunk
// j before it moves chunk j+1, instead of moving them all, last first, and
// announcing none until the end (bench/RESULTS.md section 42).
#include <catch2/catch.hpp>

#include <cstdint>
#include <memory>
#include <vector>

#include "algorithms/plan.hpp"
#include "algorithms/registry.hpp"
#include "src/runtime/executor.hpp"
#include "tests/algorithms/plan_args.hpp"

using namespace braid::plan;
using verify_test::host_args;

TEST_CASE("the step schedule announces each chunk of a pipeline before it moves the next", "[schedule]") {
  // A staged broadcast's root: 8 MiB of float32 in 32 chunks through 16 slots,
  // so chunks 16..31 each wait for the peer to take chunk j-16.
  const PlanArgs a = host_args(Collective::Broadcast, 2, std::int64_t{2} << 20);
  const Algorithm* staged = find_algorithm(Collective::Broadcast, "staged");
  REQUIRE(staged);
  const auto cp = braid::compile_plan(std::make_shared<const Plan>(staged->build(a)), 0);
  const auto& steps = cp->steps().steps;
  const auto at = [&](std::int32_t i) -> const Step& { return steps[static_cast<std::size_t>(i)]; };

  braid::StepSchedule sched;
  sched.begin(*cp);
  std::vector<std::int32_t> order, waiting;
  const auto start = [&](std::int32_t i) {
    order.push_back(i);
    if (at(i).kind == StepKind::Wait) waiting.push_back(i);  // until the peer's signal
    else sched.finish(i);
  };
  sched.start_ready(start);
  // The peer's signals arrive in batches: every pending wait at once.
  int batches = 0;
  while (!waiting.empty()) {
    const std::vector<std::int32_t> arrived = std::move(waiting);
    waiting.clear();
    for (std::int32_t i : arrived) sched.finish(i);
    sched.start_ready(start);
    ++batches;
  }
  REQUIRE(sched.all_done());
  CHECK(batches > 0);

  // The copies into Scratch (the stagings), in the order they started: the
  // chunks in order, each one's signal started before the next staging.
  std::vector<std::size_t> staging_at;
  for (std::size_t k = 0; k < order.size(); ++k)
    if (at(order[k]).kind == StepKind::Copy && at(order[k]).dst.buf == Buf::Scratch) staging_at.push_back(k);
  REQUIRE(staging_at.size() == 32);
  for (std::size_t c = 0; c + 1 < staging_at.size(); ++c) {
    INFO("chunk " << c);
    const std::int32_t copy = order[staging_at[c]];
    CHECK(at(copy).src.offset < at(order[staging_at[c + 1]]).src.offset);
    bool announced = false;
    for (std::size_t k = staging_at[c] + 1; k < staging_at[c + 1]; ++k)
      for (auto d : at(order[k]).deps)
        if (at(order[k]).kind == StepKind::Signal && d == copy) announced = true;
    CHECK(announced);
  }
}
