// The algorithm registry. Adding an algorithm: write algorithms/<name>.cpp,
// declare its functions in generators.hpp, add one line to the list below.
#include "algorithms/registry.hpp"

#include "algorithms/generators.hpp"

namespace braid::plan {

namespace {

std::vector<Algorithm> build_list() {
  return {
      // ---- algorithm list: {name, collective, build, supports[, automatic, offered, estimate]} one per line ----
      {"recursive_doubling", Collective::AllReduce, recursive_doubling_allreduce, nullptr, true, nullptr, recursive_doubling_allreduce_estimate},
      {"recursive_doubling", Collective::AllGather, recursive_doubling_allgather, nullptr, true, nullptr, recursive_doubling_allgather_estimate},
      {"halving_doubling", Collective::AllReduce, halving_doubling_allreduce, nullptr, true, nullptr, halving_doubling_allreduce_estimate},
      {"halving_doubling", Collective::ReduceScatter, halving_doubling_reducescatter, nullptr, true, nullptr, halving_doubling_reducescatter_estimate},
      {"bruck", Collective::AllGather, bruck_allgather, nullptr, true, nullptr, bruck_allgather_estimate},
      {"bruck", Collective::AllToAll, bruck_alltoall, bruck_alltoall_supports, true, nullptr, bruck_alltoall_estimate},
      {"pairwise", Collective::AllToAll, pairwise_alltoall, pairwise_alltoall_supports, true, nullptr, pairwise_alltoall_estimate},
      {"ring", Collective::AllReduce, ring_allreduce, nullptr, true, nullptr, ring_allreduce_estimate},
      {"ring", Collective::ReduceScatter, ring_reducescatter, nullptr, true, nullptr, ring_reducescatter_estimate},
      {"ring", Collective::AllGather, ring_allgather, nullptr, true, nullptr, ring_allgather_estimate},
      {"ring", Collective::Broadcast, ring_broadcast, nullptr, true, nullptr, ring_broadcast_estimate},
      {"ring", Collective::Reduce, ring_reduce, nullptr, true, nullptr, ring_reduce_estimate},
      {"tree", Collective::Broadcast, tree_broadcast, nullptr, true, nullptr, tree_broadcast_estimate},
      {"tree", Collective::Reduce, tree_reduce, nullptr, true, nullptr, tree_reduce_estimate},
      {"tree", Collective::AllReduce, tree_allreduce, nullptr, true, nullptr, tree_allreduce_estimate},
      {"tree", Collective::Gather, tree_gather, nullptr, true, nullptr, tree_gather_estimate},
      {"tree", Collective::Scatter, tree_scatter, nullptr, true, nullptr, tree_scatter_estimate},
      {"double_binary_tree", Collective::Broadcast, double_binary_tree_broadcast, nullptr, true, nullptr, double_binary_tree_broadcast_estimate},
      {"double_binary_tree", Collective::Reduce, double_binary_tree_reduce, nullptr, true, nullptr, double_binary_tree_reduce_estimate},
      {"double_binary_tree", Collective::AllReduce, double_binary_tree_allreduce, nullptr, true, nullptr, double_binary_tree_allreduce_estimate},
      {"direct", Collective::Gather, direct_gather, nullptr, true, nullptr, direct_gather_estimate},
      {"direct", Collective::Scatter, direct_scatter, nullptr, true, nullptr, direct_scatter_estimate},
      {"direct", Collective::AllToAll, direct_alltoall, direct_alltoall_supports, true, nullptr, direct_alltoall_estimate},
      {"dissemination", Collective::Barrier, dissemination_barrier, nullptr, true, nullptr, dissemination_barrier_estimate},
      // one-sided (shared memory on one host, or RDMA):
      {"oneshot", Collective::AllReduce, oneshot_allreduce, one_sided_only},
      {"twoshot", Collective::AllReduce, twoshot_allreduce, one_sided_only},
      // The device runner names push. On host memory the cost model prefers
      // staged, push relayed through the ranks' shared Scratch, which reads
      // no peer's buffer (the model assumes process_vm_readv for those).
      {"push", Collective::AllReduce, push_allreduce, one_sided_only},
      {"staged", Collective::AllReduce, staged_allreduce, staged_supports},
      {"oneshot", Collective::ReduceScatter, oneshot_reducescatter, one_sided_only},
      {"peer_read", Collective::ReduceScatter, peer_read_reducescatter, one_sided_only},
      {"oneshot", Collective::AllGather, oneshot_allgather, one_sided_only},
      {"peer_read", Collective::AllGather, peer_read_allgather, one_sided_only},
      {"staged", Collective::AllGather, staged_allgather, staged_supports},
      {"oneshot", Collective::Broadcast, oneshot_broadcast, one_sided_only},
      {"peer_read", Collective::Broadcast, peer_read_broadcast, one_sided_only},
      {"split", Collective::Broadcast, split_broadcast, one_sided_only, true, split_broadcast_offered},
      {"staged", Collective::Broadcast, staged_broadcast, staged_supports},
      {"oneshot", Collective::Reduce, oneshot_reduce, one_sided_only},
      {"peer_read", Collective::Reduce, peer_read_reduce, one_sided_only},
      {"peer_read", Collective::Gather, peer_read_gather, one_sided_only},
      {"peer_read", Collective::Scatter, peer_read_scatter, one_sided_only},
      {"peer_read", Collective::AllToAll, peer_read_alltoall, peer_read_alltoall_supports},
      {"signal", Collective::Barrier, signal_barrier, one_sided_only},
      // host-aware (messages; inside hosts, then across, then inside):
      {"hierarchical", Collective::AllReduce, hierarchical_allreduce, nullptr, true, hierarchical_offered, hierarchical_allreduce_estimate},
      {"hierarchical_hd", Collective::AllReduce, hierarchical_hd_allreduce, nullptr, true, hierarchical_offered, hierarchical_hd_allreduce_estimate},
      {"hierarchical", Collective::ReduceScatter, hierarchical_reducescatter, nullptr, true, hierarchical_offered, hierarchical_reducescatter_estimate},
      {"hierarchical", Collective::AllGather, hierarchical_allgather, nullptr, true, hierarchical_offered, hierarchical_allgather_estimate},
      {"hierarchical", Collective::Broadcast, hierarchical_broadcast, nullptr, true, hierarchical_offered, hierarchical_broadcast_estimate},
      {"hierarchical", Collective::Reduce, hierarchical_reduce, nullptr, true, hierarchical_offered, hierarchical_reduce_estimate},
      {"hierarchical_tree", Collective::Broadcast, hierarchical_tree_broadcast, nullptr, true, hierarchical_offered, hierarchical_tree_broadcast_estimate},
      {"hierarchical_tree", Collective::Reduce, hierarchical_tree_reduce, nullptr, true, hierarchical_offered, hierarchical_tree_reduce_estimate},
      {"hierarchical", Collective::Barrier, hierarchical_barrier, nullptr, true, hierarchical_offered, hierarchical_barrier_estimate},
      // ---- end of algorithm list ----
  };
}

}  // namespace

const std::vector<Algorithm>& algorithms() {
  static const std::vector<Algorithm> list = build_list();
  return list;
}

const Algorithm* find_algorithm(Collective coll, const std::string& name) {
  for (const Algorithm& a : algorithms())
    if (a.coll == coll && name == a.name) return &a;
  return nullptr;
}

std::vector<std::string> algorithm_names(Collective coll) {
  std::vector<std::string> names;
  for (const Algorithm& a : algorithms())
    if (a.coll == coll) names.emplace_back(a.name);
  return names;
}

}  // namespace braid::plan
