#include "src/runtime/device_topology.hpp"

#include <map>
#include <mutex>
#include <string>
#include <thread>

#include "src/common/errors.hpp"
#include "src/runtime/context.hpp"
#include "src/runtime/engine.hpp"
#include "cuda_kernels/cuda.hpp"
#include "src/store/store.hpp"

namespace braid {

const std::vector<int>& device_topology(Engine& e, detail::GroupImpl& g, int device, Deadline until,
                                        const char* what) {
  std::lock_guard lk(g.device_mu);
  if (g.cuda_device >= 0) {
    if (device != g.cuda_device)
      fail(ErrorCode::InvalidArgument,
           "{}: this group's collectives on device memory run on cuda:{} (its first one did): got a tensor on "
           "cuda:{}; use one device per group, or stage through host memory",
           what, g.cuda_device, device);
    return g.device_of;
  }
  const std::string prefix = fmt::format("cudadev/{}/", g.id);
  e.store().set(prefix + std::to_string(g.my_rank), store::to_bytes(cuda::pci_bus_id(device)));
  std::map<std::string, int> index;  // bus id -> GPU index, numbered in rank order
  std::vector<int> of(g.ranks.size(), -1);
  for (std::size_t q = 0; q < g.ranks.size(); ++q) {
    const std::string key = prefix + std::to_string(q);
    std::optional<store::Bytes> v;
    for (int polls = 0; !(v = e.store().try_get(key)); ++polls) {
      if (polls % 100 == 0) e.check_peer_alive(g.ranks[q]);
      if (until.expired())
        throw Error(ErrorCode::Timeout,
                    fmt::format("{}: rank {} did not say which GPU it uses before the timeout: when one rank "
                                "passes CUDA device tensors to a collective every rank must (a rank that passes "
                                "host memory never answers)",
                                what, g.ranks[q]),
                    g.ranks[q]);
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    const std::string bus = store::to_string(*v);
    of[q] = index.emplace(bus, static_cast<int>(index.size())).first->second;
  }
  g.device_of = std::move(of);
  g.cuda_device = device;
  return g.device_of;
}

}  // namespace braid
