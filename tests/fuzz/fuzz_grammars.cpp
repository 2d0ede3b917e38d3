// The grammars of what a user types: init_method URLs, BRAID_ALGO,
// BRAID_SOCKET_IFNAME, BRAID_IB_HCA, the CPU lists ranks publish, Slurm's
// host lists, multicast init's announcements (from anyone on the network),
// and the integers every BRAID_* variable holds. The first byte
// picks the grammar.
#include <cstdlib>
#include <vector>

#include "algorithms/cost_model.hpp"
#include "braid/version.hpp"
#include "src/api/init_method.hpp"
#include "src/api/launcher_env.hpp"
#include "src/api/multicast_init.hpp"
#include "src/common/env.hpp"
#include "src/common/socket.hpp"
#include "src/runtime/cpu_sets.hpp"
#include "tests/fuzz/fuzz.hpp"
#if BRAID_HAVE_VERBS
#include "transports/verbs/device.hpp"
#endif

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* d, std::size_t n) {
  if (n == 0) return 0;
  const std::string t = fuzz::text(d + 1, n - 1);
  switch (d[0] % 8) {
    case 0:
      fuzz::only_braid_errors("parse_init_method", [&] {
        const auto m = braid::detail::parse_init_method(t);
        if (m.kind == braid::detail::InitMethod::Kind::Tcp && (m.port < 1 || m.port > 65535)) std::abort();
      });
      break;
    case 1:
      fuzz::only_braid_errors("parse_algo_env", [&] { (void)braid::plan::parse_algo_env(t); });
      break;
    case 2:
      for (const char* name : {"eth0", "lo", "ib0", "", "enp0s1"}) (void)braid::net::ifname_matches(t, name);
      break;
    case 3:
#if BRAID_HAVE_VERBS
      fuzz::only_braid_errors("parse_hca_spec", [&] {
        const auto spec = braid::verbs::parse_hca_spec(t);
        for (int port : {1, 2}) (void)braid::verbs::hca_selected(spec, "mlx5_0", port);
      });
#endif
      break;
    case 4: {
      std::vector<std::string> lists;
      for (std::size_t pos = 0; pos <= t.size();) {
        const auto nl = t.find('\n', pos);
        lists.push_back(t.substr(pos, nl == std::string::npos ? std::string::npos : nl - pos));
        if (nl == std::string::npos) break;
        pos = nl + 1;
      }
      std::vector<braid::cpus::Range> ranges;
      (void)braid::cpus::parse(t, &ranges);
      (void)braid::cpus::in_union(lists);
      (void)braid::cpus::oversubscribed(lists);
      break;
    }
    case 5:
      fuzz::only_braid_errors("expand_hostlist", [&] {
        // A small limit keeps a list like n[0-99999999] from running long.
        const auto hosts = braid::detail::expand_hostlist(t, "SLURM_NODELIST", 4096);
        if (hosts.empty() || hosts.size() > 4096) std::abort();
        for (const auto& h : hosts)
          if (h.empty()) std::abort();
      });
      break;
    case 6: {
      braid::detail::Announcement a;
      if (braid::detail::parse_announcement(t, &a)) {
        if ((a.kind != 'H' && a.kind != 'S') || a.world < 1 || a.id == 0) std::abort();
        if (a.kind == 'S' && (a.port < 1 || a.port > 65535 || a.host.empty())) std::abort();
      }
      break;
    }
    default:
      if (t.find('\0') != std::string::npos) break;  // not an environment value
      ::setenv("BRAID_FUZZ_VALUE", t.c_str(), 1);
      fuzz::only_braid_errors("env_integer", [&] {
        const auto v = braid::env_integer("BRAID_FUZZ_VALUE", -5, 1000000, "an integer");
        if (v && (*v < -5 || *v > 1000000)) std::abort();
      });
      break;
  }
  return 0;
}
