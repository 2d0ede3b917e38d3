#include "src/runtime/context.hpp"
#include "transports/registry.hpp"

#include <algorithm>
#include <cstdlib>

#include "braid/ops.hpp"
#include "src/common/errors.hpp"
#include "src/device/device_staging.hpp"
#include "src/runtime/executor.hpp"
#include "src/runtime/plan_cache.hpp"

namespace braid {

namespace {
std::shared_ptr<Context> g_context;
}

Context::~Context() {
  // Leaving (a rank that caught an error returns from main) after learning
  // of a failure, or giving up on a rank: say which in the world group's
  // window, where a local peer waiting on this rank looks once it finds it
  // gone, and in the goodbye (Engine::leaving_word).
  int why = -1;
  try {
    if (!destroyed && engine) why = engine->leaving_word();
    if (!destroyed && engine && world.valid())
      if (onesided::Window* w = ready_window(*world.impl())) w->ledger().knew_failed(why);
  } catch (...) {
  }
  if (destroyed) return;
  try {
    runner.reset();
    if (engine) engine->shutdown(why);  // publishes its failures, says goodbye (and why)
    if (!server) return;
    engine.reset();
    store.reset();  // this process's own connections to the store close
    server->linger(std::min(timeout, Millis(10000)));
  } catch (...) {  // on the way out: nothing to report to
  }
}

Context& context() {
  if (!g_context)
    fail(ErrorCode::InvalidState,
         "Braid is not initialised: call braid::init_process_group() before any op");
  return *g_context;
}
bool has_context() { return g_context != nullptr; }
std::shared_ptr<Context> shared_context() { return g_context; }
void set_context(std::shared_ptr<Context> c) { g_context = std::move(c); }
std::shared_ptr<Context> take_context() { return std::move(g_context); }

Context& op_context(const OpOptions& o) {
  if (!o.group || !o.group->valid()) return context();
  // The owner outlives the op: destroying a process group while its ops
  // run is the caller's error, as with destroy_process_group.
  Context* c = o.group->impl()->owner.lock().get();
  if (!c || c->destroyed)
    fail(ErrorCode::InvalidState, "options.group belongs to a process group that was destroyed: expected "
         "a group of a live process group (destroy_process_group or Communicator::destroy ran)");
  return *c;
}

static std::string ranks_text(const std::vector<int>& r) {
  std::string s = "[";
  for (std::size_t i = 0; i < r.size(); ++i) s += (i ? ", " : "") + std::to_string(r[i]);
  return s + "]";
}

const detail::GroupImpl& op_group(const OpOptions& o, const char* op) {
  Context& c = op_context(o);
  const Group& g = o.group ? *o.group : c.world;
  if (!g.valid())
    fail(ErrorCode::InvalidArgument, "{}: options.group is not a valid group: expected one made "
         "by braid::new_group() or braid::world()", op);
  const auto& impl = *g.impl();
  if (impl.my_rank < 0)
    fail(ErrorCode::InvalidArgument, "{}: rank {} is not a member of group {} with ranks {}", op,
         c.rank, impl.id, ranks_text(impl.ranks));
  return impl;
}

void check_member(const detail::GroupImpl& g, int global_rank, const char* what, const char* op) {
  if (global_rank < 0 || global_rank >= static_cast<int>(g.group_of_global.size()) ||
      g.group_of_global[static_cast<std::size_t>(global_rank)] < 0)
    fail(ErrorCode::InvalidArgument, "{}: {} = {} is not a rank of the group: expected one of {}",
         op, what, global_rank, ranks_text(g.ranks));
}

void check_tensor(const Tensor& t, const char* what, const char* op) {
  if (t.count < 0)
    fail(ErrorCode::InvalidArgument, "{}: {} has a negative element count ({})", op, what, t.count);
  if (t.count > 0 && t.data == nullptr)
    fail(ErrorCode::InvalidArgument, "{}: {} has {} elements but a null data pointer", op, what, t.count);
  if (static_cast<unsigned>(t.dtype) >= static_cast<unsigned>(kNumDTypes))
    fail(ErrorCode::InvalidArgument, "{}: {} has an unknown dtype ({})", op, what, static_cast<int>(t.dtype));
  // A device tensor: NotSupported with the reason where CUDA is not usable
  // (ops carry usable ones through pinned stand-ins, src/device/device_staging).
  if (!t.device.is_cpu()) detail::check_device_tensor(t, what, op);
}

Millis op_timeout(const OpOptions& o) {
  if (o.timeout.count() < 0)
    fail(ErrorCode::InvalidArgument, "options.timeout is negative ({} ms): expected 0 (default) or more",
         o.timeout.count());
  return o.timeout.count() > 0 ? o.timeout : op_context(o).timeout;
}

namespace {
// Ids of groups made by some ranks only start here; new_group's count up
// from 1 and stay far below. Ids stay under 2^31: a group has contexts
// 2 id and 2 id + 1.
constexpr std::uint64_t kTakenIdBase = std::uint64_t{1} << 30;
}  // namespace

std::uint32_t take_group_id(Context& c) {
  const auto taken = static_cast<std::uint64_t>(c.store->add("split/next_id", 1));
  if (taken >= kTakenIdBase)
    fail(ErrorCode::InvalidState, "this job has made {} groups by split or shrink_group, the most it can", kTakenIdBase);
  return static_cast<std::uint32_t>(kTakenIdBase + taken);
}

bool taken_group_id(std::uint64_t id) { return id >= kTakenIdBase && id < 2 * kTakenIdBase; }

std::shared_ptr<detail::GroupImpl> make_group(std::uint32_t id, std::vector<int> ranks,
                                              int world_size, int my_global_rank) {
  static std::atomic<std::uint64_t> serials{0};
  auto g = std::make_shared<detail::GroupImpl>();
  g->id = id;
  g->serial = serials.fetch_add(1, std::memory_order_relaxed) + 1;
  g->group_of_global.assign(static_cast<std::size_t>(world_size), -1);
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    const int r = ranks[i];
    if (r < 0 || r >= world_size)
      fail(ErrorCode::InvalidArgument, "new_group: rank {} is out of range: expected 0..{}", r,
           world_size - 1);
    if (g->group_of_global[static_cast<std::size_t>(r)] >= 0)
      fail(ErrorCode::InvalidArgument, "new_group: rank {} appears twice in {}", r, ranks_text(ranks));
    g->group_of_global[static_cast<std::size_t>(r)] = static_cast<int>(i);
  }
  g->my_rank = g->group_of_global[static_cast<std::size_t>(my_global_rank)];
  g->ranks = std::move(ranks);
  return g;
}

