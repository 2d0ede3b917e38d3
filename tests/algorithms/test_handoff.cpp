// HandoffChooser (src/runtime/handoff.hpp): which way staged chunks cross
// between CPUs, chosen from the calls' times. Driven here with made-up times
// per byte shaped like the two phases of RESULTS.md section 33: in the
// usual one the cache is 1.3x faster than memory, in the other memory is
// 2.5x faster than the cache.
#include <catch2/catch.hpp>

#include <cstring>
#include <string>

#include "braid/error.hpp"
#include "src/runtime/handoff.hpp"

using braid::Handoff;
using braid::HandoffChooser;

namespace {

constexpr std::size_t kBytes = 16u << 20;

struct Phase {
  double cache, stream;  // seconds per call of kBytes
};
constexpr Phase kUsual{6.0e-3, 8.0e-3};
constexpr Phase kSlow{16.0e-3, 7.0e-3};

// Runs `calls` calls in `phase`; returns how many were trials.
int run(HandoffChooser& c, Phase phase, int calls) {
  int trials = 0;
  for (int i = 0; i < calls; ++i) {
    const auto p = c.pick();
    trials += p.trial;
    c.record(p, p.mode == Handoff::Cache ? phase.cache : phase.stream, kBytes);
  }
  return trials;
}

}  // namespace

TEST_CASE("handoff: stays in cache in the usual phase, trying memory now and then", "[handoff]") {
  HandoffChooser c;
  CHECK(c.mode() == Handoff::Cache);
  // The first trial comes after three calls, then one in every kTrialEvery.
  for (int i = 1; i < static_cast<int>(HandoffChooser::kFirstTrial); ++i) {
    const auto p = c.pick();
    CHECK_FALSE(p.trial);
    c.record(p, kUsual.cache, kBytes);
  }
  const auto first = c.pick();
  CHECK(first.trial);
  CHECK(first.mode == Handoff::Stream);
  c.record(first, kUsual.stream, kBytes);  // lost
  CHECK(c.mode() == Handoff::Cache);
  const int trials = run(c, kUsual, 160);
  CHECK(c.mode() == Handoff::Cache);
  CHECK(trials == 160 / static_cast<int>(HandoffChooser::kTrialEvery));
}

TEST_CASE("handoff: moves to memory within three calls of the slow phase, and back when it ends", "[handoff]") {
  HandoffChooser c;
  run(c, kUsual, 40);
  REQUIRE(c.mode() == Handoff::Cache);
  // Two slow calls move the median of the last three 2.7x: the third call
  // is a trial, in memory, which wins.
  run(c, kSlow, 2);
  CHECK(c.mode() == Handoff::Cache);
  run(c, kSlow, 1);
  CHECK(c.mode() == Handoff::Stream);
  // While the phase lasts, the periodic trials of the cache lose.
  run(c, kSlow, 100);
  CHECK(c.mode() == Handoff::Stream);
  // Back in the usual phase, the cache wins its next periodic trial.
  run(c, kUsual, static_cast<int>(HandoffChooser::kTrialEvery));
  CHECK(c.mode() == Handoff::Cache);
}

TEST_CASE("handoff: one odd call neither switches nor stops a switch", "[handoff]") {
  HandoffChooser c;
  run(c, kUsual, 40);
  // A trial that happened to run fast once (noise) against a median of the
  // cache's recent calls: it must beat them by kSwitchBelow to count.
  auto p = c.pick();
  while (!p.trial) {
    c.record(p, kUsual.cache, kBytes);
    p = c.pick();
  }
  c.record(p, kUsual.cache * 0.95, kBytes);  // 5% faster: within the noise
  CHECK(c.mode() == Handoff::Cache);
  // One slow cache call among fast ones moves the median not at all: no
  // trial follows it.
  run(c, kUsual, 3);
  p = c.pick();
  REQUIRE_FALSE(p.trial);
  c.record(p, kUsual.cache * 3, kBytes);
  p = c.pick();
  CHECK_FALSE(p.trial);
  c.record(p, kUsual.cache, kBytes);
  CHECK(c.mode() == Handoff::Cache);
  // Times of no bytes, or no time, are ignored.
  c.record(c.pick(), 0.0, kBytes);
  c.record(c.pick(), 1.0, 0);
  CHECK(c.mode() == Handoff::Cache);
}

TEST_CASE("handoff: BRAID_HANDOFF values", "[handoff]") {
  CHECK_FALSE(braid::parse_handoff(nullptr).has_value());
  CHECK_FALSE(braid::parse_handoff("").has_value());
  CHECK_FALSE(braid::parse_handoff("auto").has_value());
  CHECK(braid::parse_handoff("cache") == Handoff::Cache);
  CHECK(braid::parse_handoff("stream") == Handoff::Stream);
  try {
    braid::parse_handoff("dram");
    FAIL("no error for BRAID_HANDOFF=dram");
  } catch (const braid::Error& e) {
    const std::string what = e.what();
    CHECK(what.find("BRAID_HANDOFF='dram'") != std::string::npos);
    CHECK(what.find("auto, cache or stream") != std::string::npos);
  }
}
