// Context: the state of an initialised process group: the default one that
// init_process_group makes, and one per braid::Communicator.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "braid/group.hpp"
#include "braid/options.hpp"
#include "braid/tensor.hpp"
#include "src/runtime/async_runner.hpp"
#include "src/runtime/engine.hpp"
#include "src/runtime/handoff.hpp"
#include "src/store/store.hpp"

namespace braid {

namespace onesided {
class Window;
}
struct ExecCall;
struct Context;

namespace detail {
struct GroupImpl {
  // The process group (default, or a Communicator) the group belongs to:
  // ops on the group run on its engine. Weak: a Group may outlive it, and
  // then its ops fail clearly (op_context).
  std::weak_ptr<Context> owner;
  std::uint32_t id = 0;
  // Unique in the process, across inits (ids start again at each): what a
  // per-thread cache of plans keys a group by (issue.cpp).
  std::uint64_t serial = 0;
  std::vector<int> ranks;            // global ranks in group order
  std::vector<int> group_of_global;  // global rank -> group rank or -1
  int my_rank = -1;                  // -1: the caller is not a member
  std::atomic<std::uint64_t> collective_seq{0};  // tags successive collectives
  // Which members share a host (host index per group rank), and whether all
  // do and talk through shared memory: the cost model the choice uses.
  std::vector<int> host_of;
  // Which members run on one machine (one kernel: its boot id), whatever
  // their network namespaces: hosts emulated on one machine share its CPUs.
  std::vector<int> machine_of;
  bool shared_memory = false;
  // The one-sided window that joins the members (transports/registry.hpp,
  // window_kind): "shm" when shared_memory, "verbs" under backend 'verbs',
  // empty when none does (message plans only).
  std::string window_kind;
  // Members on one host talk through shared memory (prices a group that
  // spans hosts pair by pair: plan_cache.hpp).
  bool host_shares_memory = false;
  // One-sided plans (possible when window_kind is set): they run one at a
  // time, in issue order (a ticket taken at issue), on the group's window
  // (transports/one_sided.hpp).
  std::atomic<std::uint64_t> one_sided_issued{0};
  std::atomic<std::uint64_t> one_sided_turn{0};
  std::atomic<int> one_sided_waiters{0};
  std::mutex one_sided_mu;  // with the cv, only for calls not yet in turn
  std::condition_variable one_sided_cv;
  // Made by the group's first collective of any kind (group_window() in
  // executor.hpp), under window_mu; window_ready says it is there.
  std::shared_ptr<onesided::Window> window;
  // The one-sided runner compiled for that window's concrete type, found
  // once with it (one_sided.cpp), so a call pays one indirect call for it.
  void (*window_runner)(Engine&, const ExecCall&, onesided::Window&) = nullptr;
  std::mutex window_mu;
  std::atomic<bool> window_ready{false};
  bool window_broken = false;  // a one-sided call failed part-way (one_sided.cpp)
  // How the group's one-sided calls hand staged chunks between CPUs, chosen
  // from their times (handoff.hpp); used in the group's turn only.
  HandoffChooser handoff;
  // Collectives directly on device memory (CUDA IPC): the device this rank
  // uses with the group (-1 before the first such call) and which members
  // share a GPU (device_topology.hpp). Under device_mu, a mutex of its own:
  // the first call holds it while it waits for the peers, and a call that
  // needs one_sided_mu to hand on its turn must not wait behind that.
  std::mutex device_mu;
  int cuda_device = -1;
  std::vector<int> device_of;
  // split() calls made on this group so far: the same on every member (they
  // call it in the same order), so it names a split across them.
  std::uint64_t splits = 0;
  // agree() and shrink_group() calls made on this group so far (the same
  // on every survivor: agreement.hpp).
  std::uint64_t decisions = 0;
};
}  // namespace detail

struct Context {
  int rank = 0;
  int world_size = 1;
  std::string backend;
  std::string init_method;
  Millis timeout{300000};
  std::shared_ptr<store::Store> store;  // namespaced by group_name
  std::unique_ptr<store::TcpStoreServer> server;  // when this process hosts it
  std::unique_ptr<Engine> engine;
  // Async collectives; declared after the engine so it stops first.
  std::unique_ptr<AsyncRunner> runner;
  Group world;
  std::uint32_t next_group_id = 1;
  bool destroyed = false;  // teardown ran (Communicator::destroy)
  int runner_cpu = -1;      // where the async runner runs (bootstrap), -1: anywhere
  // The roster (bootstrap, load_roster): per global rank, its host identity
  // and its CPU list, as published at init. Read once, from one key, so
  // that groups learn their layout without a store call per member.
  std::vector<std::string> host_ids, cpu_lists;
  // An async call's ticket and its place in the runner's queue are taken
  // together: two threads issuing at once must not queue ticket 5 ahead of
  // ticket 4, which the runner would then wait on behind it.
  std::mutex issue_mu;

