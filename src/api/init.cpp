// init_process_group: the three init methods, rendezvous, and teardown.
//
//   env://          MASTER_ADDR, MASTER_PORT, and the rank and size from
//                   RANK/WORLD_SIZE, Slurm, Open MPI or PMI variables
//                   (launcher_env.hpp; under Slurm the store's host and
//                   port default to the step's first node and its job id);
//   tcp://HOST:PORT rank 0 (or, with automatic ranks, the first process to
//                   bind PORT on HOST) hosts the TCP store there;
//   file:///path    a FileStore on a shared file system;
//   pmix://         the ranks and the store's address from a PMIx launcher
//                   (pmix_init.hpp); env:// does the same under one when
//                   MASTER_ADDR and MASTER_PORT are not set.
// With tcp:// or file:// and rank -1, ranks are given in order of arrival;
// tcp:// on a multicast group meets over multicast (multicast_init.hpp).
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <optional>
#include <thread>

#include "braid/process_group.hpp"
#include "src/api/init_method.hpp"
#include "src/api/launcher_env.hpp"
#include "src/api/multicast_init.hpp"
#include "src/api/pmix_init.hpp"
#include "braid/version.hpp"
#include "src/common/errors.hpp"
#include "src/common/log.hpp"
#include "src/common/socket.hpp"
#include "src/runtime/context.hpp"
#include "transports/registry.hpp"
#include "src/runtime/plan_cache.hpp"

namespace braid {

namespace {

using detail::parse_int;

std::mutex g_init_mu;

struct Endpoint {
  std::string host;
  int port = -1;
};

std::optional<std::string> env(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) return std::nullopt;
  return std::string(v);
}



// Multicast init: rank 0 writes every process's id in rank order to the
// store; the others find their own there.
int multicast_rank(detail::MulticastMeeting& meeting, store::Store& st, Millis timeout, const std::string& m) {
  const std::string key = "multicast/ids";
  if (!meeting.ids().empty()) {
    std::string ids;
    for (auto id : meeting.ids()) ids += fmt::format("{}{:016x}", ids.empty() ? "" : ",", id);
    st.set(key, store::to_bytes(ids));
    meeting.keep_announcing();
    return 0;
  }
  const std::string ids = store::to_string(st.get(key, timeout));
  const std::string mine = fmt::format("{:016x}", meeting.id());
  for (std::size_t pos = 0, r = 0; pos < ids.size(); pos += 17, ++r)
    if (ids.compare(pos, 16, mine) == 0) return static_cast<int>(r);
  fail(ErrorCode::InvalidArgument, "multicast init ({}): the world was full when this process arrived (its rank 0 "
       "heard world_size others first): two jobs share the address, port and group_name", m);
}

// Hosts the store on host:port, or returns null when the port is taken (a
// standalone braid-store, or a previous job's store that is still closing):
// the client then finds out which when it connects. A port taken by no
// listener is taken for a moment: a peer's connect drew it as its own
// ephemeral port and met itself (net::connected_to_itself), and lets go.
std::unique_ptr<store::TcpStoreServer> host_store(const std::string& host, int port) {
  const Deadline until = Deadline::after(Millis(1000));
  for (;;) {
    if (auto s = store::TcpStoreServer::try_create(host, port)) return s;
    const Fd probe = net::connect_once(net::resolve(host, port), Deadline::after(Millis(200)));
    if (probe.valid() || errno != ECONNREFUSED) break;
    if (until.expired()) {
      // Still refused after a second, on an address of this host: the port
      // is held by a socket that does not listen (a connection of this host,
      // one closing in TIME_WAIT say), and no store will ever answer there.
      // Elsewhere a braid-store may yet come up: the clients wait for it.
      if (net::try_listen_on(net::resolve(host, 0)).valid()) {
        std::string range;
        std::getline(std::ifstream("/proc/sys/net/ipv4/ip_local_port_range") >> std::ws, range);
        fail(ErrorCode::Store, "rank 0 cannot host the store on {}:{}: the port is in use on this host but nothing "
             "listens there (a connection holds it, perhaps one closing in TIME_WAIT): choose a MASTER_PORT outside "
             "this host's ephemeral ports ({}, net.ipv4.ip_local_port_range)", host, port, range);
      }
      break;
    }
    std::this_thread::sleep_for(Millis(10));
  }
  BRAID_INFO("port {} is taken: using the store already serving it", port);
  return nullptr;
}

}  // namespace

