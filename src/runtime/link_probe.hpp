// The link between hosts, measured at init: the cost model prices every
// message that crosses hosts by it (cost_model.hpp, LinkCosts), and the
// choice between a flat plan and a host-aware one turns on it. Only a job
// that spans hosts probes, and only two ranks do: rank 0 and the first rank
// on another host, a few small round trips (latency), a few bursts of small
// messages one way (the sender's gap between them, which the choice leaves
// out and braid-sim's loops of calls use), and a few transfers of 1 and 4
// MiB (bandwidth, from the slope between the two). Rank 0 publishes
// the figures in the store and every rank reads them, so that all of them
// choose alike.
// BRAID_LINK_LATENCY_NS / BRAID_LINK_MBPS, where set, win over the probe;
// BRAID_LINK_PROBE=0 turns it off (the backend's defaults then stand).
#pragma once

#include "src/runtime/context.hpp"
#include "src/runtime/plan_cache.hpp"

namespace braid {

// Collective over the world group `g` of `c` (every rank calls it after the
// rendezvous); returns zeros where nothing was probed.
LinkSettings probe_link(Context& c, const detail::GroupImpl& g);

}  // namespace braid