void learn_topology(Context& c, detail::GroupImpl& g) {
  // Every member's host identity, as each rank's engine published it
  // ("host/<rank>" = "identity|...", gathered in the roster): the same
  // records give every rank the same answer.
  std::vector<std::string> hosts, machines;
  g.host_of.clear();
  g.machine_of.clear();
  auto index_of = [](std::vector<std::string>& seen, const std::string& id) {
    auto it = std::find(seen.begin(), seen.end(), id);
    if (it == seen.end()) it = seen.insert(seen.end(), id);
    return static_cast<int>(it - seen.begin());
  };
  for (int r : g.ranks) {
    std::string id;
    if (static_cast<std::size_t>(r) < c.host_ids.size()) {
      id = c.host_ids[static_cast<std::size_t>(r)];
    } else {  // no roster (yet): the member's own record
      const auto v = store::to_string(c.store->get(fmt::format("host/{}", r), c.timeout));
      id = v.substr(0, v.find('|'));
    }
    g.host_of.push_back(index_of(hosts, id));
    g.machine_of.push_back(index_of(machines, id.substr(0, id.find('/'))));  // the boot id (peers.cpp)
  }
  // A backend that forces another transport ("verbs", "tcp") keeps even
  // local ranks out of each other's memory.
  g.shared_memory = hosts.size() <= 1 && transports::shares_host_memory(c.backend);
  g.window_kind = transports::window_kind(c.backend, static_cast<int>(hosts.size()));
  g.host_shares_memory = transports::shares_host_memory(c.backend);
}

std::string group_signature(const Context& c, const detail::GroupImpl& g) {
  // Everything that must match on every rank for collectives to line up.
  const char* algo = std::getenv("BRAID_ALGO");
  const LinkSettings link = link_settings();
  return fmt::format("ranks={};algo={};backend={};link={}/{}", ranks_text(g.ranks), algo ? algo : "", c.backend,
                     link.latency_s, link.s_per_byte);
}

std::string mismatch_text(const Context& c, const detail::GroupImpl& g, const std::string& mine,
                          const std::string& first) {
  return fmt::format("group {} does not match across ranks: rank {} has '{}' but another rank created it "
                     "with '{}'; every rank must call new_group with the same ranks in the same order, with "
                     "the same backend, BRAID_ALGO and BRAID_LINK_*", g.id, c.rank, mine, first);
}

void agree_on_group(Context& c, detail::GroupImpl& g) {
  c.engine->add_group(g.id, g.ranks);  // a failure poisons the groups that hold it
  learn_topology(c, g);
  const std::string mine = group_signature(c, g);
  const auto key = fmt::format("group/{}", g.id);
  const auto got = store::to_string(c.store->compare_set(key, {}, store::to_bytes(mine)));
  if (got != mine) fail(ErrorCode::InvalidArgument, "{}", mismatch_text(c, g, mine, got));
}

}  // namespace braid