namespace detail {

// A store another rank hosts (env://, tcp://: rank 0, unless braid-store
// serves the port) that is unreachable during init most likely went with
// that rank: the error names rank 0, as the engine's does later.
[[noreturn]] void rethrow_naming_rank0(const Error& e) {
  // A store call that got no answer in time names nobody: the store's host
  // is stuck, or the way to it is (a link down), or rank 0 never wrote what
  // it owes (after the rendezvous only rank 0 writes what others wait for).
  // A store that takes the connection but answers nothing is its host
  // stopped (or another service on the port, which the text says too).
  const std::string what = e.what();
  const bool unanswered = e.code() == ErrorCode::Store && what.find("did not answer a request") != std::string::npos;
  if ((e.code() == ErrorCode::Timeout && what.find("in the store at") != std::string::npos) || unanswered)
    if (e.peer() < 0)
      throw Error(ErrorCode::Timeout, fmt::format("{} (rank 0 hosts that store: it, or the way to it, is stuck)", what), 0);
  if (e.code() != ErrorCode::Store || std::string(e.what()).find("is unreachable") == std::string::npos) throw e;
  throw Error(ErrorCode::PeerFailure,
              fmt::format("rank 0 failed: the store it hosts is unreachable ({}); rank 0 hosts it unless a "
                          "braid-store serves that port", e.what()),
              0);
}

std::shared_ptr<store::Store> connect_store(const std::string& host, int port, Millis timeout, bool hosted_here) {
  try {
    return std::make_shared<store::TcpStore>(host, port, timeout);
  } catch (const Error& e) {
    if (hosted_here) throw;
    detail::rethrow_naming_rank0(e);
  }
}

int parse_int(const std::string& text, const char* what, long lo, long hi) {
  char* end = nullptr;
  errno = 0;
  long v = std::strtol(text.c_str(), &end, 10);
  if (errno || end == text.c_str() || *end != '\0' || v < lo || v > hi)
    fail(ErrorCode::InvalidArgument, "{} = '{}' is not valid: expected an integer in {}..{}", what,
         text.substr(0, 100), lo, hi);
  return static_cast<int>(v);
}

InitMethod parse_init_method(const std::string& m) {
  InitMethod r;
  if (m.empty() || m.rfind("env://", 0) == 0) return r;
  if (m.rfind("tcp://", 0) == 0) {
    const std::string hp = m.substr(6);
    const auto colon = hp.rfind(':');
    if (colon == std::string::npos || colon == 0 || colon + 1 == hp.size())
      fail(ErrorCode::InvalidArgument, "init_method '{}' is not valid: expected tcp://HOST:PORT", m.substr(0, 200));
    r.kind = InitMethod::Kind::Tcp;
    r.host = hp.substr(0, colon);
    r.port = parse_int(hp.substr(colon + 1), "port", 1, 65535);
    return r;
  }
  if (m.rfind("pmix://", 0) == 0) {
    if (m.size() > 7)
      fail(ErrorCode::InvalidArgument, "init_method '{}' is not valid: expected pmix:// alone (the launcher gives "
           "the rest)", m.substr(0, 200));
    r.kind = InitMethod::Kind::Pmix;
    return r;
  }
  if (m.rfind("file://", 0) == 0) {
    r.kind = InitMethod::Kind::File;
    r.path = m.substr(7);
    if (r.path.empty() || r.path[0] != '/')
      fail(ErrorCode::InvalidArgument, "init_method '{}' is not valid: expected file:///absolute/path", m.substr(0, 200));
    return r;
  }
  fail(ErrorCode::InvalidArgument, "unknown init_method '{}': expected env://, tcp://HOST:PORT, file:///path or pmix://",
       m.substr(0, 200));
}

}  // namespace detail

void check_group_options(const std::string& backend, Millis timeout) {
  transports::check_backend(backend);
  algo_overrides();  // a bad BRAID_ALGO fails here, before any store exists
  link_settings();   // and a bad BRAID_LINK_*
  handoff_setting();  // and a bad BRAID_HANDOFF
  if (timeout.count() <= 0)
    fail(ErrorCode::InvalidArgument, "timeout must be positive, got {} ms", timeout.count());
}

