// braid-sim: what the cost model predicts, and what a plan looks like.
//
//   braid-sim allreduce --ranks 8 -b 8 -e 64M -f 4 --backend shm
//       predicted time (us) per algorithm over a size sweep; '*' marks the
//       one the runtime would choose. Sizes follow nccl-tests: bytes of the
//       whole buffer (for allgather, alltoall, ... the n-block buffer).
//   braid-sim allreduce --plan --algo ring --ranks 4 --count 8
//       prints the plan step by step and the verifier's verdict.
//   add --verify to a sweep to run the verifier on every plan in it.
//   --one-host (implied by --backend shm) offers the one-sided one-host
//   algorithms (oneshot, twoshot, peer_read, signal) as the runtime does
//   when every rank of the group shares one host's memory; --backend verbs
//   offers them over RDMA, priced with plan::kRdma.
#include <fmt/core.h>

#include <cctype>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "braid/error.hpp"
#include "braid/version.hpp"
#include "algorithms/cost_model.hpp"
#include "src/runtime/cpu_sets.hpp"
#include "algorithms/estimate.hpp"
#include "algorithms/plan.hpp"
#include "algorithms/registry.hpp"
#include "algorithms/verify.hpp"
#include "src/common/progress.hpp"

namespace {

using braid::plan::Collective;

constexpr const char* kUsage =
    "usage: braid-sim COLLECTIVE --ranks N [-b MIN] [-e MAX] [-f FACTOR] [--dtype float32]\n"
    "                 [--backend tcp|shm|verbs|auto] [--one-host] [--shared-cpus] [--hosts H] [--root R] [--algo NAME]\n"
    "                 [--link-latency-ns N] [--link-mbps M] [--machine-cpus C [--machine-stream-mbps S]] [--verify]\n"
    "                 [--model auto|sim|formula] [--calls K] [--logp [--link-gap-ns G]]\n"
    "                 [--line-exchange-ns L] [--cache-mib M]\n"
    "       braid-sim COLLECTIVE --plan --algo NAME --ranks N --count C [--root R] [--dtype float32]\n"
    "                 [--backend tcp|shm|verbs|auto] [--one-host] [--shared-cpus] [--hosts H]\n"
    "--one-host: all ranks share memory (one-sided algorithms); implied by --backend shm\n"
    "--backend verbs: RDMA between every pair (one-sided algorithms over READ and WRITE)\n"
    "--backend auto: as the runtime's default: shared memory inside a host, TCP between hosts\n"
    "--shared-cpus: and they outnumber its CPUs (every round of signals costs a context switch)\n"
    "--hosts H [--link-latency-ns N] [--link-mbps M]: ranks in H blocks of hosts; pairs within a host at\n"
    "  the backend's costs, pairs across at the link's (default: the backend's; as BRAID_LINK_* at run time)\n"
    "--machine-cpus C: the hosts are emulated on one machine of C CPUs (network namespaces, tools/cluster):\n"
    "  streams between them share its CPUs, and so does the ranks' work; '*' stays the runtime's choice\n"
    "--machine-stream-mbps S: one TCP stream between two of its namespaces, unshaped (iperf3), in Mbit/s\n"
    "  (default 32000): a message over TCP takes its sender's CPU at that rate, its receiver's for a copy\n"
    "--model: price each plan by simulating it (sim) or by its closed formula (formula); auto, as the\n"
    "  runtime's choice does: simulated up to 256 ranks, formulas above (whole plans grow as n^2)\n"
    "--calls K: the time per call of K calls issued back to back, as a benchmark's timed loop issues\n"
    "  them (a rank starts the next call once its part of this one is done); default 1, one call\n"
    "--logp: price TCP messages as LogP does: each end is through with one after its own share of\n"
    "  the latency (0.6: no wire on loopback or between namespaces of one machine), messages up to\n"
    "  64 KiB (16 KiB of shared memory between host-mates) leave before their receive is posted,\n"
    "  and a wait for a turn on a CPU shared by ranks (--machine-cpus) holds neither end; the\n"
    "  runtime's choice ('*') is made without these terms\n"
    "--link-gap-ns G: with --logp, a sender is through with a message across hosts after G ns, not 0.6\n"
    "  of the latency: the gap between small messages sent back to back, as the\n"
    "  init probe measures it (BRAID_DEBUG=INFO prints it)\n"
    "--line-exchange-ns L: ranks on one host: the fast boxes, and TCP's messages over loopback, priced\n"
    "  from L, the round trip of a cache line between two CPUs (bench/probes' line-exchange; default 50,\n"
    "  this machine kind's usual phase); '*' stays the runtime's choice\n"
    "--cache-mib M: where the bytes are: a plan whose buffers (a host's ranks together) fit in half\n"
    "  the host's last-level cache of M MiB copies and reduces from cache, and reads a peer's fresh\n"
    "  scratch out of the other CPU's cache at a rate that follows the line exchange. The runtime\n"
    "  prices so, with this machine's cache, ranks of one host on shared memory with CPUs of their own;\n"
    "  M also prices the rest so (TCP: its copies from memory beyond the cache), '*' staying the\n"
    "  runtime's choice; 0: not at all\n"
    "sizes are bytes with optional K/M/G suffix (powers of 1024); defaults -b 8 -e 64M -f 2\n"
    "collectives: broadcast allreduce reduce allgather gather scatter reducescatter alltoall barrier\n"
    "  -h, --help          show this help\n"
    "  --version           show braid-sim's version\n";

struct UsageError {
  std::string message;
};

struct HelpRequested {};

[[noreturn]] void usage_error(std::string message) { throw UsageError{std::move(message)}; }

struct Options {
  Collective coll = Collective::AllReduce;
  int ranks = 0;
  std::int64_t min_bytes = 8, max_bytes = std::int64_t{64} << 20;
  double factor = 2.0;
  std::size_t elem_size = 4;
  std::string dtype = "float32";
  braid::plan::CostParams params = braid::plan::kTcpLoopback;
  std::string backend = "tcp";
  int root = 0;
  std::string algo;
  bool plan = false, verify = false;
  bool one_host = false;  // PlanArgs::topology.one_host
  bool rdma = false;      // PlanArgs::topology.rdma (--backend verbs)
  bool shared_cpus = false;  // PlanArgs::topology.shared_cpus
  bool host_shares_memory = false;  // PlanArgs::topology.host_shares_memory (--backend auto across hosts)
  int hosts = 1;             // ranks in blocks over this many hosts (PlanArgs::topology.host_of)
  std::int64_t link_latency_ns = 0, link_mbps = 0;  // the link between hosts (0: the backend's)
  std::int64_t link_gap_ns = 0;  // --link-gap-ns: a sender's time per small message across (0: kTcpSendShare)
  int machine_cpus = 0;  // > 0: every host on one machine of this many CPUs
  std::int64_t machine_stream_mbps = 0;  // one stream between its namespaces (0: kMachineStreamSPerByte)
  std::int64_t line_exchange_ns = 0;  // --line-exchange-ns: a cache line's round trip (0: kLineExchangeS)
  std::int64_t cache_mib = -1;        // --cache-mib: a host's last-level cache (-1: this machine's; 0: none)
  std::optional<std::int64_t> count;
  std::string model = "auto";  // --model
  int calls = 1;               // --calls
  bool logp = false;           // --logp

