#include "transports/shm/window.hpp"

#include <linux/futex.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstring>
#include <new>
#include <optional>
#include <thread>

#include "src/common/errors.hpp"
#include "src/common/log.hpp"
#include "src/common/pidfd.hpp"
#include "transports/shm/ring.hpp"

namespace braid::shm {

namespace {

constexpr std::uint64_t kWindowMagic = 0x314e4957444952ULL;  // "RIDWIN1"
constexpr std::size_t kMaxMapsPerPeer = 64;

long futex(std::atomic<std::uint32_t>* addr, int op, std::uint32_t val, const timespec* ts) {
  // Not FUTEX_PRIVATE: the word is in memory other processes map.
  return ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(addr), op, val, ts, nullptr, 0);
}

}  // namespace

struct Window::Header {
  std::uint64_t magic;
  std::uint32_t group;
  std::uint32_t rank;
  std::uint32_t nranks;
  std::int32_t pid;
  alignas(kLine) std::atomic<std::uint32_t> doorbell;
  alignas(kLine) std::atomic<std::uint32_t> sleeping;
  alignas(kLine) std::atomic<std::uint64_t> completed;  // calls done
  alignas(kLine) BufDesc desc[2][3];
  alignas(kLine) IpcDesc ipc[2][3];
  alignas(kLine) std::atomic<std::uint64_t> doing_one_sided;  // doing(): a call's identity, or 0
  std::atomic<std::uint64_t> doing_messages;
  std::atomic<std::uint32_t> doing_shape;  // doing(): the one-sided call's shape
  alignas(kLine) std::atomic<std::uint32_t> failed;  // 0, or 1 once failure[] is written
  std::int32_t failure_code;
  std::int32_t failure_about;
  std::uint64_t failure_call;
  char failure[244];  // the error's message, NUL-terminated
};

namespace {
std::size_t line_round(std::size_t bytes) { return (bytes + kLine - 1) / kLine * kLine; }
std::size_t header_size() { return line_round(sizeof(Window::Header)); }
// A block of n ranks, in order: the header, a signal line per peer, two
// halves of block Scratch, then the fast boxes (kBoxSlots per writer).
std::size_t block_scratch_offset(int n) { return header_size() + static_cast<std::size_t>(n) * kLine; }
std::size_t boxes_offset(int n) { return block_scratch_offset(n) + 2 * kBlockScratchBytes; }
std::size_t block_size(int n) { return boxes_offset(n) + static_cast<std::size_t>(n) * kBoxSlots * kBoxLines * kLine; }
// Scratch above kSplitScratchBytes is one region for both parities.
bool single_region(std::size_t bytes) { return line_round(bytes) > Window::kSplitScratchBytes; }
}  // namespace