void init_process_group(const InitOptions& o) {
  std::lock_guard g(g_init_mu);
  if (has_context())
    fail(ErrorCode::InvalidState,
         "init_process_group was called twice: call destroy_process_group() first");
  check_group_options(o.backend, o.timeout);
  if (o.rank < -1 || o.world_size < -1 || o.world_size == 0)
    fail(ErrorCode::InvalidArgument,
         "rank = {} and world_size = {}: expected rank >= 0 (or -1) and world_size >= 1 (or -1)",
         o.rank, o.world_size);

  auto c = std::make_unique<Context>();
  c->backend = o.backend;
  c->init_method = o.init_method.empty() ? "env://" : o.init_method;
  c->timeout = o.timeout;
  int rank = o.rank, world = o.world_size;
  std::shared_ptr<store::Store> base;
  std::string store_host = "127.0.0.1";
  bool auto_rank = false;
  // Multicast init: the meeting lives until init ends, rank 0 announcing the
  // store for whoever still listens.
  std::unique_ptr<detail::MulticastMeeting> meeting;
  const std::string& m = c->init_method;
  detail::InitMethod how = detail::parse_init_method(m);
  // Under a PMIx launcher with nothing else saying where the store is.
  if (how.kind == detail::InitMethod::Kind::Env && detail::pmix_built() && detail::under_pmix() &&
      !env("MASTER_ADDR") && !env("MASTER_PORT")) {
    BRAID_INFO("env:// under a PMIx launcher without MASTER_ADDR/MASTER_PORT: meeting through PMIx");
    how.kind = detail::InitMethod::Kind::Pmix;
  }

  if (how.kind == detail::InitMethod::Kind::Pmix) {
    detail::PmixMeeting pm = detail::pmix_meet(o.group_name, o.timeout);
    if ((rank >= 0 && rank != pm.rank) || (world >= 0 && world != pm.size))
      fail(ErrorCode::InvalidArgument, "pmix://: rank {} of {} passed, but the launcher says rank {} of {}: pass -1 "
           "(or nothing) and let it say", rank, world, pm.rank, pm.size);
    rank = pm.rank;
    world = pm.size;
    c->server = std::move(pm.server);
    store_host = pm.store_host;
    base = detail::connect_store(pm.store_host, pm.store_port, o.timeout, c->server != nullptr);
  } else if (how.kind == detail::InitMethod::Kind::Env) {
    detail::rank_and_size_from_env(rank, world);
    auto addr = env("MASTER_ADDR");
    auto port = env("MASTER_PORT");
    if (!addr || !port)
      if (auto slurm = detail::store_from_slurm()) {
        // Under srun: the step's first node hosts the store (task 0 runs there).
        if (!addr) addr = slurm->host;
        if (!port) port = std::to_string(slurm->port);
        BRAID_INFO("env:// under Slurm: the store on {}:{} (the step's first node; MASTER_ADDR and MASTER_PORT "
                   "win where set)", *addr, *port);
      }
    if (!addr && !port && rank < 0 && world < 0) {
      // Started alone, with no launcher and nothing in the environment: a
      // world of one (MPI's singleton init), on a store of its own.
      BRAID_INFO("env:// without MASTER_ADDR, MASTER_PORT, RANK or WORLD_SIZE: running as a world of 1");
      rank = 0;
      world = 1;
      c->server = store::TcpStoreServer::try_create("127.0.0.1", 0);
      if (!c->server) fail(ErrorCode::Store, "a world of 1 could not host its own store on 127.0.0.1");
      addr = "127.0.0.1";
      port = std::to_string(c->server->port());
    }
    if (!addr) fail(ErrorCode::InvalidArgument, "init_method env:// needs MASTER_ADDR (the store host) in the environment");
    if (!port) fail(ErrorCode::InvalidArgument, "init_method env:// needs MASTER_PORT in the environment");
    if (rank < 0)
      fail(ErrorCode::InvalidArgument, "init_method env:// needs the rank: set RANK (or SLURM_PROCID, "
           "OMPI_COMM_WORLD_RANK, PMI_RANK) or pass InitOptions::rank");
    if (world < 0)
      fail(ErrorCode::InvalidArgument, "init_method env:// needs the world size: set WORLD_SIZE (or "
           "SLURM_NTASKS, OMPI_COMM_WORLD_SIZE, PMI_SIZE) or pass InitOptions::world_size");
    const int p = parse_int(*port, "MASTER_PORT", 1, 65535);
    store_host = *addr;
    // Rank 0 hosts the store unless one already serves the port (braid-store).
    // On MASTER_ADDR's interface only: the store is unauthenticated, and
    // every interface would open it to every network the host is on.
    if (rank == 0 && !c->server) c->server = host_store(*addr, p);
    base = detail::connect_store(*addr, p, o.timeout, c->server != nullptr);
  } else if (how.kind == detail::InitMethod::Kind::Tcp && detail::is_multicast_host(how.host)) {
    if (world < 0) {
      if (auto v = env("WORLD_SIZE")) world = parse_int(*v, "WORLD_SIZE", 1, 1 << 24);
      else fail(ErrorCode::InvalidArgument, "multicast init ({}) needs world_size (InitOptions::world_size or WORLD_SIZE)", m);
    }
    if (rank >= 0)
      fail(ErrorCode::InvalidArgument, "multicast init ({}) gives the ranks out: pass rank = -1, not {}", m, rank);
    meeting = std::make_unique<detail::MulticastMeeting>(how.host, how.port, world, o.group_name);
    meeting->meet(std::chrono::steady_clock::now() + o.timeout);
    c->server = meeting->take_server();
    store_host = meeting->store_host();
    base = detail::connect_store(store_host, meeting->store_port(), o.timeout, c->server != nullptr);
  } else if (how.kind == detail::InitMethod::Kind::Tcp) {
    const Endpoint ep{how.host, how.port};
    if (world < 0) {
      if (auto v = env("WORLD_SIZE")) world = parse_int(*v, "WORLD_SIZE", 1, 1 << 24);
      else fail(ErrorCode::InvalidArgument, "init_method tcp:// needs world_size (InitOptions::world_size or WORLD_SIZE)");
    }
    store_host = ep.host;
    auto_rank = rank < 0;
    if (rank == 0) {
      c->server = host_store(ep.host, ep.port);
    } else if (auto_rank) {
      // Whoever binds the port first hosts the store; everyone else finds it taken.
      c->server = store::TcpStoreServer::try_create(ep.host, ep.port);
    }
    base = detail::connect_store(ep.host, ep.port, o.timeout, c->server != nullptr);
  } else {
    const std::string& path = how.path;
    if (world < 0) {
      if (auto v = env("WORLD_SIZE")) world = parse_int(*v, "WORLD_SIZE", 1, 1 << 24);
      else fail(ErrorCode::InvalidArgument, "init_method file:// needs world_size (InitOptions::world_size or WORLD_SIZE)");
    }
    auto_rank = rank < 0;
    base = std::make_shared<store::FileStore>(path, o.timeout);
  }
  if (!auto_rank && rank >= world)
    fail(ErrorCode::InvalidArgument, "rank {} is out of range for world_size {}: expected 0..{}", rank,
         world, world - 1);

  base->set_timeout(o.timeout);
  const std::string name = o.group_name.empty() ? "default" : o.group_name;
  auto st = std::make_shared<store::PrefixStore>("braid/" + name, base);

  if (meeting) rank = multicast_rank(*meeting, *st, o.timeout, m);
  if (auto_rank) {
    const auto n = st->add("rank_counter", 1);
    if (n > world)
      fail(ErrorCode::InvalidArgument, "{} processes joined '{}' but world_size is {}: expected exactly "
           "world_size processes (a stale file store, or a group_name shared by two jobs?)", n, m, world);
    rank = static_cast<int>(n - 1);
  }
  log::set_rank(rank);

  auto shared = std::shared_ptr<Context>(std::move(c));
  const bool store_elsewhere = how.kind != detail::InitMethod::Kind::File && !shared->server;
  try {
    bootstrap(shared, st, rank, world, store_host);
  } catch (const Error& e) {
    if (!store_elsewhere) throw;
    detail::rethrow_naming_rank0(e);
  }
  BRAID_INFO("initialised rank {} of {} via {}", rank, world, m);
  set_context(std::move(shared));
}

bool is_initialized() { return has_context(); }

void destroy_process_group() {
  std::lock_guard g(g_init_mu);
  auto c = take_context();
  if (!c)
    fail(ErrorCode::InvalidState, "destroy_process_group: Braid is not initialised");
  teardown(*c);
  log::set_rank(-1);
}

int get_rank() { return context().rank; }
int get_world_size() { return context().world_size; }
std::string get_backend() { return context().backend; }
Group world() { return context().world; }

}  // namespace braid
