// Options for init and for every op. Designated initialisers are the intended
// spelling: braid::OpOptions{.group = &g, .tag = 7}.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace braid {

class Group;

struct InitOptions {
  // "auto" picks per peer; "tcp" forces TCP sockets. ("shm", "verbs", "cuda"
  // are accepted names that later transports fill; an unknown name is an error.)
  std::string backend = "auto";
  // "env://" (default), "tcp://HOST:PORT" (HOST a multicast group such as
  // 239.1.2.3 or [ff15::1]: processes meet there, rank -1) or "file:///path".
  std::string init_method = "env://";
  int rank = -1;        // -1: from the environment, or assigned in order of arrival
  int world_size = -1;  // -1: from the environment
  // Default deadline for every blocking wait, init included.
  std::chrono::milliseconds timeout = std::chrono::seconds(300);
  // Jobs that share one store or file stay apart when their names differ.
  std::string group_name = "";
};

struct OpOptions {
  const Group* group = nullptr;  // nullptr: the default (world) group
  bool async_op = false;         // true: return at once; Work::wait() completes
  // 0: the process group's default timeout.
  std::chrono::milliseconds timeout{0};
  // Point-to-point messages match on (group, source, tag). Collectives ignore it.
  std::int64_t tag = 0;
  // Device tensors: the cudaStream_t (cast to void*) the op is ordered on;
  // nullptr is the device's legacy default stream. The op reads what the
  // stream's earlier work left; the stream's later work sees its result (a
  // blocking op returns once that is enqueued, as with NCCL); host code sees
  // it after an async Work's wait() or is_completed(). Ignored for host tensors.
  void* stream = nullptr;
  // Collectives: force an algorithm by name ("ring", "tree", ...); empty = automatic.
  const char* algorithm = nullptr;
  // Collectives between ranks of one host: every rank's buffers of this call
  // came from braid::mem_alloc, so peers can read and write them in place.
  // The automatic choice then prices such access as a local copy, and picks
  // plans that use it (zero copy) where they win. Every rank must pass the
  // same value, since it shapes the plan; a buffer that did not come from
  // mem_alloc still gives the right result, through a slower copy.
  bool shareable_buffers = false;
};

}  // namespace braid