Window::Window(store::Store& store, std::uint32_t group_id, std::vector<int> world, int me, Deadline deadline,
               const std::function<void(int)>& check_alive)
    : world_(std::move(world)), me_(me), peers_(world_.size()), sent_(world_.size(), 0),
      consumed_(world_.size(), 0), completed_seen_(world_.size(), 0) {
  const int n = size();
  block_bytes_ = block_size(n);
  own_fd_ = Fd(::memfd_create("braid-window", MFD_CLOEXEC));
  if (!own_fd_.valid()) fail(ErrorCode::Transport, "one-sided window: memfd_create failed: {}", errno_text());
  if (::ftruncate(own_fd_.get(), static_cast<off_t>(block_bytes_)) != 0)
    fail(ErrorCode::Transport, "one-sided window: sizing {} bytes failed: {}", block_bytes_, errno_text());
  own_ = ::mmap(nullptr, block_bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, own_fd_.get(), 0);
  if (own_ == MAP_FAILED) {
    own_ = nullptr;
    fail(ErrorCode::Transport, "one-sided window: mmap failed: {}", errno_text());
  }
  // A fresh memfd reads as zeros: every count starts at 0.
  auto* h = new (own_) Header{};
  h->magic = kWindowMagic;
  h->group = group_id;
  h->rank = static_cast<std::uint32_t>(me);
  h->nranks = static_cast<std::uint32_t>(n);
  h->pid = ::getpid();
  const std::string prefix = fmt::format("os/{}/", group_id);
  store.set(prefix + std::to_string(me), store::to_bytes(fmt::format("{} {}", ::getpid(), own_fd_.get())));

  for (int q = 0; q < n; ++q) {
    if (q == me) continue;
    Peer& p = peers_[static_cast<std::size_t>(q)];
    // Poll rather than block on the store: a peer killed before it published
    // must be named within the deadline, not waited for until it.
    std::optional<store::Bytes> rec;
    while (!(rec = store.try_get(prefix + std::to_string(q)))) {
      if (deadline.expired())
        fail_peer(ErrorCode::Timeout, world_rank(q),
                  "one-sided window: rank {} did not publish its shared-memory block before the deadline (a rank "
                  "that passed other counts than this one may run the call as messages instead)",
                  world_rank(q));
      check_alive(world_rank(q));
      std::this_thread::sleep_for(std::chrono::milliseconds(std::min(100, deadline.poll_ms(100) + 1)));
    }
    const std::string v = store::to_string(*rec);
    int pid = 0, fd = -1;
    if (std::sscanf(v.c_str(), "%d %d", &pid, &fd) != 2 || pid <= 0 || fd < 0)
      fail_peer(ErrorCode::Transport, world_rank(q), "one-sided window: rank {} published '{}'; expected 'pid fd'",
                world_rank(q), v);
    p.pid = pid;
    p.pidfd = Fd(pidfd_open(pid));
    if (!p.pidfd.valid())
      fail_peer(ErrorCode::PeerFailure, world_rank(q), "rank {} is gone (pidfd_open of pid {}: {})", world_rank(q), pid,
                errno_text());
    Fd blk(pidfd_getfd(p.pidfd.get(), fd));
    if (!blk.valid()) {
      // The peer may have given up (another rank died) and closed its block:
      // give the abort it published a moment to reach us, so the error names
      // the root cause rather than this symptom.
      const int err = errno;
      for (int i = 0; i < 15 && !deadline.expired(); ++i) {
        check_alive(world_rank(q));
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
      errno = err;
    }
    if (!blk.valid())
      fail_peer(ErrorCode::Transport, world_rank(q),
                "one-sided window: cannot take rank {}'s memory (pidfd_getfd: {}; needs the same user)", world_rank(q),
                errno_text());
    struct stat st{};
    if (::fstat(blk.get(), &st) != 0 || static_cast<std::size_t>(st.st_size) != block_bytes_)
      fail_peer(ErrorCode::Transport, world_rank(q), "one-sided window: rank {}'s block has the wrong size",
                world_rank(q));
    p.block = ::mmap(nullptr, block_bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, blk.get(), 0);
    if (p.block == MAP_FAILED) {
      p.block = nullptr;
      fail(ErrorCode::Transport, "one-sided window: mapping rank {}'s block failed: {}", world_rank(q), errno_text());
    }
    p.block_bytes = block_bytes_;
    const Header* ph = header(q);
    if (ph->magic != kWindowMagic || ph->group != group_id || ph->rank != static_cast<std::uint32_t>(q) ||
        ph->nranks != static_cast<std::uint32_t>(n))
      fail_peer(ErrorCode::Transport, world_rank(q), "one-sided window: rank {}'s block is not this group's",
                world_rank(q));
  }
  BRAID_INFO("one-sided window for group {} ({} ranks) mapped", group_id, n);
}

Window::~Window() {
  for (Peer& p : peers_) {
    for (PeerMap& m : p.maps) ::munmap(m.local, m.size);
    if (p.block) ::munmap(p.block, p.block_bytes);
  }
  if (own_) ::munmap(own_, block_bytes_);
  if (scratch_.size) shared_free(reinterpret_cast<void*>(scratch_.base));
  for (Retired& r : retired_) shared_free(reinterpret_cast<void*>(r.a.base));
}

Window::Header* Window::header(int rank) const {
  return static_cast<Header*>(rank == me_ ? own_ : peers_[static_cast<std::size_t>(rank)].block);
}

std::atomic<std::uint32_t>& Window::line(int owner, int writer) const {
  auto* base = reinterpret_cast<char*>(header(owner)) + header_size() + static_cast<std::size_t>(writer) * kLine;
  return *reinterpret_cast<std::atomic<std::uint32_t>*>(base);
}

char* Window::box(int writer, int reader, std::uint64_t ticket) const {
  const std::size_t k = static_cast<std::size_t>(writer) * kBoxSlots + ticket % kBoxSlots;
  return reinterpret_cast<char*>(header(reader)) + boxes_offset(size()) + k * kBoxLines * kLine;
}

std::atomic<std::uint32_t>& Window::sleeping_flag() const { return header(me_)->sleeping; }
std::atomic<std::uint32_t>& Window::doorbell() const { return header(me_)->doorbell; }

void Window::publish(int parity, int which, const BufDesc& d) {
  // Most calls describe the same buffers as two calls ago: leaving the line
  // untouched keeps it cached in the peers that read it.
  BufDesc& slot = header(me_)->desc[parity][which];
  if (std::memcmp(&slot, &d, sizeof d) != 0) slot = d;
}

BufDesc Window::peer_desc(int peer, int parity, int which) const { return header(peer)->desc[parity][which]; }

void Window::publish_ipc(int parity, int which, const IpcDesc& d) {
  IpcDesc& slot = header(me_)->ipc[parity][which];
  if (std::memcmp(&slot, &d, sizeof d) != 0) slot = d;
}

IpcDesc Window::peer_ipc(int peer, int parity, int which) const { return header(peer)->ipc[parity][which]; }

void Window::signal(int peer) {
  const auto i = static_cast<std::size_t>(peer);
  // seq_cst store, then the flag: pairs with sleep()'s flag, then look.
  line(peer, me_).store(++sent_[i], std::memory_order_seq_cst);
  ring(peer);
}

void Window::ring(int peer) {
  Header* h = header(peer);
  if (h->sleeping.load(std::memory_order_seq_cst)) {
    h->doorbell.fetch_add(1, std::memory_order_seq_cst);
    futex(&h->doorbell, FUTEX_WAKE, INT_MAX, nullptr);
  }
}

std::uint32_t Window::received(int peer) const { return line(me_, peer).load(std::memory_order_seq_cst); }

void Window::sleep_on_doorbell(std::uint32_t seen, int ms) {
  timespec ts{ms / 1000, static_cast<long>(ms % 1000) * 1000000L};
  futex(&doorbell(), FUTEX_WAIT, seen, &ts);  // EAGAIN, ETIMEDOUT, EINTR: the caller looks again
}

void Window::completed(std::uint64_t calls) { header(me_)->completed.store(calls, std::memory_order_release); }

std::uint64_t Window::peer_completed(int peer, std::uint64_t need) {
  // The peer's line changes every call: read it only when what we last saw
  // is not enough (usually it is: peers are rarely two calls behind).
  auto& seen = completed_seen_[static_cast<std::size_t>(peer)];
  // seq_cst (a plain load on x86): a waiter announces its sleep, then looks here.
  if (seen < need) seen = header(peer)->completed.load(std::memory_order_seq_cst);
  return seen;
}

void Window::mark_failed(const Failure& f) {
  Header* h = header(me_);
  if (h->failed.load(std::memory_order_relaxed)) return;
  h->failure_code = f.code;
  h->failure_about = f.about;
  h->failure_call = f.call;
  const std::size_t n = std::min(f.why.size(), sizeof h->failure - 1);
  std::memcpy(h->failure, f.why.data(), n);
  h->failure[n] = '\0';
  h->failed.store(1, std::memory_order_release);
}

void Window::doing(bool one_sided, std::uint64_t identity, std::uint32_t shape) {
  Header* h = header(me_);
  // A loop of one collective stores its shape once.
  if (one_sided && identity != 0 && shape != doing_shape_) {
    doing_shape_ = shape;
    h->doing_shape.store(shape, std::memory_order_relaxed);
  }
  // Release: a peer that reads this identity reads the shape stored before.
  (one_sided ? h->doing_one_sided : h->doing_messages).store(identity, std::memory_order_release);
}

std::uint32_t Window::peer_doing_shape(int peer) const {
  return header(peer)->doing_shape.load(std::memory_order_relaxed);
}

std::uint64_t Window::peer_doing(int peer, bool one_sided) const {
  const Header* h = header(peer);
  return (one_sided ? h->doing_one_sided : h->doing_messages).load(std::memory_order_acquire);
}

bool Window::peer_failed(int peer, Failure* f) const {
  const Header* h = header(peer);
  if (h->failed.load(std::memory_order_acquire) == 0) return false;
  // The peer wrote these before the flag; bound the read whatever it wrote.
  char text[sizeof h->failure];
  std::memcpy(text, h->failure, sizeof text);
  text[sizeof text - 1] = '\0';
  f->code = h->failure_code;
  f->about = h->failure_about;
  f->call = h->failure_call;
  f->why = text;
  return true;
}

bool Window::peer_gone(int peer) const {
  const Peer& p = peers_[static_cast<std::size_t>(peer)];
  if (!p.pidfd.valid()) return false;
  pollfd f{p.pidfd.get(), POLLIN, 0};
  return ::poll(&f, 1, 0) > 0;
}

char* Window::map(int peer, const BufDesc& d, std::uint64_t addr, std::size_t bytes) {
  if (d.fd == -1) return nullptr;
  if (addr < d.base || addr + bytes > d.base + d.size)
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
void peer_copy(const Window& w, int peer, pid_t pid, std::uint64_t addr, char* local_buf, std::size_t bytes,
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

void Window::read_peer(int peer, std::uint64_t addr, void* dst, std::size_t bytes) {
  peer_copy(*this, peer, peers_[static_cast<std::size_t>(peer)].pid, addr, static_cast<char*>(dst), bytes, false);
}

void Window::write_peer(int peer, std::uint64_t addr, const void* src, std::size_t bytes) {
  peer_copy(*this, peer, peers_[static_cast<std::size_t>(peer)].pid, addr,
            const_cast<char*>(static_cast<const char*>(src)), bytes, true);
}

std::uint64_t Window::writable_after(std::size_t bytes, std::uint64_t ticket) {
  const bool single = single_region(bytes);
  const bool after_single = last_single_ + 1 == ticket;
  if (single) last_single_ = ticket;
  if (single || after_single) return ticket;
  return ticket >= 2 ? ticket - 1 : 0;
}

char* Window::scratch(int parity, std::size_t bytes, std::uint64_t ticket, BufDesc* desc) {
  // An allocation retired at call `until` was read by peers only in calls
  // before it: free it once every peer has completed those.
  std::erase_if(retired_, [&](const Retired& r) {
    for (int q = 0; q < size(); ++q)
      if (q != me_ && peer_completed(q, r.until) < r.until) return false;
    shared_free(reinterpret_cast<void*>(r.a.base));
    return true;
  });
  *desc = BufDesc{};
  if (bytes == 0) return nullptr;
  const std::size_t half = line_round(bytes);
  if (half <= kBlockScratchBytes) {
    char* p = static_cast<char*>(own_) + block_scratch_offset(size()) + static_cast<std::size_t>(parity) * kBlockScratchBytes;
    desc->addr = reinterpret_cast<std::uint64_t>(p);
    desc->bytes = bytes;
    desc->fd = kInBlock;
    desc->base = reinterpret_cast<std::uint64_t>(own_);
    desc->size = block_bytes_;
    return p;
  }
  const bool single = single_region(bytes);  // writable_after() made it safe
  const std::size_t need = single ? half : 2 * half;
  if (scratch_.size < need) {
    // A peer may still read the old halves (the call before this one):
    // keep them. Sizes at least double, so the kept ones never sum to more
    // than the current allocation.
    const std::size_t want = std::max(need, 2 * scratch_.size);
    if (scratch_.size) retired_.push_back({scratch_, ticket});
    scratch_ = shared_alloc(want, "one-sided scratch");
  }
  const std::size_t half_size = scratch_.size / 2 / kLine * kLine;
  char* p = reinterpret_cast<char*>(scratch_.base) + (single ? 0 : static_cast<std::size_t>(parity) * half_size);
  desc->addr = reinterpret_cast<std::uint64_t>(p);
  desc->bytes = bytes;
  desc->fd = scratch_.fd;
  desc->gen = scratch_.gen;
  desc->base = scratch_.base;
  desc->size = scratch_.size;
  return p;
}

}  // namespace braid::shm
