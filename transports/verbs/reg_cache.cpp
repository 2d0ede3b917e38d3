#include "transports/verbs/reg_cache.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "src/common/errors.hpp"
#include "src/common/log.hpp"

namespace braid::verbs {

namespace {
constexpr std::uint64_t kPresent = 1ull << 63;
constexpr std::uint64_t kFrameMask = (1ull << 55) - 1;
// What identifies a page: its frame and whether it is there at all.
constexpr std::uint64_t kIdentity = kPresent | kFrameMask;

constexpr std::size_t kMaxIdleEntries = 64;
constexpr std::size_t kMaxIdleBytes = std::size_t{1} << 30;
}  // namespace

std::size_t PageFrames::page_size() {
  static const std::size_t p = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  return p;
}

PageFrames::PageFrames() : fd_(::open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC)) {
  if (!fd_.valid()) return;
  // Frames are shown only with CAP_SYS_ADMIN; others read zeros. Probe a
  // page we have just written to.
  const std::size_t ps = page_size();
  std::unique_ptr<std::uint8_t[]> probe(new std::uint8_t[2 * ps]);
  auto* p = reinterpret_cast<volatile std::uint8_t*>(
      (reinterpret_cast<std::uintptr_t>(probe.get()) + ps - 1) / ps * ps);
  p[0] = 1;
  std::uint64_t e = 0;
  usable_ = read(reinterpret_cast<std::uintptr_t>(p), 1, &e) && (e & kPresent) && (e & kFrameMask) != 0;
}

bool PageFrames::read(std::uintptr_t addr, std::size_t pages, std::uint64_t* out) const {
  if (!fd_.valid()) return false;
  const auto off = static_cast<off_t>(addr / page_size() * sizeof(std::uint64_t));
  std::size_t want = pages * sizeof(std::uint64_t), got = 0;
  auto* dst = reinterpret_cast<char*>(out);
  while (got < want) {
    const ssize_t n = ::pread(fd_.get(), dst + got, want - got, off + static_cast<off_t>(got));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    got += static_cast<std::size_t>(n);
  }
  for (std::size_t i = 0; i < pages; ++i) out[i] &= kIdentity;
  return true;
}

RegCache::RegCache(ibv_pd* pd) : pd_(pd), validation_(Validation::InUseOnly) {
  if (frames_.usable()) validation_ = Validation::PageFrames;
  BRAID_INFO("verbs: registration cache validates {}",
             validation_ == Validation::PageFrames ? "page frames on every lookup" : "nothing: entries live while in use");
}

RegCache::RegCache(ibv_pd* pd, Validation validation) : pd_(pd), validation_(validation) {
  if (validation_ == Validation::PageFrames && !frames_.usable())
    fail(ErrorCode::NotSupported, "verbs: page frames are not visible in /proc/self/pagemap (needs CAP_SYS_ADMIN)");
}

bool RegCache::still_valid(const Entry& e, std::uintptr_t start, std::uintptr_t end) {
  if (e.stale) return false;
  if (validation_ == Validation::InUseOnly) return e.refs > 0;
  const std::size_t ps = PageFrames::page_size();
  const std::size_t pages = (end - start) / ps;
  scratch_.resize(pages);
  if (!frames_.read(start, pages, scratch_.data())) return false;
  return std::memcmp(scratch_.data(), e.frames.data() + (start - e.start) / ps, pages * sizeof(std::uint64_t)) == 0;
}

std::unique_ptr<RegCache::Entry> RegCache::register_range(std::uintptr_t start, std::uintptr_t end, int access) {
  auto e = std::make_unique<Entry>();
  e->start = start;
  e->end = end;
  e->access = access;
  e->mr.reset(ibv_reg_mr(pd_, reinterpret_cast<void*>(start), end - start, access));
  if (!e->mr && (errno == ENOMEM || errno == EAGAIN)) {
    // Out of locked memory: give back every idle registration and retry.
    trim(0, 0);
    e->mr.reset(ibv_reg_mr(pd_, reinterpret_cast<void*>(start), end - start, access));
  }
  if (!e->mr)
    fail(ErrorCode::Transport,
         "verbs: cannot register {} bytes at {:#x} for RDMA: {}{}", end - start, start, errno_text(),
         errno == ENOMEM || errno == EAGAIN ? " (raise the locked-memory limit: ulimit -l unlimited)" : "");
  if (validation_ == Validation::PageFrames) {
    // Registration pinned (and so faulted in) every page: record them now.
    e->frames.resize((end - start) / PageFrames::page_size());
    if (!frames_.read(start, e->frames.size(), e->frames.data())) e->stale = true;  // never reused
  }
  return e;
}

RegCache::Entry* RegCache::acquire(const void* addr, std::size_t len, int access) {
  const std::size_t ps = PageFrames::page_size();
  const auto a = reinterpret_cast<std::uintptr_t>(addr);
  const std::uintptr_t start = a / ps * ps;
  const std::uintptr_t end = (a + (len ? len : 1) + ps - 1) / ps * ps;
  ++clock_;
  for (std::size_t i = 0; i < entries_.size(); ++i) {
    Entry* e = entries_[i].get();
    if (e->stale || e->start > start || e->end < end || (e->access & access) != access) continue;
    if (still_valid(*e, start, end)) {
      ++stats_.hits;
      ++e->refs;
      e->last_use = clock_;
      return e;
    }
    if (validation_ == Validation::PageFrames) {
      // The range was unmapped and reused: this registration is stale.
      ++stats_.stale;
      BRAID_TRACE("verbs: registration [{:#x}, {:#x}) went stale (memory reused)", e->start, e->end);
      e->stale = true;
      if (e->refs == 0) {
        drop(e);
        --i;
      }
    }
  }
  ++stats_.misses;
  auto fresh = register_range(start, end, access);
  fresh->refs = 1;
  fresh->last_use = clock_;
  Entry* out = fresh.get();
  entries_.push_back(std::move(fresh));
  trim(kMaxIdleEntries, kMaxIdleBytes);
  return out;
}

void RegCache::release(Entry* e) {
  if (!e) return;
  if (e->refs > 0) --e->refs;
  if (e->refs == 0 && (e->stale || validation_ == Validation::InUseOnly)) drop(e);
}

void RegCache::drop(Entry* e) {
  for (auto it = entries_.begin(); it != entries_.end(); ++it)
    if (it->get() == e) {
      entries_.erase(it);  // deregisters
      return;
    }
}

void RegCache::trim(std::size_t max_idle, std::size_t max_idle_bytes) {
  for (;;) {
    std::size_t idle = 0, idle_bytes = 0;
    Entry* oldest = nullptr;
    for (auto& e : entries_) {
      if (e->refs > 0) continue;
      ++idle;
      idle_bytes += e->end - e->start;
      if (!oldest || e->last_use < oldest->last_use) oldest = e.get();
    }
    if (!oldest || (idle <= max_idle && idle_bytes <= max_idle_bytes)) return;
    ++stats_.evicted;
    drop(oldest);
  }
}

}  // namespace braid::verbs
