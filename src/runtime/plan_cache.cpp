#include "src/runtime/plan_cache.hpp"

#include <cstdlib>
#include <mutex>
#include <tuple>

#include "src/common/env.hpp"
#include "src/common/errors.hpp"
#include "src/common/log.hpp"
#include "src/runtime/cpu_sets.hpp"
#include "algorithms/cost_model.hpp"
#include "algorithms/registry.hpp"

namespace braid {

const std::map<plan::Collective, std::string>& algo_overrides() {
  static const std::map<plan::Collective, std::string> parsed = [] {
    const char* v = std::getenv("BRAID_ALGO");
    return v && *v ? plan::parse_algo_env(v) : std::map<plan::Collective, std::string>{};
  }();
  return parsed;
}

LinkSettings link_settings() {
  static const LinkSettings s = [] {
    LinkSettings v;
    if (auto ns = env_integer("BRAID_LINK_LATENCY_NS", 1, 1000000000, "a latency in nanoseconds, 1 to 1e9"))
      v.latency_s = static_cast<double>(*ns) * 1e-9;
    if (auto mbps = env_integer("BRAID_LINK_MBPS", 1, 100000000, "a bandwidth in Mbit/s, 1 to 1e8"))
      v.s_per_byte = 8.0 / (static_cast<double>(*mbps) * 1e6);
    return v;
  }();
  return s;
}

namespace {

using Key = std::tuple<int, int, std::int64_t, std::size_t, int, int, std::string, bool, std::vector<int>, std::uint64_t,
                       bool, bool, bool, bool>;

// Which host each rank is on shapes the choice: groups of one size laid out
// differently must not share a cached plan. A hash (FNV-1a) rather than a
// copy keeps the lookup free of allocation; a collision could only cost a
// worse choice, never a wrong result (plans are correct whatever the
// topology says).
std::uint64_t hash_of(const std::vector<int>* v) {
  std::uint64_t h = 1469598103934665603ull;
  if (v)
    for (int x : *v) h = (h ^ static_cast<std::uint64_t>(static_cast<std::uint32_t>(x))) * 1099511628211ull;
  return h;
}

struct Cache {
  std::mutex mu;
  std::map<Key, std::shared_ptr<const CompiledPlan>> plans;
};
Cache& cache() {
  static Cache c;
  return c;
}
// Bounded: a job that sweeps sizes must not grow without limit.
constexpr std::size_t kMaxPlans = 512;

}  // namespace

namespace {
std::mutex measured_mu;
LinkSettings measured_link;  // guarded by measured_mu
}  // namespace

LinkSettings effective_link() {
  LinkSettings l = link_settings();
  std::lock_guard lk(measured_mu);
  if (l.latency_s == 0) l.latency_s = measured_link.latency_s;
  if (l.s_per_byte == 0) l.s_per_byte = measured_link.s_per_byte;
  return l;
}

void set_measured_link(const LinkSettings& measured) {
  {
    std::lock_guard lk(measured_mu);
    if (measured.latency_s == measured_link.latency_s && measured.s_per_byte == measured_link.s_per_byte) return;
    measured_link = measured;
  }
  Cache& c = cache();
  std::lock_guard lk(c.mu);
  c.plans.clear();
}

std::shared_ptr<const CompiledPlan> get_plan(const plan::PlanArgs& args_in, int rank, const char* forced,
                                             bool shared_memory, const std::vector<int>* host_of) {
  const plan::PlanArgs& args = args_in;
  std::string name = forced ? forced : "";
  if (name.empty()) {
    const auto& o = algo_overrides();
    if (auto it = o.find(args.coll); it != o.end()) name = it->second;
  }
  auto build = [&] {
    plan::PlanArgs full = args_in;
    if (host_of) full.topology.host_of = *host_of;
    const plan::PlanArgs& args = full;
    // Per link: ranks of one host price their pairs as the transport between
    // them (shared memory, or what the backend forces), pairs across hosts
    // as the backend's link between hosts (TCP, or RDMA under 'verbs').
    const plan::CostParams& between = args.topology.rdma ? plan::kRdma : plan::kTcpLoopback;
    plan::CostParams within = shared_memory || args.topology.host_shares_memory ? plan::kSharedMemory : between;
    // Priced by where the bytes are where that chose well (cost_model.hpp,
    // prices_caches), with this machine's last-level cache.
    if (shared_memory && plan::prices_caches(args))
      within = plan::with_caches(within, cpus::last_level_cache_bytes(), 0.0);
    const LinkSettings link = effective_link();
    const plan::CostParams remote = plan::with_link(between, link.latency_s, link.s_per_byte);
    const plan::Algorithm* a = plan::choose(args.coll, args, plan::link_costs(within, remote, args.topology.host_of), name);
    // A message plan between hosts is built as this rank's slice only
    // (PlanArgs::slice_rank): its cost follows the rank's own steps, not the
    // world's. Fast boxes and one-sided plans read the other ranks' lists.
    if (!shared_memory && !args.topology.rdma) full.slice_rank = rank;
    auto p = std::make_shared<const plan::Plan>(a->build(args));
    BRAID_TRACE("plan {} for {} n={} count={} root={}", a->name, plan::collective_name(args.coll),
                args.nranks, args.count, args.root);
    return compile_plan(std::move(p), rank, shared_memory);
  };
  if (!args.splits.empty()) return build();
  const Key key{static_cast<int>(args.coll), args.nranks, args.count, args.elem_size, args.root, rank, name,
                shared_memory, args.topology.device_of, hash_of(host_of), args.topology.shared_cpus,
                args.topology.mapped_buffers, args.topology.rdma, args.topology.host_shares_memory};
  Cache& c = cache();
  {
    std::lock_guard lk(c.mu);
    if (auto it = c.plans.find(key); it != c.plans.end()) return it->second;
  }
  auto compiled = build();
  std::lock_guard lk(c.mu);
  if (c.plans.size() >= kMaxPlans) c.plans.clear();
  c.plans.emplace(key, compiled);
  return compiled;
}

}  // namespace braid