  bool by_formula() const { return model == "formula" || (model == "auto" && ranks > braid::plan::kSimulateRanks); }

  // Pair by pair: within a host the backend's costs, between hosts its
  // link's, as the runtime prices a group that spans hosts.
  // `logp_terms`: TCP messages priced with --logp's terms (the runtime's
  // choice is made without them).
  braid::plan::LinkCosts links(bool logp_terms = false) const {
    braid::plan::CostParams remote = braid::plan::with_link(
        rdma ? braid::plan::kRdma : braid::plan::kTcpLoopback, static_cast<double>(link_latency_ns) * 1e-9,
        link_mbps ? 8.0 / (static_cast<double>(link_mbps) * 1e6) : 0.0);
    braid::plan::CostParams local = params;
    auto tcp_terms = [](braid::plan::CostParams& c) {
      c.send_share = braid::plan::kTcpSendShare;
      c.eager_bytes = braid::plan::kTcpEagerBytes;
    };
    if (logp_terms && !rdma) {
      tcp_terms(remote);
      if (link_gap_ns > 0 && remote.alpha_s > 0)
        remote.send_share = static_cast<double>(link_gap_ns) * 1e-9 / remote.alpha_s;
    }
    // Ranks of one host with CPUs of their own, on shared memory: the
    // runtime prices by where the bytes are (plan_cache.cpp), with this
    // machine's last-level cache unless --cache-mib names another.
    if (runtime_prices_caches() && cache_bytes() > 0) local = braid::plan::with_caches(local, cache_bytes(), 0.0);
    if (logp_terms && backend == "tcp") tcp_terms(local);
    // Shared memory between host-mates: all of its latency is the ends'
    // work (no wire), but a wait for a turn on a shared CPU is not; up to
    // the shm transport's eager limit (16 KiB, BRAID_SHM_EAGER_LIMIT) a
    // message is copied into the peer's ring without waiting for its
    // receive.
    else if (logp_terms && hosts > 1 && host_shares_memory) {
      local.send_share = 1.0;
      local.eager_bytes = braid::plan::kShmEagerBytes;
    }
    return braid::plan::link_costs(local, remote, host_of());
  }
  // What the predictions are priced with (the choice uses links()): the
  // fast boxes from the line exchange measured, where one is given.
  braid::plan::LinkCosts priced() const {
    braid::plan::LinkCosts l = links(logp);
    l.local = braid::plan::with_line_exchange(l.local, static_cast<double>(line_exchange_ns) * 1e-9);
    // Where the runtime prices the caches (its reads across CPUs then follow
    // the line exchange given), or wherever --cache-mib asks for them.
    if ((runtime_prices_caches() || cache_mib > 0) && cache_bytes() > 0)
      l.local = braid::plan::with_caches(l.local, cache_bytes(), static_cast<double>(line_exchange_ns) * 1e-9);
    return l;
  }
  // As the runtime's choice: a group on shared memory (the backend's; a
  // --one-host group over TCP is not) that cost_model.hpp's prices_caches
  // admits.
  bool runtime_prices_caches() const;
  double cache_bytes() const {
    return cache_mib >= 0 ? static_cast<double>(cache_mib) * 1024 * 1024 : braid::cpus::last_level_cache_bytes();
  }
  // Ranks in `hosts` blocks (empty: one host).
  std::vector<int> host_of() const {
    std::vector<int> h;
    for (int r = 0; hosts > 1 && r < ranks; ++r) h.push_back(static_cast<int>(static_cast<std::int64_t>(r) * hosts / ranks));
    return h;
  }
};

std::int64_t parse_int(const std::string& flag, const std::string& text) {
  char* end = nullptr;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || v < 0) usage_error(fmt::format("{} expects a non-negative integer, got '{}'", flag, text));
  return v;
}

