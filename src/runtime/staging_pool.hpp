// Host memory a collective stages through (a non-root's private copy for
// reduce, the result of an in-place reduce_scatter_tensor, lists that are not
// one contiguous block), reused across calls. A fresh std::vector of tens of
// MiB per call is zero-filled and faulted in page by page, which cost more
// than the collective itself (a 32 MiB reduce on 2 ranks: 20 ms, against
// 5.4 ms for a broadcast of the same size).
#pragma once

#include <cstddef>
#include <memory>

namespace braid::detail {

// `bytes` of uninitialised memory, returned to the pool when the last owner
// lets go. The pool keeps at most 256 MiB of idle buffers, and hands out a
// buffer only for requests of at least half its size.
std::shared_ptr<char[]> staging_buffer(std::size_t bytes);

}  // namespace braid::detail
