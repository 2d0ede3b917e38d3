// bootstrap and teardown: a process group's life over a store its members
// share, whichever way they found it: init_process_group's init methods, or
// a Communicator handed a store (torch's, in braid_torch).
#include <sys/random.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <random>
#include <thread>

#include "algorithms/hosts.hpp"
#include "src/common/errors.hpp"
#include "src/common/log.hpp"
#include "src/runtime/context.hpp"
#include "src/runtime/cpu_sets.hpp"
#include "src/runtime/executor.hpp"
#include "src/runtime/link_probe.hpp"
#include "src/runtime/peers.hpp"
#include "src/runtime/positions.hpp"

namespace braid {

namespace {

std::uint64_t random_u64() {
  std::uint64_t v = 0;
  if (getrandom(&v, sizeof v, 0) != sizeof v) v = std::random_device{}() ^ (std::uint64_t(getpid()) << 32);
  return v | 1;  // never 0
}

std::string claim_key(int rank) { return fmt::format("claim/{}", rank); }

// Each rank claims its number in the store before it reads or writes
// anything else there. A second job started on the same MASTER_PORT (whose
// rank 0 then finds the port taken and uses the store already serving it),
// or two processes started as the same rank, would otherwise join the first
// job's rendezvous and both jobs would die as "rank N failed". The claim is
// given back at teardown; a job that crashed leaves its claims behind, which
// only a store that outlives it (braid-store, a file) keeps.
void claim_rank(store::Store& st, int rank, const std::string& where) {
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  const std::string mine = fmt::format("{} pid {} ({:x})", host, ::getpid(), random_u64());
  const std::string got = store::to_string(st.compare_set(claim_key(rank), {}, store::to_bytes(mine)));
  if (got != mine)
    fail(ErrorCode::InvalidArgument,
         "rank {} is already taken in the job at {} (by {}): another job uses the same store (MASTER_ADDR and "
         "MASTER_PORT, or init file), or two processes were started as rank {}; give each job its own port or "
         "file (or group_name)",
         rank, where, got.substr(0, 120), rank);
}

// init's rendezvous timed out: names the ranks that never arrived (no
// "joined/<r>"), the likeliest culprits (stopped, crashed, never started).
[[noreturn]] void throw_missing_ranks(store::Store& st, int world, const Error& e) {
  std::vector<int> missing;
  try {
    store::CallCap cap(Deadline::after(kStoreCallLimit));
    for (int r = 0; r < world && missing.size() < 64; ++r)
      if (!st.try_get(fmt::format("joined/{}", r))) missing.push_back(r);
  } catch (const Error&) {  // the store does not answer: the timeout says what is known
    throw e;
  }
  if (missing.empty()) throw e;
  fail_peer(ErrorCode::Timeout, missing.front(), "{}: init's rendezvous waited for rank(s) {}, which never arrived "
       "(stopped, crashed, or not started; {} of {} ranks did)", e.what(), rank_list(missing),
       world - static_cast<int>(missing.size()), world);
}

// The roster: rank 0 reads every rank's host record and CPU list once and
// publishes them as one key ("roster": a line "identity<TAB>cpus<TAB>shm"
// per rank, shm being its shared-memory address, if it has one), which every
// other rank reads: a rank's init costs the same few store operations
// whatever the world's size (rank 0's grow with it). Returns the shared-
// memory addresses, per global rank.
std::vector<std::string> load_roster(Context& c, store::Store& st) {
  const auto n = static_cast<std::size_t>(c.world_size);
  std::string text;
  if (c.rank == 0) {
    for (std::size_t r = 0; r < n; ++r) {
      const auto host = store::to_string(st.get(fmt::format("host/{}", r), c.timeout));
      const auto cpus = store::to_string(st.get(fmt::format("cpus/{}", r), c.timeout));
      std::string shm;
      try {
        shm = parse_peer_record(host, static_cast<int>(r)).address("shm");
      } catch (const Error&) {  // a malformed record fails that rank's connect, with the reason
      }
      text += host.substr(0, host.find('|')) + '\t' + cpus + '\t' + shm + '\n';
    }
    st.set("roster", store::to_bytes(text));
  } else {
    text = store::to_string(st.get("roster", c.timeout));
  }
  c.host_ids.clear();
  c.cpu_lists.clear();
  std::vector<std::string> shm;
  for (std::size_t pos = 0; pos < text.size();) {
    const auto nl = text.find('\n', pos);
    const auto tab = text.find('\t', pos);
    const auto tab2 = tab == std::string::npos ? tab : text.find('\t', tab + 1);
    if (nl == std::string::npos || tab2 == std::string::npos || tab2 > nl) break;
    c.host_ids.push_back(text.substr(pos, tab - pos));
    c.cpu_lists.push_back(text.substr(tab + 1, tab2 - tab - 1));
    shm.push_back(text.substr(tab2 + 1, nl - tab2 - 1));
    pos = nl + 1;
  }
  if (c.host_ids.size() != n)
    fail(ErrorCode::Store, "the job's roster in the store holds {} ranks' records, not the world's {}: the store "
         "was written by something else", c.host_ids.size(), n);
  return shm;
}

}  // namespace

void bootstrap(const std::shared_ptr<Context>& c, std::shared_ptr<store::Store> st, int rank, int world,
               const std::string& store_host) {
  claim_rank(*st, rank, store_host.empty() ? std::string("this store") : "the store on " + store_host);
  // One job id, chosen by rank 0, lets sockets reject strays from other jobs.
  std::uint64_t job_id;
  if (rank == 0) {
    job_id = random_u64();
    st->set("job", store::to_bytes(fmt::format("{} {}", job_id, world)));
  } else {
    const JobRecord job = parse_job_record(store::to_string(st->get("job", c->timeout)));
    if (job.world_size != world)
      fail(ErrorCode::InvalidArgument, "rank {} was started with world_size {} but rank 0 with {}: every "
           "rank must agree", rank, world, job.world_size);
    job_id = job.id;
  }

  c->rank = rank;
  c->world_size = world;
  c->store = st;
  EngineConfig ec{rank, world, job_id, c->timeout, store_host, c->backend};
  c->engine = std::make_unique<Engine>(ec, st);

  std::vector<int> all(static_cast<std::size_t>(world));
  for (int i = 0; i < world; ++i) all[static_cast<std::size_t>(i)] = i;
  c->world = Group(make_group(0, std::move(all), world, rank));
  c->world.impl()->owner = c;
  auto& wg = *c->world.impl();
  c->engine->add_group(wg.id, wg.ranks);
  // A gone peer's word in the world's window of a failure it learned of
  // (Ledger::knew_failed), for the engine's own findings of it gone.
  c->engine->set_window_word([g = std::weak_ptr<detail::GroupImpl>(c->world.impl())](int peer) {
    const auto impl = g.lock();
    onesided::Window* w = impl ? ready_window(*impl) : nullptr;
    const int q = impl && peer >= 0 && static_cast<std::size_t>(peer) < impl->group_of_global.size()
                      ? impl->group_of_global[static_cast<std::size_t>(peer)] : -1;
    return w && q >= 0 && q != w->me() ? w->ledger().peer_knew_failed(q, static_cast<int>(impl->ranks.size())) : -1;
  });
  // The world's definition: a rank that differs from the first says so in
  // the store, so that after the rendezvous every rank reports it.
  const std::string sig = group_signature(*c, wg);
  const auto first = store::to_string(st->compare_set("group/0", {}, store::to_bytes(sig)));
  if (first != sig) st->set("group/0/mismatch", store::to_bytes(mismatch_text(*c, wg, sig, first)));

  // Rendezvous: init returns once every rank has published its address.
  // Each also marks its own arrival, so that a timeout can say who is
  // missing: last, so that a rank killed between its count and "ready" (the
  // last to come sets it) is missing too, not a rank nobody can name.
  if (st->add("joined", 1) == world) st->set("ready", store::to_bytes("1"));
  st->set(fmt::format("joined/{}", rank), store::to_bytes("1"));
  try {
    st->wait({"ready"}, c->timeout);
  } catch (const Error& e) {
    if (e.code() != ErrorCode::Timeout) throw;
    throw_missing_ranks(*st, world, e);
  }
  if (auto m = st->try_get("group/0/mismatch")) {
    // Everyone fails; the host keeps the store up until all have read why.
    const auto seen = st->add("group/0/mismatch_seen", 1);
    if (c->server && seen < world) {
      const auto limit = Deadline::after(std::min<Millis>(c->timeout, Millis(10000)));
      while (!limit.expired() && st->add("group/0/mismatch_seen", 0) < world)
        std::this_thread::sleep_for(Millis(2));
    }
    fail(ErrorCode::InvalidArgument, "{}", store::to_string(*m));
  }
  const std::vector<std::string> shm = load_roster(*c, *st);
  learn_topology(*c, wg);
  // Every host-mate's word, kept from now on (Engine::keep_words_of): one
  // that leaves on the store host's loss and exits before any message
  // passed between us still says why.
  std::vector<PeerInfo> mates;
  for (int r = 0; r < world; ++r)
    if (r != rank && c->host_ids[static_cast<std::size_t>(r)] == c->host_ids[static_cast<std::size_t>(rank)] &&
        !shm[static_cast<std::size_t>(r)].empty())
      mates.push_back(PeerInfo{r, true, 0, shm[static_cast<std::size_t>(r)]});
  c->engine->keep_words_of("shm", mates);
  // Ranks pinned to distinct CPUs do not share them, though each sees one.
  // The ranks that compete for CPUs are those of one machine (kernel), not
  // only of one host: hosts emulated in network namespaces share its CPUs.
  const int my_machine = wg.machine_of[static_cast<std::size_t>(rank)];
  std::vector<std::string> local_cpus;
  int local_index = 0;  // this rank's place among its machine's ranks
  for (int r = 0; r < world; ++r)
    if (wg.machine_of[static_cast<std::size_t>(r)] == my_machine) {
      if (r == rank) local_index = static_cast<int>(local_cpus.size());
      local_cpus.push_back(c->cpu_lists[static_cast<std::size_t>(r)]);
    }
  c->engine->set_local_ranks(static_cast<int>(local_cpus.size()), cpus::in_union(local_cpus),
                             cpus::oversubscribed(local_cpus), plan::several_hosts(wg.host_of, wg.ranks.size()));
  // The async runner does this rank's share of every async collective. Left
  // to float, two ranks' runners that wake each other can be stacked on one
  // CPU (the scheduler places a woken thread near its waker). Where every
  // local rank may run on every CPU and there are CPUs enough, the runner
  // (only it: the caller's threads stay as they are) takes CPU local-index.
  // (bench/RESULTS.md section 12 says what was and was not measured.)
  c->runner_cpu = cpus::spread_cpu(local_cpus, local_index);
  // A job across hosts measures the link between them, which the choice of
  // plans prices (link_probe.hpp).
  set_measured_link(probe_link(*c, wg));
}

void teardown(Context& c) {
  if (c.destroyed) return;
  c.destroyed = true;
  // Queued async collectives finish (or time out) before the transports go.
  c.runner.reset();
  const int failed = c.engine->failed_count();
  c.engine->shutdown();
  try {
    // Peers that see this process gone from now on know it left
    // (Engine::said_goodbye): its exit is not a failure.
    c.store->set(Engine::goodbye_key(c.rank), store::to_bytes(std::string("1")));
    (void)c.store->delete_key(claim_key(c.rank));  // the number is free again (bootstrap, claim_rank)
    const auto left = c.store->add("left", 1);
    // The host keeps the store up until everyone has left (bounded), since
    // the others still read it to detect failures.
    // Failed ranks never arrive: wait for the survivors only (they read the
    // store to learn of failures).
    const int expected = c.world_size - failed;
    if (c.server && left < expected) {
      const auto limit = Deadline::after(std::min<Millis>(c.timeout, Millis(failed ? 10000 : 30000)));
      while (!limit.expired()) {
        if (c.store->add("left", 0) >= expected) break;
        std::this_thread::sleep_for(Millis(5));
      }
    }
  } catch (const Error& e) {
    BRAID_INFO("teardown: store unavailable: {}", e.what());
  }
  c.engine.reset();
  c.store.reset();
  c.server.reset();
}

}  // namespace braid