// "8", "1K", "64M", "1G" (optionally "1KB"): bytes, powers of 1024.
std::int64_t parse_size(const std::string& flag, const std::string& text) {
  std::string digits = text, suffix;
  while (!digits.empty() && std::isalpha(static_cast<unsigned char>(digits.back()))) {
    suffix.insert(suffix.begin(), static_cast<char>(std::toupper(static_cast<unsigned char>(digits.back()))));
    digits.pop_back();
  }
  if (suffix.size() == 2 && suffix[1] == 'B') suffix.pop_back();
  std::int64_t scale = 1;
  if (suffix == "K") scale = std::int64_t{1} << 10;
  else if (suffix == "M") scale = std::int64_t{1} << 20;
  else if (suffix == "G") scale = std::int64_t{1} << 30;
  else if (!suffix.empty() && suffix != "B")
    usage_error(fmt::format("{} expects a size like 8, 1K, 64M or 1G, got '{}'", flag, text));
  return parse_int(flag, digits) * scale;
}

std::size_t dtype_size(const std::string& name) {
  static const std::map<std::string, std::size_t> sizes = {
      {"int8", 1},    {"uint8", 1},    {"int32", 4},   {"int64", 8}, {"float16", 2}, {"half", 2},
      {"bfloat16", 2}, {"float32", 4}, {"float", 4},   {"float64", 8}, {"double", 8},
  };
  auto it = sizes.find(name);
  if (it == sizes.end())
    usage_error(fmt::format("unknown --dtype '{}'; expected int8, uint8, int32, int64, float16, bfloat16, "
                            "float32 or float64",
                            name));
  return it->second;
}

