// The registry: the one place that names concrete transports.
//
// The runtime asks it for the transports a backend uses, in order of
// preference, and walks that list to connect a peer (the first that reaches
// it and connects wins). A new transport is a folder under transports/ and
// one entry in registry.cpp.
#pragma once

#include <memory>
#include <string>
#include <vector>

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

}  // namespace braid::transports
