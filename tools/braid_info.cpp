// braid-info: what this build of Braid contains and what it sees here, or
// where the ranks of a live job are.
//
//   braid-info
//   braid-info --job HOST:PORT [--group-name NAME]
//
// Prints the build configuration, the transports compiled in, the RDMA
// devices and ports (state, MTU, GIDs with their RoCE type, and which port
// and GID Braid would use), the CUDA devices, the algorithms of every
// collective, and the environment variables Braid reads with their values.
// Exits 0; problems found (a malformed BRAID_IB_HCA, no driver) are printed.
//
// With --job it reads a running job's store instead (with the job's secret
// from BRAID_JOB_TOKEN or BRAID_JOB_TOKEN_FILE where it has one) and prints
// each rank's process and host, the job's failure log, and where each rank
// is on the default group (src/runtime/positions.hpp).
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <fmt/core.h>

#include "braid/error.hpp"
#include "braid/version.hpp"
#include "cuda_kernels/cuda.hpp"
#include "algorithms/registry.hpp"
#include "src/runtime/peers.hpp"
#include "src/runtime/positions.hpp"
#include "src/store/store.hpp"
#if BRAID_HAVE_VERBS
#include "transports/verbs/device.hpp"
#endif

namespace {

void section(const char* title) { fmt::print("\n{}\n", title); }

void print_build() {
  section("Build");
  fmt::print("  version            {}\n", BRAID_VERSION);
  fmt::print("  verbs (RDMA)       {}\n", BRAID_HAVE_VERBS ? "yes (libibverbs)" : "no (built without libibverbs)");
  fmt::print("  cuda               {}\n", BRAID_HAVE_CUDA ? "yes (nvcc)" : "no (built without CUDA)");
  section("Transports compiled in");
  fmt::print("  tcp     sockets, between any ranks\n");
  fmt::print("  shm     shared memory, ranks on one host\n");
  if (BRAID_HAVE_VERBS) fmt::print("  verbs   RDMA (InfiniBand, RoCE), between hosts or forced with backend 'verbs'\n");
}

void print_rdma() {
  section("RDMA devices");
#if BRAID_HAVE_VERBS
  const auto devices = braid::verbs::survey_devices();
  if (devices.empty()) fmt::print("  none found (no RDMA driver loaded, or no device)\n");
  for (const auto& d : devices) {
    if (!d.error.empty()) {
      fmt::print("  {}: {}\n", d.name, d.error);
      continue;
    }
    for (const auto& p : d.ports) {
      fmt::print("  {} port {}: {}, {}, MTU {}", d.name, p.port, p.state, p.link_layer, p.active_mtu);
      if (p.lid) fmt::print(", LID {}", p.lid);
      fmt::print("\n");
      if (p.gids.empty()) fmt::print("    no GIDs\n");
      for (const auto& g : p.gids)
        fmt::print("    GID {:<3} {}  {:<8} {}{}\n", g.index, braid::verbs::gid_text(g.gid),
                   braid::verbs::gid_type_name(g.type), g.netdev, g.index == p.chosen_gid ? "  <- default choice" : "");
    }
  }
  try {
    std::string why;
    auto dev = braid::verbs::open_device(&why);
    if (dev)
      fmt::print("  Braid would use: {} port {}, GID index {}{}\n", dev->name, dev->port, dev->gid_index,
                 dev->gid_index >= 0 ? fmt::format(" ({}, {})", braid::verbs::gid_text(dev->gid),
                                                   braid::verbs::gid_type_name(dev->gid_type))
                                     : std::string(" (InfiniBand, routed by LID)"));
    else
      fmt::print("  Braid would use: nothing: {}\n", why);
  } catch (const braid::Error& e) {
    fmt::print("  Braid would use: nothing: {}\n", e.what());
  }
#else
  fmt::print("  not looked for: built without libibverbs\n");
#endif
}

void print_cuda() {
  section("CUDA devices");
  if (!braid::cuda::built_with_cuda()) {
    fmt::print("  none: built without CUDA\n");
    return;
  }
  try {
    if (!braid::cuda::available()) {
      fmt::print("  none: {}\n", braid::cuda::unavailable_reason());
      return;
    }
    for (int i = 0; i < braid::cuda::device_count(); ++i) fmt::print("  {}: {}\n", i, braid::cuda::device_name(i));
  } catch (const braid::Error& e) {
    fmt::print("  none: {}\n", e.what());
  }
}

void print_algorithms() {
  section("Algorithms (BRAID_ALGO=collective:name,...)");
  for (int c = 0; c < braid::plan::kNumCollectives; ++c) {
    const auto coll = static_cast<braid::plan::Collective>(c);
    std::string names;
    for (const auto& n : braid::plan::algorithm_names(coll)) names += (names.empty() ? "" : ", ") + n;
    fmt::print("  {:<14} {}\n", braid::plan::collective_name(coll), names);
  }
}

void print_environment() {
  section("Environment variables Braid reads");
  static const char* const vars[][2] = {
      {"BRAID_DEBUG", "logging: WARN, INFO or TRACE"},
      {"BRAID_ALGO", "algorithm per collective"},
      {"BRAID_SPIN_US", "microseconds a waiter polls before sleeping"},
      {"BRAID_SOCKET_IFNAME", "interfaces for TCP (NCCL grammar)"},
      {"BRAID_TCP_EAGER_LIMIT", "bytes sent eagerly over TCP"},
      {"BRAID_SHM_EAGER_LIMIT", "bytes sent eagerly over shared memory"},
      {"BRAID_IB_HCA", "RDMA device[:port] list (NCCL grammar)"},
      {"BRAID_IB_GID_INDEX", "RDMA GID index (default: found in the GID table)"},
      {"BRAID_IB_EAGER_LIMIT", "bytes sent eagerly over RDMA"},
      {"CUDA_VISIBLE_DEVICES", "CUDA devices this process sees"},
      {"MASTER_ADDR", "env:// store host"},
      {"MASTER_PORT", "env:// store port"},
      {"RANK", "env:// rank (also SLURM_PROCID, OMPI_COMM_WORLD_RANK, PMI_RANK)"},
      {"WORLD_SIZE", "world size (also SLURM_NTASKS, OMPI_COMM_WORLD_SIZE, PMI_SIZE)"},
      {"SLURM_PROCID", ""},
      {"SLURM_NTASKS", ""},
      {"OMPI_COMM_WORLD_RANK", ""},
      {"OMPI_COMM_WORLD_SIZE", ""},
      {"PMI_RANK", ""},
      {"PMI_SIZE", ""},
  };
  for (const auto& v : vars) {
    const char* val = std::getenv(v[0]);
    const std::string shown = val ? fmt::format("'{}'", val) : std::string("(unset)");
    if (*v[1]) fmt::print("  {:<22} {:<24} {}\n", v[0], shown, v[1]);
    else fmt::print("  {:<22} {}\n", v[0], shown);
  }
}

// A live job: its ranks, failures and positions, from its store.
int print_job(const std::string& where, const std::string& group_name) {
  const auto colon = where.rfind(':');
  const auto port = colon == std::string::npos ? std::nullopt : braid::decimal(std::string_view(where).substr(colon + 1), 5);
  if (!port || *port < 1 || *port > 65535) {
    std::fprintf(stderr, "braid-info: --job wants HOST:PORT (the job's MASTER_ADDR:MASTER_PORT), got '%s'\n", where.c_str());
    return 2;
  }
  try {
    auto base = std::make_shared<braid::store::TcpStore>(where.substr(0, colon), static_cast<int>(*port),
                                                         std::chrono::seconds(5));
    braid::store::PrefixStore st("braid/" + group_name, base);
    const auto job = braid::parse_job_record(braid::store::to_string(st.get("job", std::chrono::seconds(5))));
    fmt::print("Job at {} (group name '{}'): {} ranks, job id {}\n", where, group_name, job.world_size, job.id);
    const auto failures = st.add("failures", 0);
    std::string log;
    for (std::int64_t seq = 1; seq <= failures; ++seq)
      if (auto v = st.try_get(fmt::format("failures/{}", seq)))
        if (auto r = braid::abort_rank(braid::store::to_string(*v), job.world_size)) log += fmt::format(" rank {}", *r);
    fmt::print("Failure log (first first):{}\n", log.empty() ? " empty" : log);
    section("Ranks");
    std::vector<int> ranks;
    for (int r = 0; r < job.world_size; ++r) {
      ranks.push_back(r);
      std::string proc = "has not joined";
      if (auto v = st.try_get(fmt::format("host/{}", r))) {
        const auto rec = braid::read_peer_record(st, r, std::chrono::seconds(1));
        proc = fmt::format("pid {} on host {}", rec.pid, rec.host);
      }
      fmt::print("  rank {:<4} {}\n", r, proc);
    }
    int behind = -1;
    const std::string pos = braid::describe_positions(braid::read_positions(st, 0, ranks), &behind);
    fmt::print("\nWhere each rank is on the default group (calls that waited 50 ms or more):\n  {}\n", pos);
    if (behind >= 0) fmt::print("  Behind the others: rank {}\n", behind);
    return 0;
  } catch (const braid::Error& e) {
    std::fprintf(stderr, "braid-info: %s\n", e.what());
    return 1;
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 2 && std::string(argv[1]) == "--job") {
    std::string name = "default";
    if (argc == 5 && std::string(argv[3]) == "--group-name") name = argv[4];
    else if (argc != 3) {
      std::fprintf(stderr, "usage: braid-info --job HOST:PORT [--group-name NAME]\n");
      return 2;
    }
    return print_job(argv[2], name);
  }
  if (argc > 1) {
    const std::string a = argv[1];
    constexpr const char* kUsage =
        "usage: braid-info [--job HOST:PORT [--group-name NAME]]\n"
        "Prints what this Braid was built with and what it finds here: transports, RDMA devices,\n"
        "CUDA devices, the algorithms, and the environment variables Braid reads.\n"
        "  --job HOST:PORT     a live job instead (its MASTER_ADDR:MASTER_PORT; its secret from\n"
        "                      BRAID_JOB_TOKEN): each rank's process, the failure log, and where\n"
        "                      each rank is on the default group\n"
        "  -h, --help          show this help\n"
        "  --version           show braid-info's version\n";
    if (a == "-h" || a == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (a == "--version") {
      fmt::print("braid-info (Braid) {}\n", BRAID_VERSION);
      return 0;
    }
    std::fprintf(stderr, "braid-info: unknown argument '%s'\n%s", a.c_str(), kUsage);
    return 2;
  }
  fmt::print("Braid {}\n", BRAID_VERSION);
  print_build();
  print_rdma();
  print_cuda();
  print_algorithms();
  print_environment();
  return 0;
}