Options parse_args(int argc, char** argv) {
  Options o;
  if (argc >= 2 && (std::string(argv[1]) == "-h" || std::string(argv[1]) == "--help")) throw HelpRequested{};
  if (argc >= 2 && std::string(argv[1]) == "--version") {
    fmt::print("braid-sim (Braid) {}\n", BRAID_VERSION);
    std::exit(0);
  }
  if (argc < 2) usage_error("missing COLLECTIVE");
  if (!braid::plan::parse_collective(argv[1], &o.coll))
    usage_error(fmt::format("unknown collective '{}'", argv[1]));
  bool have_b = false, have_e = false;
  for (int i = 2; i < argc; ++i) {
    const std::string flag = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage_error(fmt::format("{} needs a value", flag));
      return argv[++i];
    };
    if (flag == "--ranks" || flag == "-n") o.ranks = static_cast<int>(parse_int(flag, value()));
    else if (flag == "-b" || flag == "--minbytes") o.min_bytes = parse_size(flag, value()), have_b = true;
    else if (flag == "-e" || flag == "--maxbytes") o.max_bytes = parse_size(flag, value()), have_e = true;
    else if (flag == "-f" || flag == "--stepfactor") {
      const std::string v = value();
      char* end = nullptr;
      o.factor = std::strtod(v.c_str(), &end);
      if (v.empty() || *end != '\0' || !(o.factor > 1.0)) usage_error(fmt::format("-f expects a factor > 1, got '{}'", v));
    } else if (flag == "--dtype") o.dtype = value(), o.elem_size = dtype_size(o.dtype);
    else if (flag == "--backend") {
      o.backend = value();
      if (o.backend == "tcp") o.params = braid::plan::kTcpLoopback;
      else if (o.backend == "shm") o.params = braid::plan::kSharedMemory, o.one_host = true;
      else if (o.backend == "verbs") o.params = braid::plan::kRdma, o.rdma = true;
      else if (o.backend == "auto") o.params = braid::plan::kSharedMemory;  // one host, or shm inside hosts: below
      else usage_error(fmt::format("unknown --backend '{}'; expected auto, tcp, shm or verbs", o.backend));
    } else if (flag == "--root") o.root = static_cast<int>(parse_int(flag, value()));
    else if (flag == "--algo") o.algo = value();
    else if (flag == "--count") o.count = parse_int(flag, value());
    else if (flag == "--plan") o.plan = true;
    else if (flag == "--one-host") o.one_host = true;
    else if (flag == "--shared-cpus") o.shared_cpus = true;
    else if (flag == "--hosts") o.hosts = static_cast<int>(parse_int(flag, value()));
    else if (flag == "--link-latency-ns") o.link_latency_ns = parse_int(flag, value());
    else if (flag == "--link-mbps") o.link_mbps = parse_int(flag, value());
    else if (flag == "--link-gap-ns") o.link_gap_ns = parse_int(flag, value());
    else if (flag == "--machine-cpus") o.machine_cpus = static_cast<int>(parse_int(flag, value()));
    else if (flag == "--machine-stream-mbps") o.machine_stream_mbps = parse_int(flag, value());
    else if (flag == "--line-exchange-ns") o.line_exchange_ns = parse_int(flag, value());
    else if (flag == "--cache-mib") o.cache_mib = parse_int(flag, value());
    else if (flag == "--verify") o.verify = true;
    else if (flag == "--calls") o.calls = static_cast<int>(parse_int(flag, value()));
    else if (flag == "--logp") o.logp = true;
    else if (flag == "--model") {
      o.model = value();
      if (o.model != "auto" && o.model != "sim" && o.model != "formula")
        usage_error(fmt::format("unknown --model '{}'; expected auto, sim or formula", o.model));
    }
    else if (flag == "-h" || flag == "--help") throw HelpRequested{};
    else usage_error(fmt::format("unknown option '{}'", flag));
  }
  // auto: as the runtime's default, shared memory between the ranks of a
  // host (one-sided plans where that is all of them), TCP between hosts.
  if (o.backend == "auto") (o.hosts > 1 ? o.host_shares_memory : o.one_host) = true;
  if (o.shared_cpus && !o.one_host) usage_error("--shared-cpus describes ranks of one host: add --one-host or --backend shm");
  if (o.hosts < 1 || (o.ranks > 0 && o.hosts > o.ranks))
    usage_error(fmt::format("--hosts {} must be between 1 and the number of ranks", o.hosts));
  if (o.hosts > 1 && o.one_host) usage_error("--hosts above 1 contradicts --one-host (and --backend shm): use --backend auto, tcp or verbs");
  if (o.link_latency_ns < 0 || o.link_mbps < 0) usage_error("--link-latency-ns and --link-mbps take positive numbers");
  if (o.machine_cpus < 0 || o.machine_cpus > 1 << 16) usage_error("--machine-cpus takes a CPU count (0: each host a machine)");
  if (o.machine_cpus > 0 && o.hosts < 2) usage_error("--machine-cpus describes hosts emulated on one machine: add --hosts H (H >= 2)");
  if (o.machine_stream_mbps > 0 && o.machine_cpus == 0)
    usage_error("--machine-stream-mbps is the rate of a stream between hosts emulated on one machine: add --machine-cpus C");
  if (o.ranks < 1 || o.ranks > 1 << 16) usage_error("--ranks N (1 <= N <= 65536) is required");
  if (o.link_gap_ns > 0 && !o.logp) usage_error("--link-gap-ns prices messages in LogP's terms: add --logp");
  if (o.line_exchange_ns < 0) usage_error("--line-exchange-ns takes a positive number of nanoseconds");
  if (o.cache_mib < -1 || o.cache_mib > 1 << 20) usage_error("--cache-mib takes a cache's size in MiB (0: not modelled)");
  if (o.line_exchange_ns > 0 && (o.hosts > 1 || o.backend == "verbs"))
    usage_error("--line-exchange-ns prices ranks on one host, over shared memory or TCP: drop --hosts, or --backend verbs");
  if (o.calls < 1 || o.calls > 100000) usage_error(fmt::format("--calls {}: expected 1 to 100000", o.calls));
  if (o.root >= o.ranks) usage_error(fmt::format("--root {} is not a rank of a {}-rank group", o.root, o.ranks));
  if (have_b && !have_e) o.max_bytes = o.min_bytes;
  if (!have_b && have_e) o.min_bytes = std::min(o.min_bytes, o.max_bytes);
  if (o.min_bytes > o.max_bytes) usage_error("-b must not exceed -e");
  if (o.plan && (o.algo.empty() || !o.count)) usage_error("--plan needs --algo NAME and --count C");
  return o;
}

