// Plan choice and caching: building a plan (and choosing one through the cost
// model) is never on the hot path. Plans are keyed by everything that shapes
// them; uneven all-to-all plans depend on the splits and are not cached.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "src/runtime/executor.hpp"
#include "algorithms/plan.hpp"

namespace braid {

// BRAID_ALGO, parsed once (throws braid::Error listing valid names on a bad
// value; init calls it so the error comes early).
const std::map<plan::Collective, std::string>& algo_overrides();

// The compiled plan for `args` for group rank `rank`, with the algorithm
// forced by `forced` (nullptr/empty: BRAID_ALGO, else the cost model's choice).
// `shared_memory` picks the cost model's parameters (all members on one
// host, talking through shared memory, or not).
// `host_of` (which host each group rank is on) is copied into the plan's
// arguments only when a plan has to be built. (The hot path goes through
// a per-thread cache in front of this one: issue.cpp, plan_for.)
std::shared_ptr<const CompiledPlan> get_plan(const plan::PlanArgs& args, int rank, const char* forced,
                                             bool shared_memory, const std::vector<int>* host_of = nullptr);

}  // namespace braid
