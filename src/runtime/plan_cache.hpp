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

// The link between hosts as BRAID_LINK_LATENCY_NS and BRAID_LINK_MBPS set
// it (0: not set, the backend's defaults stand), parsed once; throws
// braid::Error naming the variable on a bad value (init calls it early).
// Every rank must set them alike: they shape the plan choice, and the
// group's signature carries them.
struct LinkSettings {
  double latency_s = 0;   // per message, one way
  double s_per_byte = 0;  // inverse bandwidth
  // The sender's time per small message sent back to back (LogP's gap);
  // measured by the probe only (0: not measured). The choice does not use
  // it: braid-sim --link-gap-ns prices loops of calls with it.
  double gap_s = 0;
};
LinkSettings link_settings();
// The link as the choice prices it: link_settings() where set, else what
// the init probe measured (link_probe.hpp), else zeros (the defaults).
LinkSettings effective_link();
// Records the probe's figures (identical on every rank: read from the
// store); drops cached plans chosen under other figures.
void set_measured_link(const LinkSettings& measured);

// The compiled plan for `args` for group rank `rank`, with the algorithm
// forced by `forced` (nullptr/empty: BRAID_ALGO, else the cost model's choice).
// `shared_memory` picks the cost model's parameters (all members on one
// host, talking through shared memory, or not); across hosts each pair is
// priced by its link (algorithms/cost_model.hpp, LinkCosts), the link
// between hosts as link_settings() says.
// `host_of` (which host each group rank is on) is copied into the plan's
// arguments only when a plan has to be built. (The hot path goes through
// a per-thread cache in front of this one: issue.cpp, plan_for.)
std::shared_ptr<const CompiledPlan> get_plan(const plan::PlanArgs& args, int rank, const char* forced,
                                             bool shared_memory, const std::vector<int>* host_of = nullptr);

}  // namespace braid