braid::plan::PlanArgs make_args(const Options& o, std::int64_t count) {
  braid::plan::PlanArgs a;
  a.coll = o.coll;
  a.nranks = o.ranks;
  a.count = count;
  a.elem_size = o.elem_size;
  a.root = o.root;
  a.topology.one_host = o.one_host;
  a.topology.rdma = o.rdma;
  a.topology.host_of = o.host_of();
  a.topology.shared_cpus = o.shared_cpus;
  a.topology.host_shares_memory = o.host_shares_memory;
  if (o.machine_cpus > 0) {
    a.topology.machine_of.assign(static_cast<std::size_t>(o.ranks), 0);
    a.topology.machine_cpus = o.machine_cpus;
    if (o.machine_stream_mbps > 0) a.topology.machine_stream_s_per_byte = 8.0 / (static_cast<double>(o.machine_stream_mbps) * 1e6);
  }
  return a;
}

bool Options::runtime_prices_caches() const {
  return (backend == "shm" || backend == "auto") && braid::plan::prices_caches(make_args(*this, 0));
}

// Buffer bytes -> PlanArgs::count: collectives whose buffer holds one block
// per rank take the whole buffer's size, as nccl-tests does.
std::int64_t count_for_bytes(const Options& o, std::int64_t bytes) {
  std::int64_t blocks = 1;
  switch (o.coll) {
    case Collective::AllGather:
    case Collective::Gather:
    case Collective::Scatter:
    case Collective::ReduceScatter:
    case Collective::AllToAll: blocks = o.ranks; break;
    case Collective::Barrier: return 0;
    default: break;
  }
  return bytes / static_cast<std::int64_t>(o.elem_size) / blocks;
}

