#include "transports/shm/shared_alloc.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <map>
#include <mutex>
#include <shared_mutex>

#include "braid/memory.hpp"
#include "src/common/errors.hpp"

namespace braid::shm {

namespace {

struct Registry {
  std::shared_mutex mu;
  std::map<std::uintptr_t, SharedAllocation> by_base;
  std::atomic<std::uint64_t> next_gen{1};
};
Registry& registry() {
  static Registry* r = new Registry;  // never destroyed: frees may run at exit
  return *r;
}

}  // namespace

SharedAllocation shared_alloc(std::size_t bytes, const char* what) {
  if (bytes == 0) fail(ErrorCode::InvalidArgument, "{}: asked for 0 bytes; expected at least 1", what);
  const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  if (bytes > (std::size_t(1) << 46))
    fail(ErrorCode::InvalidArgument, "{}: {} bytes is beyond what this host can map", what, bytes);
  const std::size_t size = (bytes + page - 1) / page * page;
  // Not close-on-exec would leak it into children; CLOEXEC is right.
  const int fd = ::memfd_create("braid-mem", MFD_CLOEXEC);
  if (fd < 0) fail(ErrorCode::Transport, "{}: memfd_create failed: {}", what, errno_text());
  if (::ftruncate(fd, static_cast<off_t>(size)) != 0) {
    const int err = errno;
    ::close(fd);
    fail(ErrorCode::Transport, "{}: sizing shareable memory to {} bytes failed: {}", what, size, errno_text(err));
  }
  // Populated now: a first-touch page fault per 4 KiB page in the middle of
  // a collective costs more than the copy it interrupts.
  void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
  if (p == MAP_FAILED) {
    const int err = errno;
    ::close(fd);
    fail(ErrorCode::Transport, "{}: mapping {} bytes of shareable memory failed: {}", what, size, errno_text(err));
  }
  Registry& r = registry();
  SharedAllocation a{fd, r.next_gen.fetch_add(1), reinterpret_cast<std::uintptr_t>(p), size};
  std::unique_lock lk(r.mu);
  r.by_base[a.base] = a;
  return a;
}

bool shared_free(void* base) {
  Registry& r = registry();
  SharedAllocation a;
  {
    std::unique_lock lk(r.mu);
    auto it = r.by_base.find(reinterpret_cast<std::uintptr_t>(base));
    if (it == r.by_base.end()) return false;
    a = it->second;
    r.by_base.erase(it);
  }
  // Peers that mapped it keep the pages alive until they unmap: freeing here
  // never pulls memory from under a reader.
  ::munmap(reinterpret_cast<void*>(a.base), a.size);
  ::close(a.fd);
  return true;
}

bool find_shared(const void* p, std::size_t bytes, SharedAllocation* out) {
  const auto at = reinterpret_cast<std::uintptr_t>(p);
  Registry& r = registry();
  std::shared_lock lk(r.mu);
  if (r.by_base.empty()) return false;
  auto it = r.by_base.upper_bound(at);
  if (it == r.by_base.begin()) return false;
  --it;
  const SharedAllocation& a = it->second;
  if (at < a.base || at + bytes > a.base + a.size) return false;
  *out = a;
  return true;
}

}  // namespace braid::shm

namespace braid {

void* mem_alloc(std::size_t bytes) { return reinterpret_cast<void*>(shm::shared_alloc(bytes, "mem_alloc").base); }

void mem_free(void* p) {
  if (!p) return;
  if (!shm::shared_free(p))
    fail(ErrorCode::InvalidArgument, "mem_free: {} was not returned by braid::mem_alloc (or was freed already)", p);
}

}  // namespace braid
