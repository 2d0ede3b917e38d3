// The algorithm registry: every algorithm is one file in algorithms/ and one
// line in registry.cpp. Lookup by (collective, name).
#pragma once

#include <string>
#include <vector>

#include "algorithms/plan.hpp"

namespace braid::plan {

struct LinkCosts;  // cost_model.hpp

struct Algorithm {
  const char* name;  // "ring", "tree", "recursive_doubling", ...
  Collective coll;
  // Builds the plan. Must work for every nranks >= 1 and count >= 0 it
  // accepts; `supports` says which (nullptr = all).
  Plan (*build)(const PlanArgs& args);
  bool (*supports)(const PlanArgs& args);
  // Offered by the automatic choice (false: only when named). The cost model
  // prices steps one at a time; an algorithm whose gain is a fusion only
  // some runtime makes would otherwise be picked on a tie.
  bool automatic = true;
  // Where set, the automatic choice offers it only where this holds (named,
  // it runs wherever `supports` holds): for a gain the cost model cannot
  // see, such as CPUs copying at once that ranks sharing CPUs do not have.
  bool (*offered)(const PlanArgs& args) = nullptr;
  // Its time as a closed formula (estimate.hpp), for groups too large to
  // simulate; nullptr: simulated only (the one-sided plans, on one host).
  double (*estimate)(const PlanArgs& args, const LinkCosts& links) = nullptr;
};

const std::vector<Algorithm>& algorithms();
// nullptr if no algorithm of that name implements the collective.
const Algorithm* find_algorithm(Collective coll, const std::string& name);
// Names of the algorithms that implement `coll`, for error messages.
std::vector<std::string> algorithm_names(Collective coll);

}  // namespace braid::plan
