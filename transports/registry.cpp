#include "transports/registry.hpp"

#include "braid/version.hpp"
#include "src/common/errors.hpp"
#include "transports/shm/shm_transport.hpp"
#include "transports/tcp/tcp_transport.hpp"
#if BRAID_HAVE_VERBS
#include "transports/verbs/verbs_transport.hpp"
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
  if (b == "cuda")
    fail(ErrorCode::NotSupported,
         "backend 'cuda' is not available in this version of Braid: expected 'auto', 'tcp', 'shm' or 'verbs' "
         "(the CUDA IPC transport is not built yet)");
  fail(ErrorCode::InvalidArgument,
       "unknown backend '{}': expected one of 'auto', 'tcp', 'shm', 'verbs', 'cuda'", b);
}

std::vector<Entry> make(TransportHost& host, TransportConfig cfg, const std::string& backend) {
  check_backend(backend);
  std::vector<Entry> out;
  cfg.forced = backend != "auto";
  if (backend == "auto" || backend == "shm") out.push_back({std::make_unique<ShmTransport>(host, cfg), true});
#if BRAID_HAVE_VERBS
  if (backend == "verbs") out.push_back({std::make_unique<VerbsTransport>(host, cfg), true});
  if (backend == "auto")
    if (auto v = VerbsTransport::try_create(host, cfg)) out.push_back({std::move(v), true});
#endif
  if (backend != "shm") out.push_back({std::make_unique<TcpTransport>(host, cfg), backend != "verbs"});
  return out;
}

const std::vector<std::string>& names() {
  static const std::vector<std::string> all = {"shm", "verbs", "tcp"};
  return all;
}

bool shares_host_memory(const std::string& backend) { return backend == "auto" || backend == "shm"; }

}  // namespace braid::transports
