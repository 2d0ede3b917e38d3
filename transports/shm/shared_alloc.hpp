// The registry behind braid::mem_alloc: which address ranges of this process
// are shareable, and how a peer maps them (the memfd's descriptor number in
// this process, taken with pidfd_getfd, plus a generation that is never
// reused, so a peer can tell a new allocation at an old address from the old
// one). The one-sided window uses it for its own scratch memory as well.
#pragma once

#include <cstddef>
#include <cstdint>

namespace braid::shm {

struct SharedAllocation {
  int fd = -1;              // memfd, in this process
  std::uint64_t gen = 0;    // unique per allocation in this process, from 1
  std::uintptr_t base = 0;  // mapped address
  std::size_t size = 0;     // mapped bytes (whole pages)
};

// Allocates and registers `bytes` (rounded up to pages). Throws braid::Error.
SharedAllocation shared_alloc(std::size_t bytes, const char* what);
// Unregisters and unmaps the allocation starting at `base`; false if none.
bool shared_free(void* base);
// The allocation holding all of [p, p + bytes); false if there is none.
bool find_shared(const void* p, std::size_t bytes, SharedAllocation* out);

}  // namespace braid::shm