  Context() = default;
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;
  // A process that returns from main without destroy_process_group (one
  // that caught an error and gave up, say) and hosts the store keeps it up
  // a moment, until the others have disconnected (at most 10 s): they may
  // still need its failure log to name the rank that failed first.
  ~Context();
};

// The default context; throws braid::Error(InvalidState) before init.
Context& context();
bool has_context();
std::shared_ptr<Context> shared_context();  // the default one, or null
void set_context(std::shared_ptr<Context> c);
std::shared_ptr<Context> take_context();
// The context an op runs in: options.group's owner, or the default one.
Context& op_context(const OpOptions& o);

// Makes c a running process group of `world` ranks over `st` (a store
// already namespaced for it): the job record, the engine, the world group,
// the rendezvous, topology. c.backend and c.timeout are set by the caller.
void bootstrap(const std::shared_ptr<Context>& c, std::shared_ptr<store::Store> st, int rank, int world,
               const std::string& store_host);
// Stops c's async work and engine, and says goodbye through its store.
void teardown(Context& c);
// What init_process_group and a Communicator check before any store
// traffic: a backend this build can run, a valid BRAID_ALGO, a positive
// timeout. Each refusal says why.
void check_group_options(const std::string& backend, Millis timeout);
// A new group of c's ranks (every member of c calls it alike).
Group new_group_in(const std::shared_ptr<Context>& c, const std::vector<int>& ranks);

// The group an op runs on (options.group or world), checked: the caller must
// be a member.
const detail::GroupImpl& op_group(const OpOptions& o, const char* op);
// Message contexts: point-to-point and collective traffic of each group are
// matched separately, so a collective never consumes a user's message.
inline std::uint32_t p2p_ctx(const detail::GroupImpl& g) { return g.id * 2; }
inline std::uint32_t coll_ctx(const detail::GroupImpl& g) { return g.id * 2 + 1; }
// Checks that `global_rank` is a member of g; `what` names the argument.
void check_member(const detail::GroupImpl& g, int global_rank, const char* what, const char* op);
// Checks a tensor argument (host memory, sane count and pointer).
void check_tensor(const Tensor& t, const char* what, const char* op);
// The op's timeout (options.timeout or the process group's default).
Millis op_timeout(const OpOptions& o);
// A group id for a group only some ranks make (split, shrink_group): taken
// from a counter in the store, in a range of its own above new_group's.
std::uint32_t take_group_id(Context& c);
// Checks an id a member read from the store (anyone could have written it).
bool taken_group_id(std::uint64_t id);
std::shared_ptr<detail::GroupImpl> make_group(std::uint32_t id, std::vector<int> ranks,
                                              int world_size, int my_global_rank);
// Learns the group's topology from the store (host identities), records the
// group's definition there and checks every rank agrees on it (the first
// definition to arrive wins; a rank that differs gets the error).
void agree_on_group(Context& c, detail::GroupImpl& g);
void learn_topology(Context& c, detail::GroupImpl& g);
std::string group_signature(const Context& c, const detail::GroupImpl& g);
std::string mismatch_text(const Context& c, const detail::GroupImpl& g, const std::string& mine,
                          const std::string& first);

}  // namespace braid
