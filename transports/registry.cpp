#include "transports/registry.hpp"

#include "braid/version.hpp"
#include "cuda_kernels/cuda.hpp"
#include "src/common/errors.hpp"
#include "transports/shm/shm_transport.hpp"
#include "transports/shm/window.hpp"
#include "transports/tcp/tcp_transport.hpp"
#if BRAID_HAVE_VERBS
#include "transports/verbs/verbs_transport.hpp"
#include "transports/verbs/window.hpp"
#endif

namespace braid::transports {

void check_backend(const std::string& b) {
  if (b == "auto" || b == "tcp" || b == "shm") return;
#if BRAID_HAVE_VERBS
  if (b == "verbs") return;
#else
  if (b == "verbs")
    fail(ErrorCode::NotSupported,
         "backend 'verbs' is not available: this Braid was built without the 'verbs' feature (libibverbs was "
         "not found; install libibverbs-dev and reconfigure)");
#endif
  if (b == "cuda") {
    // Device memory between ranks of one host goes through CUDA IPC; that
    // needs a usable device here, or every device op would fail later.
    if (!cuda::available())
      fail(ErrorCode::NotSupported, "backend 'cuda' needs a usable CUDA device: {} (use 'auto', 'tcp', 'shm' or "
           "'verbs' for host memory)", cuda::unavailable_reason());
    return;
  }
  fail(ErrorCode::InvalidArgument,
       "unknown backend '{}': expected one of 'auto', 'tcp', 'shm', 'verbs', 'cuda'", b);
}

std::vector<Entry> make(TransportHost& host, TransportConfig cfg, const std::string& backend) {
  check_backend(backend);
  std::vector<Entry> out;
  // 'cuda' moves host memory as 'auto' does; only 'tcp', 'shm' and 'verbs'
  // force one transport.
  const bool automatic = backend == "auto" || backend == "cuda";
  cfg.forced = !automatic;
  if (automatic || backend == "shm") out.push_back({std::make_unique<ShmTransport>(host, cfg), true});
#if BRAID_HAVE_VERBS
  if (backend == "verbs") out.push_back({std::make_unique<VerbsTransport>(host, cfg), true});
  if (automatic)
    if (auto v = VerbsTransport::try_create(host, cfg)) out.push_back({std::move(v), true});
#endif
  if (backend != "shm") out.push_back({std::make_unique<TcpTransport>(host, cfg), backend != "verbs"});
  return out;
}

const std::vector<std::string>& names() {
  static const std::vector<std::string> all = {"shm", "verbs", "tcp"};
  return all;
}

bool shares_host_memory(const std::string& backend) {
  return backend == "auto" || backend == "shm" || backend == "cuda";
}

std::string window_kind(const std::string& backend, int hosts) {
  if (hosts <= 1 && shares_host_memory(backend)) return "shm";
#if BRAID_HAVE_VERBS
  // Under 'auto' a group across hosts runs message plans: the choice between
  // them and RDMA one-sided plans needs costs per link (issue 17), which the
  // cost model does not have yet.
  if (backend == "verbs") return "verbs";
#endif
  return "";
}

std::shared_ptr<onesided::Window> make_window(const std::string& kind, store::Store& store, std::uint32_t group_id,
                                              std::vector<int> world, int me, Deadline deadline,
                                              const std::function<void(int)>& check_alive) {
  if (kind == "shm") return std::make_shared<shm::Window>(store, group_id, std::move(world), me, deadline, check_alive);
#if BRAID_HAVE_VERBS
  if (kind == "verbs")
    return std::make_shared<verbs::Window>(store, group_id, std::move(world), me, deadline, check_alive);
#endif
  fail(ErrorCode::Internal, "no one-sided window of kind '{}' in this build", kind);
}

}  // namespace braid::transports
