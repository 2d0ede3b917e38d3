// The registry: the one place that names concrete transports.
//
// The runtime asks it for the transports a backend uses, in order of
// preference, and walks that list to connect a peer (the first that reaches
// it and connects wins). A new transport is a folder under transports/ and
// one entry in registry.cpp.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "src/common/time.hpp"
#include "src/store/store.hpp"
#include "transports/one_sided.hpp"
#include "transports/transport.hpp"

namespace braid::transports {

struct Entry {
  std::unique_ptr<Transport> transport;
  // Carries messages. A transport that does not is kept for what it watches
  // (backend 'verbs' keeps the TCP listener so that the watchdog can probe
  // peers through it).
  bool routes = true;
};

// Throws braid::Error for a backend that is unknown (InvalidArgument) or
// not built or not yet available here (NotSupported), saying which are.
void check_backend(const std::string& backend);

// The transports `backend` uses on this rank, in order of preference:
// 'auto' is shared memory on one host, verbs between hosts where an RDMA
// device is usable, TCP otherwise; 'tcp', 'shm' and 'verbs' force one.
// 'cuda' is 'auto' for host memory, and is refused where no CUDA device is
// usable: device tensors between ranks of one host go through CUDA IPC
// (transports/cuda_ipc) under it, as under 'auto' and 'shm'.
std::vector<Entry> make(TransportHost& host, TransportConfig cfg, const std::string& backend);

// Every transport this build has, by name: each rank publishes an address
// for each (empty where it made none), so that peers built alike never wait
// for a record that will not come.
const std::vector<std::string>& names();

// Whether ranks of one host may share memory under `backend` (one-sided
// plans map each other's buffers).
bool shares_host_memory(const std::string& backend);

// --- one-sided windows (one_sided.hpp) ----------------------------------------------
// The window that joins a group's members under `backend`, spread over
// `hosts` hosts: "shm" on one host where ranks share memory, "verbs" under
// backend 'verbs' (RDMA READ and WRITE, between hosts or not), or "" for
// none (the group runs message plans only). Every member computes it from
// the same inputs, so all agree.
std::string window_kind(const std::string& backend, int hosts);
// Makes this rank's end of a window of that kind: a collective step that
// waits, up to the deadline, for every member's (see each window's
// constructor; `check_alive(world rank)` throws if a peer is known dead).
std::shared_ptr<onesided::Window> make_window(const std::string& kind, store::Store& store, std::uint32_t group_id,
                                              std::vector<int> world, int me, Deadline deadline,
                                              const std::function<void(int)>& check_alive);

}  // namespace braid::transports
