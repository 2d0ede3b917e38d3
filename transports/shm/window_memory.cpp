// shm::Window's memory: describing buffers to peers, mapping theirs, copies
// with process_vm_readv/writev where memory is not shareable, and Scratch.
#include <poll.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>

#include "src/common/errors.hpp"
#include "src/common/pidfd.hpp"
#include "transports/shm/window.hpp"
#include "transports/shm/window_layout.hpp"

namespace braid::shm {

namespace {
constexpr std::size_t kMaxMapsPerPeer = 64;
}  // namespace

BufDesc Window::describe(const void* p, std::size_t bytes) {
  BufDesc d;
  d.addr = reinterpret_cast<std::uint64_t>(p);
  d.bytes = bytes;
  SharedAllocation a;
  if (p && bytes && find_shared(p, bytes, &a)) {
    d.fd = a.fd;
    d.gen = a.gen;
    d.base = a.base;
    d.size = a.size;
  }
  return d;
}

bool Window::peer_gone(int peer) {
  const Peer& p = peers_[static_cast<std::size_t>(peer)];
  if (!p.pidfd.valid()) return false;
  pollfd f{p.pidfd.get(), POLLIN, 0};
  return ::poll(&f, 1, 0) > 0;
}

char* Window::map(int peer, const BufDesc& d, std::uint64_t addr, std::size_t bytes) {
  if (d.fd == -1) return nullptr;
  if (!onesided::span_inside(d.base, d.size, addr, bytes))
    fail_peer(ErrorCode::Transport, world_rank(peer),
              "rank {} described a buffer outside its shareable allocation", world_rank(peer));
  Peer& p = peers_[static_cast<std::size_t>(peer)];
  if (d.fd == kInBlock) {
    if (d.size != p.block_bytes)
      fail_peer(ErrorCode::Transport, world_rank(peer), "rank {} described its block with the wrong size",
                world_rank(peer));
    return static_cast<char*>(p.block) + (addr - d.base);
  }
  if (d.fd < 0)
    fail_peer(ErrorCode::Transport, world_rank(peer), "rank {} described a buffer with descriptor {}",
              world_rank(peer), d.fd);
  for (PeerMap& m : p.maps)
    if (m.gen == d.gen) return static_cast<char*>(m.local) + (addr - d.base);
  Fd fd(pidfd_getfd(p.pidfd.get(), d.fd));
  if (!fd.valid())
    fail_peer(ErrorCode::PeerFailure, world_rank(peer), "cannot take rank {}'s buffer (pidfd_getfd: {})",
              world_rank(peer), errno_text());
  struct stat st{};
  if (::fstat(fd.get(), &st) != 0 || static_cast<std::uint64_t>(st.st_size) != d.size)
    fail_peer(ErrorCode::Transport, world_rank(peer), "rank {}'s buffer descriptor does not match its memory",
              world_rank(peer));
  // MAP_POPULATE: build the page tables once, not by a fault per page read.
  void* local = ::mmap(nullptr, d.size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd.get(), 0);
  if (local == MAP_FAILED)
    fail(ErrorCode::Transport, "mapping {} bytes of rank {}'s memory failed: {}", d.size, world_rank(peer),
         errno_text());
  // The owner reuses address ranges after a free: an older allocation that
  // overlaps this one is gone, drop its mapping (and bound the cache).
  std::erase_if(p.maps, [&](const PeerMap& m) {
    const bool stale = m.base < d.base + d.size && d.base < m.base + m.size;
    if (stale) ::munmap(m.local, m.size);
    return stale;
  });
  if (p.maps.size() >= kMaxMapsPerPeer) {
    ::munmap(p.maps.front().local, p.maps.front().size);
    p.maps.erase(p.maps.begin());
  }
  p.maps.push_back({d.gen, d.base, d.size, local});
  return static_cast<char*>(local) + (addr - d.base);
}

namespace {

// One process_vm_readv/writev loop (short transfers continue), errors naming
// the peer. `write`: local -> peer; else peer -> local.
void peer_copy(Window& w, int peer, pid_t pid, std::uint64_t addr, char* local_buf, std::size_t bytes,
               bool write) {
  while (bytes > 0) {
    iovec local{local_buf, bytes};
    iovec remote{reinterpret_cast<void*>(addr), bytes};
    const ssize_t n = write ? ::process_vm_writev(pid, &local, 1, &remote, 1, 0)
                            : ::process_vm_readv(pid, &local, 1, &remote, 1, 0);
    if (n <= 0) {
      if (n < 0 && errno == EINTR) continue;
      const int rank = w.world_rank(peer);
      if (w.peer_gone(peer) || (n < 0 && errno == ESRCH))
        fail_peer(ErrorCode::PeerFailure, rank, "rank {} died while its memory was being {}", rank,
                  write ? "written" : "read");
      fail_peer(ErrorCode::Transport, rank, "{} {} bytes of rank {}'s memory failed: {}", write ? "writing" : "reading",
                bytes, rank, n < 0 ? errno_text() : std::string("nothing moved"));
    }
    local_buf += n;
    addr += static_cast<std::uint64_t>(n);
    bytes -= static_cast<std::size_t>(n);
  }
}

}  // namespace

void Window::get(int peer, const BufDesc&, std::uint64_t addr, void* dst, std::size_t bytes) {
  peer_copy(*this, peer, peers_[static_cast<std::size_t>(peer)].pid, addr, static_cast<char*>(dst), bytes, false);
}

void Window::put(int peer, const BufDesc&, std::uint64_t addr, const void* src, std::size_t bytes) {
  peer_copy(*this, peer, peers_[static_cast<std::size_t>(peer)].pid, addr,
            const_cast<char*>(static_cast<const char*>(src)), bytes, true);
}

char* Window::scratch(int parity, std::size_t bytes, std::uint64_t ticket, BufDesc* desc) {
  // An allocation retired at call `until` was read by peers only in calls
  // before it: free it once every peer has completed those.
  std::erase_if(retired_, [&](const Retired& r) {
    if (!ledger_.all_completed(r.until)) return false;
    shared_free(reinterpret_cast<void*>(r.a.base));
    return true;
  });
  *desc = BufDesc{};
  if (bytes == 0) return nullptr;
  if (line_round(bytes) <= kBlockScratchBytes) {
    char* p = static_cast<char*>(own_) + block_scratch_offset(size()) + static_cast<std::size_t>(parity) * kBlockScratchBytes;
    desc->addr = reinterpret_cast<std::uint64_t>(p);
    desc->bytes = bytes;
    desc->fd = kInBlock;
    desc->base = reinterpret_cast<std::uint64_t>(own_);
    desc->size = block_bytes_;
    return p;
  }
  if (const std::size_t grow = onesided::Ledger::region_to_grow(bytes, scratch_.size)) {
    // A peer may still read the old halves (the call before this one):
    // keep them until it cannot.
    if (scratch_.size) retired_.push_back({scratch_, ticket});
    scratch_ = shared_alloc(grow, "one-sided scratch");
  }
  char* p = reinterpret_cast<char*>(scratch_.base) + onesided::Ledger::half_offset(bytes, parity, scratch_.size);
  desc->addr = reinterpret_cast<std::uint64_t>(p);
  desc->bytes = bytes;
  desc->fd = scratch_.fd;
  desc->gen = scratch_.gen;
  desc->base = scratch_.base;
  desc->size = scratch_.size;
  return p;
}

}  // namespace braid::shm
