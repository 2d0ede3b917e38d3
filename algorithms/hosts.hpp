// Hosts: the group's ranks grouped by host, as host-aware plans read them
// from Topology::host_of. Ranks need not be contiguous per host (a job laid
// out round-robin puts ranks 0 and 2 on one host), and hosts may hold
// different numbers of ranks (an uneven grid).
#pragma once

#include <algorithm>
#include <cstddef>
#include <unordered_map>
#include <vector>

#include "algorithms/plan.hpp"

namespace braid::plan {

struct Hosts {
  std::vector<std::vector<int>> members;  // per host (in order of first rank), its group ranks ascending
  std::vector<int> host;                  // per group rank: index into members
  std::vector<int> local;                 // per group rank: its index in members[host]

  int count() const { return static_cast<int>(members.size()); }
  int size(int h) const { return static_cast<int>(members[static_cast<std::size_t>(h)].size()); }
  // The rank of host h that stands for local index i where hosts differ in
  // size: local index i mod the host's size.
  int member(int h, int i) const {
    const auto& m = members[static_cast<std::size_t>(h)];
    return m[static_cast<std::size_t>(i % static_cast<int>(m.size()))];
  }
  int largest() const {
    int l = 0;
    for (const auto& m : members) l = std::max(l, static_cast<int>(m.size()));
    return l;
  }
};

// An empty or malformed host_of means "unknown": every rank on one host.
inline Hosts hosts_of(const PlanArgs& a) {
  const int n = a.nranks;
  const auto& of = a.topology.host_of;
  const bool known = of.size() == static_cast<std::size_t>(n);
  Hosts hs;
  hs.host.resize(static_cast<std::size_t>(n));
  hs.local.resize(static_cast<std::size_t>(n));
  std::unordered_map<int, int> index;  // host_of's value -> host index
  for (int r = 0; r < n; ++r) {
    const int id = known ? of[static_cast<std::size_t>(r)] : 0;
    const auto [it, fresh] = index.try_emplace(id, static_cast<int>(hs.members.size()));
    if (fresh) hs.members.emplace_back();
    const auto h = static_cast<std::size_t>(it->second);
    hs.host[static_cast<std::size_t>(r)] = static_cast<int>(h);
    hs.local[static_cast<std::size_t>(r)] = static_cast<int>(hs.members[h].size());
    hs.members[h].push_back(r);
  }
  return hs;
}

// Whether a layout of n ranks names at least two hosts (a malformed one,
// of another size, names none: "unknown", as hosts_of reads it).
inline bool several_hosts(const std::vector<int>& host_of, std::size_t n) {
  if (host_of.size() != n || n == 0) return false;
  return std::any_of(host_of.begin(), host_of.end(), [&](int h) { return h != host_of[0]; });
}
inline bool several_hosts(const PlanArgs& a) {
  return several_hosts(a.topology.host_of, static_cast<std::size_t>(a.nranks));
}

}  // namespace braid::plan