// The runtime's choice for `args`. It does not model hosts emulated on one
// machine (Topology::machine_cpus): choices that followed that model
// measured worse (2 and 4 emulated hosts x 1 rank, all_reduce of 512 KiB to
// 8 MiB: 1.2-2x the time of the plain model's choices, bench/RESULTS.md
// section 28), so --machine-cpus prices every plan on the shared machine
// but the choice ('*') stays what a job would run.
const braid::plan::Algorithm* runtime_choice(const Options& o, braid::plan::PlanArgs args) {
  args.topology.machine_of.clear();
  args.topology.machine_cpus = 0;
  return braid::plan::choose(o.coll, args, o.links(), o.algo);
}

int print_plan(const Options& o) {
  const braid::plan::Algorithm* alg = runtime_choice(o, make_args(o, *o.count));
  const braid::plan::Plan plan = alg->build(make_args(o, *o.count));
  fmt::print("{}", braid::plan::to_string(plan));
  fmt::print("predicted ({}): {:.2f} us{}\n", o.backend,
             braid::plan::predict_seconds_per_call(plan, o.priced(), o.calls) * 1e6,
             o.calls > 1 ? fmt::format(" per call, {} back to back", o.calls) : "");
  const auto v = braid::plan::verify(plan);
  fmt::print("verify: {}\n", v.ok ? "ok" : "FAILED: " + v.error);
  return v.ok ? 0 : 1;
}

