// Shareable host memory, in the spirit of NCCL's ncclMemAlloc.
//
// A buffer from mem_alloc() lives in an anonymous memory file (memfd) that
// ranks on the same host can map. When a collective's buffers come from it,
// Braid's one-host algorithms read peers' buffers in place (zero copies
// between processes); any other buffer works too, through one copy by the
// kernel (process_vm_readv). Nothing is named in /dev/shm: the memory goes
// away with the last process that maps it.
//
// Peers map a buffer the first time they read it and keep the mapping; a
// buffer freed and allocated again (even at the same address) is a new
// allocation with a new identity, so no peer ever reads a stale mapping.
// Thread-safe; usable before init_process_group.
#pragma once

#include <cstddef>

namespace braid {

// At least `bytes` of zeroed, page-aligned shareable memory. Throws
// braid::Error (InvalidArgument for bytes == 0, Transport if the system
// refuses) rather than returning null.
void* mem_alloc(std::size_t bytes);

// Frees a pointer mem_alloc returned (null is ignored). Anything else throws
// braid::Error(InvalidArgument). A buffer must not be freed while an op that
// uses it is in flight.
void mem_free(void* p);

}  // namespace braid
