// The algorithm registry. Adding an algorithm: write algorithms/<name>.cpp,
// declare its functions in generators.hpp, add one line to the list below.
#include "algorithms/registry.hpp"

#include "algorithms/generators.hpp"

namespace braid::plan {

namespace {

std::vector<Algorithm> build_list() {
  return {
      // ---- algorithm list: {name, collective, build, supports} one per line ----
      {"recursive_doubling", Collective::AllReduce, recursive_doubling_allreduce, nullptr},
      {"recursive_doubling", Collective::AllGather, recursive_doubling_allgather, nullptr},
      {"halving_doubling", Collective::AllReduce, halving_doubling_allreduce, nullptr},
      {"halving_doubling", Collective::ReduceScatter, halving_doubling_reducescatter, nullptr},
      {"bruck", Collective::AllGather, bruck_allgather, nullptr},
      {"bruck", Collective::AllToAll, bruck_alltoall, bruck_alltoall_supports},
      {"pairwise", Collective::AllToAll, pairwise_alltoall, pairwise_alltoall_supports},
      {"ring", Collective::AllReduce, ring_allreduce, nullptr},
      {"ring", Collective::ReduceScatter, ring_reducescatter, nullptr},
      {"ring", Collective::AllGather, ring_allgather, nullptr},
      {"ring", Collective::Broadcast, ring_broadcast, nullptr},
      {"ring", Collective::Reduce, ring_reduce, nullptr},
      {"tree", Collective::Broadcast, tree_broadcast, nullptr},
      {"tree", Collective::Reduce, tree_reduce, nullptr},
      {"tree", Collective::AllReduce, tree_allreduce, nullptr},
      {"tree", Collective::Gather, tree_gather, nullptr},
      {"tree", Collective::Scatter, tree_scatter, nullptr},
      {"double_binary_tree", Collective::Broadcast, double_binary_tree_broadcast, nullptr},
      {"double_binary_tree", Collective::Reduce, double_binary_tree_reduce, nullptr},
      {"double_binary_tree", Collective::AllReduce, double_binary_tree_allreduce, nullptr},
      {"direct", Collective::Gather, direct_gather, nullptr},
      {"direct", Collective::Scatter, direct_scatter, nullptr},
      {"direct", Collective::AllToAll, direct_alltoall, direct_alltoall_supports},
      {"dissemination", Collective::Barrier, dissemination_barrier, nullptr},
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
      {"oneshot", Collective::Reduce, oneshot_reduce, one_sided_only},
      {"peer_read", Collective::Reduce, peer_read_reduce, one_sided_only},
      {"peer_read", Collective::Gather, peer_read_gather, one_sided_only},
      {"peer_read", Collective::Scatter, peer_read_scatter, one_sided_only},
      {"peer_read", Collective::AllToAll, peer_read_alltoall, peer_read_alltoall_supports},
      {"signal", Collective::Barrier, signal_barrier, one_sided_only},
      // host-aware (messages; inside hosts, then across, then inside):
      {"hierarchical", Collective::AllReduce, hierarchical_allreduce, nullptr, true, hierarchical_offered},
      {"hierarchical", Collective::ReduceScatter, hierarchical_reducescatter, nullptr, true, hierarchical_offered},
      {"hierarchical", Collective::AllGather, hierarchical_allgather, nullptr, true, hierarchical_offered},
      {"hierarchical", Collective::Broadcast, hierarchical_broadcast, nullptr, true, hierarchical_offered},
      {"hierarchical", Collective::Reduce, hierarchical_reduce, nullptr, true, hierarchical_offered},
      {"hierarchical", Collective::Barrier, hierarchical_barrier, nullptr, true, hierarchical_offered},
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