int sweep(const Options& o) {
  std::vector<const braid::plan::Algorithm*> algs;
  for (const auto& a : braid::plan::algorithms())
    if (a.coll == o.coll) algs.push_back(&a);
  if (algs.empty()) {
    fmt::print(stderr, "braid-sim: no {} algorithm is registered\n", braid::plan::collective_name(o.coll));
    return 1;
  }
  if (o.verify && o.by_formula()) usage_error("--verify needs the plans themselves: --model sim (and at most a few hundred ranks)");
  // The formulas know nothing of a shared machine: their figures would be
  // the plain model's under a flag that says otherwise.
  if (o.machine_cpus > 0 && o.by_formula())
    usage_error("--machine-cpus is priced by simulation only: --model sim (and at most a few hundred ranks)");
  if ((o.calls > 1 || o.logp) && o.by_formula())
    usage_error("--calls and --logp are priced by simulation only: --model sim (and at most a few hundred ranks)");
  fmt::print("# {} over {} ranks{}, {} ({} bytes/element), backend {}: predicted time in us{} by {} ('*' = chosen{})\n",
             braid::plan::collective_name(o.coll), o.ranks, o.hosts > 1 ? fmt::format(" on {} hosts", o.hosts) : "",
             o.dtype, o.elem_size, o.backend,
             o.calls > 1 ? fmt::format(" per call of {} back to back", o.calls) : "",
             o.by_formula() ? "formula" : o.logp ? "simulation, TCP in LogP's terms" : "simulation",
             o.verify ? ", '!' = verifier rejects" : "");
  std::string head = fmt::format("{:>12} {:>12}", "bytes", "count");
  for (const auto* a : algs) head += fmt::format(" {:>20}", a->name);
  fmt::print("{}\n", head);

  std::vector<std::string> failures;
  std::int64_t last_count = -1;
  braid::Progress progress;  // on a terminal: which size is being built and verified
  for (double b = static_cast<double>(o.min_bytes); b <= static_cast<double>(o.max_bytes) * (1 + 1e-9);
       b = b * o.factor > b + 1 ? b * o.factor : b + 1) {
    const auto bytes = o.coll == Collective::Barrier ? 0 : static_cast<std::int64_t>(b);
    const std::int64_t count = count_for_bytes(o, bytes);
    if (count == last_count) continue;  // sizes below one element per block repeat
    last_count = count;
    progress.show(fmt::format("braid-sim: {} bytes (up to {})", bytes, o.max_bytes));
    const auto args = make_args(o, count);
    const braid::plan::Algorithm* chosen = runtime_choice(o, args);
    std::string row = fmt::format("{:>12} {:>12}", bytes, count);
    for (const auto* a : algs) {
      if (a->supports && !a->supports(args)) {
        row += fmt::format(" {:>20}", "-");
        continue;
      }
      if (o.by_formula()) {
        const double t = braid::plan::estimate_seconds(*a, args, o.links());
        std::string cell = t < 0 ? "-" : fmt::format("{:.2f}", t * 1e6);  // one-sided plans have no formula
        if (a == chosen) cell += '*';
        row += fmt::format(" {:>20}", cell);
        continue;
      }
      const braid::plan::Plan plan = a->build(args);
      std::string cell =
          fmt::format("{:.2f}", braid::plan::predict_seconds_per_call(plan, o.priced(), o.calls) * 1e6);
      if (o.verify) {
        const auto v = braid::plan::verify(plan);
        if (!v.ok) {
          cell += '!';
          failures.push_back(v.error);
        }
      }
      if (a == chosen) cell += '*';
      row += fmt::format(" {:>20}", cell);
    }
    progress.done();
    fmt::print("{}\n", row);
    std::fflush(stdout);
    if (o.coll == Collective::Barrier) break;  // no sizes to sweep
  }
  for (const auto& f : failures) fmt::print("verify FAILED: {}\n", f);
  if (o.verify && failures.empty()) fmt::print("# verify: every plan above is correct\n");
  return failures.empty() ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Options o = parse_args(argc, argv);
    return o.plan ? print_plan(o) : sweep(o);
  } catch (const HelpRequested&) {
    fmt::print("{}", kUsage);
    return 0;
  } catch (const UsageError& e) {
    fmt::print(stderr, "braid-sim: {}\n{}", e.message, kUsage);
    return 2;
  } catch (const braid::Error& e) {
    // Unknown algorithm names and the like: the caller's input, so exit 2.
    fmt::print(stderr, "braid-sim: {}\n", e.what());
    return e.code() == braid::ErrorCode::InvalidArgument ? 2 : 1;
  }
}
