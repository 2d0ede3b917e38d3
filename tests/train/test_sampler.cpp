// braid::DistributedSampler on its own (no process group): how it splits a
// dataset between ranks, padding and drop_last, epochs and seeds, argument
// errors. sampler_torch.cpp compares it with torch itself; the expected
// lists below were printed by torch 1.13's DistributedSampler.
#include <catch2/catch.hpp>

#include <algorithm>
#include <functional>
#include <map>
#include <set>
#include <string>

#include <braid/braid.hpp>

using braid::DistributedSampler;
using braid::ErrorCode;
using Indices = std::vector<std::int64_t>;

namespace {

Indices of(std::int64_t n, int replicas, int rank, bool shuffle, bool drop_last, std::uint64_t seed = 0,
           std::int64_t epoch = 0) {
  DistributedSampler s(n, {.num_replicas = replicas, .rank = rank, .shuffle = shuffle, .seed = seed,
                           .drop_last = drop_last});
  s.set_epoch(epoch);
  Indices v = s.indices();
  REQUIRE(static_cast<std::int64_t>(v.size()) == s.size());
  return v;
}

void require_error(std::function<void()> f, ErrorCode code, const std::string& text) {
  try {
    f();
  } catch (const braid::Error& e) {
    INFO(e.what());
    REQUIRE(e.code() == code);
    REQUIRE(std::string(e.what()).find(text) != std::string::npos);
    return;
  }
  FAIL("expected a braid::Error containing '" << text << "'");
}

}  // namespace

TEST_CASE("sampler: the same indices as torch for known cases", "[sampler]") {
  REQUIRE(of(10, 3, 0, true, false) == Indices{4, 5, 0, 2});
  REQUIRE(of(10, 3, 1, true, false) == Indices{1, 3, 8, 4});  // 4 again: padding
  REQUIRE(of(10, 3, 2, true, false) == Indices{7, 9, 6, 1});  // 1 again: padding
  REQUIRE(of(10, 3, 1, true, false, 42, 3) == Indices{6, 4, 8, 7});
  REQUIRE(of(7, 4, 3, true, false) == Indices{3, 4});
  REQUIRE(of(7, 4, 3, true, true) == Indices{3});
}

TEST_CASE("sampler: without shuffle rank r takes r, r + R, ... wrapping around to pad", "[sampler]") {
  REQUIRE(of(10, 4, 0, false, false) == Indices{0, 4, 8});
  REQUIRE(of(10, 4, 1, false, false) == Indices{1, 5, 9});
  REQUIRE(of(10, 4, 2, false, false) == Indices{2, 6, 0});
  REQUIRE(of(10, 4, 3, false, false) == Indices{3, 7, 1});
  REQUIRE(of(10, 4, 3, false, true) == Indices{3, 7});
  // Fewer samples than ranks: the order repeats as often as needed.
  REQUIRE(of(2, 5, 4, false, false) == Indices{0});
  REQUIRE(of(2, 5, 3, false, false) == Indices{1});
  REQUIRE(of(2, 5, 4, false, true).empty());
  REQUIRE(of(0, 3, 1, true, false).empty());
}

TEST_CASE("sampler: the ranks' indices cover the dataset, padded or cut evenly", "[sampler]") {
  for (std::int64_t n : {1, 5, 12, 97, 1000})
    for (int replicas : {1, 2, 3, 7, 8})
      for (bool shuffle : {false, true})
        for (bool drop_last : {false, true}) {
          INFO("n=" << n << " replicas=" << replicas << " shuffle=" << shuffle << " drop_last=" << drop_last);
          std::map<std::int64_t, int> seen;
          std::int64_t total = 0;
          for (int r = 0; r < replicas; ++r) {
            const Indices v = of(n, replicas, r, shuffle, drop_last, 5, 2);
            const std::int64_t want = drop_last ? n / replicas : (n + replicas - 1) / replicas;
            REQUIRE(static_cast<std::int64_t>(v.size()) == want);
            for (std::int64_t i : v) {
              REQUIRE(i >= 0);
              REQUIRE(i < n);
              ++seen[i];
            }
            total += static_cast<std::int64_t>(v.size());
          }
          if (drop_last) {
            // Cut: no index twice, n % replicas of them left out.
            REQUIRE(total == n / replicas * replicas);
            REQUIRE(static_cast<std::int64_t>(seen.size()) == total);
          } else {
            // Padded: every index, and `pad` repeats in all (one index may
            // repeat several times when the ranks outnumber the samples).
            const std::int64_t pad = (n + replicas - 1) / replicas * replicas - n;
            REQUIRE(total == n + pad);
            REQUIRE(static_cast<std::int64_t>(seen.size()) == n);
            std::int64_t extra = 0;
            for (const auto& [i, k] : seen) extra += k - 1;
            REQUIRE(extra == pad);
          }
        }
}

TEST_CASE("sampler: epochs and seeds change the shuffle, the same ones repeat it", "[sampler]") {
  const Indices e0 = of(1000, 4, 1, true, false, 0, 0);
  REQUIRE(of(1000, 4, 1, true, false, 0, 0) == e0);
  REQUIRE(of(1000, 4, 1, true, false, 0, 1) != e0);
  REQUIRE(of(1000, 4, 1, true, false, 1, 0) != e0);
  // torch seeds with seed + epoch: (seed 1, epoch 0) is (seed 0, epoch 1).
  REQUIRE(of(1000, 4, 1, true, false, 1, 0) == of(1000, 4, 1, true, false, 0, 1));
  // The generator keeps the low 32 bits of the seed, as torch's does.
  REQUIRE(of(1000, 4, 1, true, false, (std::uint64_t{1} << 32) + 9, 0) == of(1000, 4, 1, true, false, 9, 0));
  // Shuffled really: not the identity's every-4th.
  Indices plain = of(1000, 4, 1, false, false);
  REQUIRE(e0 != plain);
  // set_epoch on one sampler object moves it between epochs.
  DistributedSampler s(1000, {.num_replicas = 4, .rank = 1});
  REQUIRE(s.indices() == e0);
  s.set_epoch(1);
  REQUIRE(s.indices() == of(1000, 4, 1, true, false, 0, 1));
}

TEST_CASE("sampler: bad arguments are braid::Error saying what was expected", "[sampler]") {
  require_error([] { DistributedSampler(-1, {.num_replicas = 2, .rank = 0}); }, ErrorCode::InvalidArgument,
                "dataset_size is -1: expected 0 or more");
  require_error([] { DistributedSampler(10, {.num_replicas = 0, .rank = 0}); }, ErrorCode::InvalidArgument,
                "num_replicas is 0: expected 1 or more");
  require_error([] { DistributedSampler(10, {.num_replicas = -3, .rank = 0}); }, ErrorCode::InvalidArgument,
                "num_replicas is -3");
  require_error([] { DistributedSampler(10, {.num_replicas = 3, .rank = 3}); }, ErrorCode::InvalidArgument,
                "rank is 3: expected 0 to 2");
  require_error([] { DistributedSampler(10, {.num_replicas = 3, .rank = -2}); }, ErrorCode::InvalidArgument,
                "rank is -2");
  // -1 means the default group's, which needs Braid initialised.
  REQUIRE_FALSE(braid::is_initialized());
  require_error([] { DistributedSampler(10); }, ErrorCode::InvalidState,
                "num_replicas = -1 means the default group's, but Braid is not initialised");
  require_error([] { DistributedSampler(10, {.num_replicas = 2}); }, ErrorCode::InvalidState,
                "rank = -1 means the default group's, but Braid is not initialised");
}
