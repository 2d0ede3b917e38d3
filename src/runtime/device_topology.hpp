// Which members of a group share a GPU, for collectives that run directly on
// device memory (CUDA IPC). Several ranks may drive one GPU (the device
// machine of this project has one); such ranks should not split the device
// work of a collective between them: the GPU runs one process's work at a
// time and pays a context switch whenever another's turns up, so a plan
// that gives one rank per GPU all of that GPU's work is faster
// (algorithms/push.cpp reads Topology::device_of).
#pragma once

#include <vector>

#include "src/common/time.hpp"

namespace braid {
class Engine;
namespace detail {
struct GroupImpl;
}

// device_of for the group (an index per group rank, equal for ranks on one
// GPU), learned through the store on the group's first such call: each rank
// publishes its device's PCI bus id. A group is bound to the device of that
// first call, as an NCCL communicator is to its device: a later call on
// another device is an InvalidArgument. A peer that died before publishing
// is named (PeerFailure); one that never publishes is a Timeout at `until`.
const std::vector<int>& device_topology(Engine& e, detail::GroupImpl& g, int device, Deadline until,
                                        const char* what);

}  // namespace braid
