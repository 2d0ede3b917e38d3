// PlanArgs, and the failure report, for the verifier tests (test_verify.cpp,
// test_one_sided.cpp).
#pragma once

#include <catch2/catch.hpp>

#include <cstddef>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "algorithms/plan.hpp"

namespace verify_test {

inline braid::plan::PlanArgs make_args(braid::plan::Collective coll, int n, std::int64_t count, int root = 0,
                                       std::size_t elem_size = 4) {
  braid::plan::PlanArgs a;
  a.coll = coll;
  a.nranks = n;
  a.count = count;
  a.root = root;
  a.elem_size = elem_size;
  return a;
}

// The same, for ranks that share one host (one-sided plans are offered).
inline braid::plan::PlanArgs host_args(braid::plan::Collective coll, int n, std::int64_t count, int root = 0,
                                       std::size_t elem_size = 4) {
  braid::plan::PlanArgs a = make_args(coll, n, count, root, elem_size);
  a.topology.one_host = true;
  return a;
}

// The collectives that take a root, and the roots a sweep tries at n ranks:
// the first, the second, the middle and the last.
inline bool rooted(braid::plan::Collective c) {
  using braid::plan::Collective;
  return c == Collective::Broadcast || c == Collective::Reduce || c == Collective::Gather || c == Collective::Scatter;
}
inline std::vector<int> roots_for(braid::plan::Collective c, int n) {
  if (!rooted(c)) return {0};
  std::set<int> r = {0, 1 % n, n - 1, n / 2};
  return {r.begin(), r.end()};
}

// A sweep's failures: the first 20 each as a failed check, then the verdict.
inline void report_failures(const std::vector<std::string>& failures) {
  for (std::size_t i = 0; i < failures.size() && i < 20; ++i) FAIL_CHECK(failures[i]);
  CHECK(failures.empty());
}

}  // namespace verify_test
