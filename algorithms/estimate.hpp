// Closed-form estimates: each message algorithm's time as an alpha-beta-gamma
// formula over its rounds, for groups too large to simulate. The simulator
// (cost_model.hpp) plays every step of every rank, so its cost grows with the
// whole plan: n^2 steps for a ring, 1.6 GB at 1,024 ranks. Above
// kSimulateRanks the automatic choice and braid-sim price each algorithm by
// its formula instead, in time linear in the ranks (a round costs a pass
// over them). The formulas follow the plans' rounds with the same link
// costs, host-link sharing and chunking; test_estimate compares them with
// the simulator where both run.
#pragma once

#include <vector>

#include "algorithms/cost_model.hpp"
#include "algorithms/hosts.hpp"
#include "algorithms/plan.hpp"
#include "algorithms/registry.hpp"

namespace braid::plan {

// Groups of more ranks than this are priced by formula (choose, braid-sim).
inline constexpr int kSimulateRanks = 256;

// The group's layout as the formulas price it.
class Net {
 public:
  Net(const PlanArgs& a, const LinkCosts& links);

  int ranks() const { return n_; }
  int hosts() const { return hs_.count(); }
  int per_host() const { return largest_; }  // ranks on the fullest host
  const Hosts& layout() const { return hs_; }
  double bytes(std::int64_t count) const { return static_cast<double>(count) * elem_; }
  double gamma(double bytes) const { return links_.local.gamma_s_per_byte * bytes; }
  double copy(double bytes) const { return links_.local.copy_s_per_byte * bytes; }
  bool same_host(int a, int b) const {
    return hs_.host[static_cast<std::size_t>(a)] == hs_.host[static_cast<std::size_t>(b)];
  }
  const CostParams& link(int a, int b) const { return same_host(a, b) ? links_.local : links_.remote; }
  // One message of `bytes` from a to b with nothing else on the wire.
  double message(int a, int b, double bytes) const {
    return on(link(a, b), bytes);
  }
  // One message between hosts (between ranks of one host where there is one).
  double across(double bytes) const { return hosts() > 1 ? on(links_.remote, bytes) : inside(bytes); }
  double inside(double bytes) const { return on(links_.local, bytes); }
  // A message of `bytes` over link c, its wire shared `share` ways.
  static double on(const CostParams& c, double bytes, double share = 1) {
    return c.alpha_s + protocol_s(c, bytes) + c.beta_s_per_byte * bytes * share;
  }
  // One round in which every rank r with partner(r) >= 0 sends `bytes` to
  // it at once: the slowest of its messages, where the messages that leave
  // (or enter) one host share that host's link, as in the simulator.
  template <class Partner>
  double round(double bytes, Partner partner) const {
    out_.assign(static_cast<std::size_t>(hosts()), 0);
    in_.assign(static_cast<std::size_t>(hosts()), 0);
    for (int r = 0; r < n_; ++r) {
      const int p = partner(r);
      if (p < 0 || same_host(r, p)) continue;
      ++out_[static_cast<std::size_t>(hs_.host[static_cast<std::size_t>(r)])];
      ++in_[static_cast<std::size_t>(hs_.host[static_cast<std::size_t>(p)])];
    }
    double worst = 0;
    for (int r = 0; r < n_; ++r) {
      const int p = partner(r);
      if (p < 0 || p == r) continue;
      double share = 1;
      if (!same_host(r, p))
        share = std::max(out_[static_cast<std::size_t>(hs_.host[static_cast<std::size_t>(r)])],
                         in_[static_cast<std::size_t>(hs_.host[static_cast<std::size_t>(p)])]);
      worst = std::max(worst, on(link(r, p), bytes, share));
    }
    return worst;
  }

 private:
  int n_;
  double elem_;
  LinkCosts links_;
  Hosts hs_;
  int largest_;
  mutable std::vector<int> out_, in_;
};

// Pieces of about `piece` bytes that `bytes` is cut into, between 1 and most
// (the plans' chunking: ring.cpp, double_binary_tree.cpp, hierarchical.cpp).
double pieces(double bytes, double piece, double most);

// The estimate for `alg` on `args`, or a negative number where it has none
// (the one-sided plans, which run on one host and are always simulated).
double estimate_seconds(const Algorithm& alg, const PlanArgs& args, const LinkCosts& links);

}  // namespace braid::plan
