// RegCache: memory registrations of user buffers, reused across operations
// without ever using a stale one.
//
// The hazard: ibv_reg_mr pins the physical pages behind a virtual range. If
// the application frees the buffer and later gets memory at the same
// address (munmap + mmap, or malloc trimming the heap with MADV_DONTNEED),
// the old registration still points at the old pages: an RDMA READ or
// WRITE through it would move the wrong bytes, silently.
//
// How this cache stays correct, chosen once per process:
//   PageFrames  (when /proc/self/pagemap shows page-frame numbers, i.e. the
//               process has CAP_SYS_ADMIN, as root does): every entry keeps
//               the frames its pages had when registered. Every lookup, hit
//               or not, reads the frames of the requested range again and
//               compares: registered pages cannot move (they are pinned), so
//               any difference means the range was unmapped and reused, and
//               the entry is dropped and the range registered anew. Cost: one
//               pread of 8 bytes per page, far below registering.
//   InUseOnly   (frames hidden): nothing can tell a reused address apart, so
//               an entry is shared only while some operation still holds it
//               (a buffer an operation is using cannot have been freed) and
//               is deregistered when the last one releases it.
// Device-side alternatives (on-demand paging, memory-event hooks on munmap)
// are not used: the first needs hardware support, the second interposing on
// the C library.
//
// Entries are keyed by page-aligned (start, end) and access flags; a lookup
// is served by any valid entry that covers the range with at least the
// access asked for. Idle entries are bounded (count and bytes), evicted
// least recently used first, and all dropped once if registration runs out
// of locked memory. Not thread-safe: the host's lock guards it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "src/common/fd.hpp"
#include "transports/verbs/verbs_objects.hpp"

namespace braid::verbs {

// Reads /proc/self/pagemap.
class PageFrames {
 public:
  PageFrames();
  // Are page-frame numbers visible to this process?
  bool usable() const { return usable_; }
  // Frames (with the present bit) of `pages` pages from page-aligned `addr`.
  bool read(std::uintptr_t addr, std::size_t pages, std::uint64_t* out) const;
  static std::size_t page_size();

 private:
  Fd fd_;
  bool usable_ = false;
};

class RegCache {
 public:
  enum class Validation { PageFrames, InUseOnly };
  struct Entry {
    std::uintptr_t start = 0, end = 0;  // page-aligned
    int access = 0;
    MrPtr mr;
    int refs = 0;
    std::uint64_t last_use = 0;
    bool stale = false;
    std::vector<std::uint64_t> frames;  // PageFrames mode: per page
    std::uint32_t lkey() const { return mr->lkey; }
    std::uint32_t rkey() const { return mr->rkey; }
  };
  struct Stats {
    std::uint64_t hits = 0, misses = 0, stale = 0, evicted = 0;
  };

  // `validation` defaults to PageFrames when frames are visible.
  explicit RegCache(ibv_pd* pd);
  RegCache(ibv_pd* pd, Validation validation);

  // A registration covering [addr, addr + len) with at least `access`,
  // held until release(). Throws braid::Error(Transport) when the range
  // cannot be registered.
  Entry* acquire(const void* addr, std::size_t len, int access);
  void release(Entry* e);

  Validation validation() const { return validation_; }
  const Stats& stats() const { return stats_; }
  std::size_t size() const { return entries_.size(); }

 private:
  bool still_valid(const Entry& e, std::uintptr_t start, std::uintptr_t end);
  std::unique_ptr<Entry> register_range(std::uintptr_t start, std::uintptr_t end, int access);
  void drop(Entry* e);
  void trim(std::size_t max_idle, std::size_t max_idle_bytes);

  ibv_pd* pd_;
  PageFrames frames_;
  Validation validation_;
  std::vector<std::unique_ptr<Entry>> entries_;
  std::uint64_t clock_ = 0;
  Stats stats_;
  std::vector<std::uint64_t> scratch_;
};

}  // namespace braid::verbs
