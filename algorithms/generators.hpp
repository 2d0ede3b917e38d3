// Declarations of every algorithm generator registered in registry.cpp.
// Each algorithm file (ring.cpp, binomial_tree.cpp, ...) defines its
// functions here; add one declaration per function, keeping one per line.
#pragma once

#include <array>
#include <vector>

#include "algorithms/plan.hpp"

namespace braid::plan {

struct LinkCosts;  // cost_model.hpp

// ---- generator declarations (one per line; keep this block simple) ----
Plan recursive_doubling_allreduce(const PlanArgs& args);
Plan recursive_doubling_allgather(const PlanArgs& args);
Plan halving_doubling_allreduce(const PlanArgs& args);
Plan halving_doubling_reducescatter(const PlanArgs& args);
// The halving-doubling all-reduce of `data` among `members` (group ranks),
// where ready[i] (or -1; empty: none) must precede member i's use of it;
// returns per member the steps after which its copy is final (for the
// members the builder keeps). `from` (empty: data itself) is where each
// member's contribution lies, read until its first reduction writes data
// (the flat algorithm passes Input; the rest of data needs no value before).
// The flat algorithm runs it among every rank, hierarchical_hd among one
// rank per host.
class PlanBuilder;
std::vector<std::vector<std::int32_t>> halving_doubling_among(PlanBuilder& b, const std::vector<int>& members, Span data,
                                                              const std::vector<int>& ready, Span from = {});
Plan bruck_allgather(const PlanArgs& args);
Plan bruck_alltoall(const PlanArgs& args);
bool bruck_alltoall_supports(const PlanArgs& args);
Plan pairwise_alltoall(const PlanArgs& args);
bool pairwise_alltoall_supports(const PlanArgs& args);
Plan ring_allreduce(const PlanArgs& args);
Plan ring_reducescatter(const PlanArgs& args);
Plan ring_allgather(const PlanArgs& args);
Plan ring_broadcast(const PlanArgs& args);
Plan ring_reduce(const PlanArgs& args);
Plan tree_broadcast(const PlanArgs& args);
Plan tree_reduce(const PlanArgs& args);
Plan tree_allreduce(const PlanArgs& args);
Plan tree_gather(const PlanArgs& args);
Plan tree_scatter(const PlanArgs& args);
Plan double_binary_tree_broadcast(const PlanArgs& args);
Plan double_binary_tree_reduce(const PlanArgs& args);
Plan double_binary_tree_allreduce(const PlanArgs& args);
// The parent of each group rank in trees A and B (-1 for the root), for estimate.cpp.
std::array<std::vector<int>, 2> double_binary_tree_parents(const PlanArgs& args, int root);
Plan direct_gather(const PlanArgs& args);
Plan direct_scatter(const PlanArgs& args);
Plan direct_alltoall(const PlanArgs& args);
bool direct_alltoall_supports(const PlanArgs& args);
Plan dissemination_barrier(const PlanArgs& args);
bool one_sided_only(const PlanArgs& args);  // supports() of the one-sided algorithms below
Plan oneshot_allreduce(const PlanArgs& args);
Plan oneshot_reducescatter(const PlanArgs& args);
Plan oneshot_allgather(const PlanArgs& args);
Plan oneshot_broadcast(const PlanArgs& args);
Plan oneshot_reduce(const PlanArgs& args);
Plan twoshot_allreduce(const PlanArgs& args);
Plan push_allreduce(const PlanArgs& args);
Plan staged_allreduce(const PlanArgs& args);
Plan staged_allgather(const PlanArgs& args);
Plan staged_broadcast(const PlanArgs& args);
bool staged_supports(const PlanArgs& args);
Plan peer_read_reducescatter(const PlanArgs& args);
Plan peer_read_allgather(const PlanArgs& args);
Plan peer_read_broadcast(const PlanArgs& args);
Plan split_broadcast(const PlanArgs& args);
bool split_broadcast_offered(const PlanArgs& args);
Plan peer_read_reduce(const PlanArgs& args);
Plan peer_read_gather(const PlanArgs& args);
Plan peer_read_scatter(const PlanArgs& args);
Plan peer_read_alltoall(const PlanArgs& args);
bool peer_read_alltoall_supports(const PlanArgs& args);
Plan signal_barrier(const PlanArgs& args);
Plan hierarchical_allreduce(const PlanArgs& args);
Plan hierarchical_hd_allreduce(const PlanArgs& args);
Plan hierarchical_reducescatter(const PlanArgs& args);
Plan hierarchical_allgather(const PlanArgs& args);
Plan hierarchical_broadcast(const PlanArgs& args);
Plan hierarchical_reduce(const PlanArgs& args);
Plan hierarchical_tree_broadcast(const PlanArgs& args);
Plan hierarchical_tree_reduce(const PlanArgs& args);
Plan hierarchical_barrier(const PlanArgs& args);
bool hierarchical_offered(const PlanArgs& args);  // the group spans hosts
// closed-form estimates (estimate.cpp), one per message algorithm:
double recursive_doubling_allreduce_estimate(const PlanArgs& args, const LinkCosts& links);
double recursive_doubling_allgather_estimate(const PlanArgs& args, const LinkCosts& links);
double halving_doubling_allreduce_estimate(const PlanArgs& args, const LinkCosts& links);
double halving_doubling_reducescatter_estimate(const PlanArgs& args, const LinkCosts& links);
double bruck_allgather_estimate(const PlanArgs& args, const LinkCosts& links);
double bruck_alltoall_estimate(const PlanArgs& args, const LinkCosts& links);
double pairwise_alltoall_estimate(const PlanArgs& args, const LinkCosts& links);
double ring_allreduce_estimate(const PlanArgs& args, const LinkCosts& links);
double ring_reducescatter_estimate(const PlanArgs& args, const LinkCosts& links);
double ring_allgather_estimate(const PlanArgs& args, const LinkCosts& links);
double ring_broadcast_estimate(const PlanArgs& args, const LinkCosts& links);
double ring_reduce_estimate(const PlanArgs& args, const LinkCosts& links);
double tree_broadcast_estimate(const PlanArgs& args, const LinkCosts& links);
double tree_reduce_estimate(const PlanArgs& args, const LinkCosts& links);
double tree_allreduce_estimate(const PlanArgs& args, const LinkCosts& links);
double tree_gather_estimate(const PlanArgs& args, const LinkCosts& links);
double tree_scatter_estimate(const PlanArgs& args, const LinkCosts& links);
double double_binary_tree_broadcast_estimate(const PlanArgs& args, const LinkCosts& links);
double double_binary_tree_reduce_estimate(const PlanArgs& args, const LinkCosts& links);
double double_binary_tree_allreduce_estimate(const PlanArgs& args, const LinkCosts& links);
double direct_gather_estimate(const PlanArgs& args, const LinkCosts& links);
double direct_scatter_estimate(const PlanArgs& args, const LinkCosts& links);
double direct_alltoall_estimate(const PlanArgs& args, const LinkCosts& links);
double dissemination_barrier_estimate(const PlanArgs& args, const LinkCosts& links);
double hierarchical_allreduce_estimate(const PlanArgs& args, const LinkCosts& links);
double hierarchical_hd_allreduce_estimate(const PlanArgs& args, const LinkCosts& links);
double hierarchical_reducescatter_estimate(const PlanArgs& args, const LinkCosts& links);
double hierarchical_allgather_estimate(const PlanArgs& args, const LinkCosts& links);
double hierarchical_broadcast_estimate(const PlanArgs& args, const LinkCosts& links);
double hierarchical_reduce_estimate(const PlanArgs& args, const LinkCosts& links);
double hierarchical_tree_broadcast_estimate(const PlanArgs& args, const LinkCosts& links);
double hierarchical_tree_reduce_estimate(const PlanArgs& args, const LinkCosts& links);
double hierarchical_barrier_estimate(const PlanArgs& args, const LinkCosts& links);
// ---- end of generator declarations ----

}  // namespace braid::plan
