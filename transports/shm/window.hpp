// shm::Window: the one-sided face (transports/one_sided.hpp) over one host's
// shared memory, one per group.
//
// Each member owns a small block in an anonymous memfd that every other
// member maps (through pidfd_getfd, as the shm transport does):
//   - its call ledger (ledger.hpp), which peers read in place;
//   - one cache line per peer that only that peer writes: how many signals
//     it has sent us so far (window_signals.cpp);
//   - a doorbell word and a "sleeping" flag: a waiter spins a bounded time,
//     then sleeps on the doorbell with a futex; a signaller wakes it only
//     when the flag says it sleeps (no system call on the fast path);
//   - two halves of small Scratch, and per peer kBoxSlots fast boxes that
//     only that peer writes: the messages of small message plans (plan.hpp,
//     fits_fastbox), each with a flag word after its bytes, so no signal is
//     needed.
// Peers' buffers are reached straight through a mapping when the memory is
// shareable (braid::mem_alloc, and the window's own Scratch), otherwise with
// one process_vm_readv or writev (window_memory.cpp).
#pragma once

#include <sys/types.h>

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "src/common/fd.hpp"
#include "src/common/time.hpp"
#include "src/store/store.hpp"
#include "transports/one_sided.hpp"
#include "transports/shm/shared_alloc.hpp"

namespace braid::shm {

using onesided::BufDesc;
using onesided::IpcDesc;
using onesided::kInBlock;

// Scratch up to this many bytes per half lives in the rank's block, which
// peers map when the window is made: reading it never needs the owner to be
// alive (a rank may finish a call and exit while peers still read).
inline constexpr std::size_t kBlockScratchBytes = 64 * 1024;

// Fast boxes (algorithms/plan.hpp, fits_fastbox): each rank's block holds,
// for every writer, kBoxSlots boxes of kBoxLines cache lines; a call uses
// the boxes of slot ticket % kBoxSlots, so a writer waits for a reader only
// when it runs kBoxSlots calls ahead of it.
inline constexpr int kBoxSlots = 8;
inline constexpr std::size_t kBoxLines = 80;

class Window final : public onesided::Window {
 public:
  // Creates this rank's block, publishes it under "os/<group>/<rank>" and
  // maps every peer's (waiting for them up to the deadline). While a peer's
  // record is missing, `check_alive(world rank)` is called every 100 ms: it
  // throws if that peer died (before it could publish) or the job was
  // aborted.
  Window(store::Store& store, std::uint32_t group_id, std::vector<int> world, int me, Deadline deadline,
         const std::function<void(int)>& check_alive);
  ~Window() override;

  const char* transport() const override { return "shm"; }
  // What the one-sided runner may use beyond the face: fast boxes for small
  // message plans, and CUDA device memory through CUDA IPC.
  static constexpr bool kFastBoxes = true;
  static constexpr bool kDeviceMemory = true;
  static constexpr int kBoxSlots = shm::kBoxSlots;
  static constexpr std::size_t kBoxLines = shm::kBoxLines;

  // --- memory (window_memory.cpp) -------------------------------------------------
  BufDesc describe(const void* p, std::size_t bytes) override;
  char* scratch(int parity, std::size_t bytes, std::uint64_t ticket, BufDesc* desc) override;
  // Maps the peer's allocation on first use; nullptr when the buffer is not
  // shareable. Writable: a Put into a peer's shareable Output stores
  // straight into it.
  char* map(int peer, const BufDesc& d, std::uint64_t addr, std::size_t bytes) override;
  // One process_vm_readv / writev.
  void get(int peer, const BufDesc& d, std::uint64_t addr, void* dst, std::size_t bytes) override;
  void put(int peer, const BufDesc& d, std::uint64_t addr, const void* src, std::size_t bytes) override;
  bool peer_gone(int peer) override;

  // --- signals (window_signals.cpp) ---------------------------------------------
  void signal(int peer) override;
  std::uint32_t received(int peer) const override;
  void ring(int peer) override;
  bool sleep_until(FunctionRef<bool()> ready, int ms) override { return sleep(ready, ms); }
  // The same, inlined for the runner.
  template <class Ready>
  bool sleep(Ready&& ready, int ms);
  // The fast box `writer` fills for `reader` in the call with this ticket:
  // kBoxLines lines in the reader's block, line-aligned.
  char* box(int writer, int reader, std::uint64_t ticket) const;

  // A peer's device allocations opened here through CUDA IPC (kept for the
  // device runner: a new allocation overlapping one seen before means the
  // peer freed that one, whose mapping then goes).
  struct IpcSeen {
    std::array<unsigned char, 64> handle{};
    std::uint64_t base = 0, size = 0, buffer_id = 0;
  };
  std::vector<IpcSeen>& ipc_seen(int peer) { return peers_[static_cast<std::size_t>(peer)].ipc_seen; }

  struct Header;  // the block's layout (window.cpp)

 private:
  struct PeerMap {
    std::uint64_t gen, base, size;
    void* local;
  };
  struct Peer {
    pid_t pid = 0;
    Fd pidfd;
    void* block = nullptr;
    std::size_t block_bytes = 0;
    std::vector<PeerMap> maps;  // peers' shareable buffers mapped here
    std::vector<IpcSeen> ipc_seen;
  };
  Header* header(int rank) const;
  std::atomic<std::uint32_t>& line(int owner, int writer) const;
  void sleep_on_doorbell(std::uint32_t seen, int ms);
  std::atomic<std::uint32_t>& sleeping_flag() const;
  std::atomic<std::uint32_t>& doorbell() const;

  std::size_t block_bytes_;
  Fd own_fd_;
  void* own_ = nullptr;
  std::vector<Peer> peers_;
  std::vector<std::uint32_t> sent_;
  SharedAllocation scratch_;
  struct Retired {
    SharedAllocation a;
    std::uint64_t until;  // the call that retired it: freed once every peer completed the calls before
  };
  std::vector<Retired> retired_;
};

template <class Ready>
bool Window::sleep(Ready&& ready, int ms) {
  // Announce, then look again: a signaller that missed the flag stored its
  // count before our second look (both seq_cst), so we see it.
  sleeping_flag().store(1, std::memory_order_seq_cst);
  const std::uint32_t seen = doorbell().load(std::memory_order_seq_cst);
  const bool ok = ready();
  if (!ok) sleep_on_doorbell(seen, ms);
  sleeping_flag().store(0, std::memory_order_relaxed);
  return ok;
}

}  // namespace braid::shm
