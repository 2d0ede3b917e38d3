// Shareable tensors: an opt-in CPU allocator for torch that takes large
// tensors from braid::mem_alloc, in the spirit of NCCL's ncclMemAlloc under
// torch's MemPool.
//
// Torch allocates CPU tensors in private memory, which a peer on the host
// reaches only through the kernel (process_vm_readv/writev): one copy at
// about half of what a user-space copy reaches here (bench/RESULTS.md
// section 17). A tensor in braid::mem_alloc memory is mapped by its host's
// peers instead, and Braid's one-host plans copy (or reduce) straight from
// the mapping. Off by default: it replaces torch's CPU allocator for the
// whole process, and each large tensor then holds a file descriptor (a
// memfd) for as long as it lives.
#pragma once

#include <cstddef>

namespace braid_torch {

// Installs the allocator (once; a later call only changes the threshold):
// tensors of at least `min_bytes` come from braid::mem_alloc, smaller ones
// from torch's own CPU allocation. Tensors made before it stay where they are.
void use_shareable_memory(std::size_t min_bytes);
// Whether it is installed: what this rank proposes for its process groups'
// shareable_buffers (ProcessGroupBraid agrees on it with the other ranks).
bool shareable_memory_on();

}  // namespace braid_torch
