// Window: the shared state behind one-sided plans on one host (the steps
// Signal, Wait, Get and GetReduce of algorithms/plan.hpp), one per group.
//
// Each member owns a small block in an anonymous memfd that every other
// member maps (through pidfd_getfd, as the shm transport does):
//   - one cache line per peer that only that peer writes: how many signals
//     it has sent us so far (signals are counted, never tagged; the plan
//     rules keep each pair's signals and waits in the same order);
//   - a doorbell word and a "sleeping" flag: a waiter spins a bounded time,
//     then sleeps on the doorbell with a futex; a signaller wakes it only
//     when the flag says it sleeps (no system call on the fast path);
//   - per call, where the member's Input, Output and Scratch are, so peers
//     can read them: straight through a mapping when the memory is
//     shareable (braid::mem_alloc, and the window's own Scratch), otherwise
//     with one process_vm_readv. Descriptors and Scratch alternate between
//     two halves by call parity; the plan rules make that safe (plan.hpp);
//   - per peer, kBoxSlots fast boxes that only that peer writes: the
//     messages of small message plans (plan.hpp, fits_fastbox), each with a
//     flag word after its bytes, so no signal is needed.
// Calls run one at a time per group, in issue order (a ticket), so counts
// and parities agree across ranks whatever thread issues them.
#pragma once

#include <sys/types.h>

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "src/common/fd.hpp"
#include "src/common/time.hpp"
#include "transports/shm/shared_alloc.hpp"
#include "src/store/store.hpp"

namespace braid::shm {

// Scratch up to this many bytes per half lives in the rank's block, which
// peers map when the window is made: reading it never needs the owner to be
// alive (a rank may finish a call and exit while peers still read).
inline constexpr std::size_t kBlockScratchBytes = 64 * 1024;
inline constexpr std::int32_t kInBlock = -2;  // BufDesc::fd: in the owner's block

// Fast boxes (algorithms/plan.hpp, fits_fastbox): each rank's block holds,
// for every writer, kBoxSlots boxes of kBoxLines cache lines; a call uses
// the boxes of slot ticket % kBoxSlots, so a writer waits for a reader only
// when it runs kBoxSlots calls ahead of it.
inline constexpr int kBoxSlots = 8;
inline constexpr std::size_t kBoxLines = 80;

// Where one buffer of one rank is for the current call.
struct BufDesc {
  std::uint64_t addr = 0;   // in the owner's address space
  std::uint64_t bytes = 0;
  std::int32_t fd = -1;     // memfd in the owner (shareable), kInBlock, else -1
  // 0: host memory. d + 1: memory of the owner's CUDA device d, shared
  // through CUDA IPC (the window's IpcDesc for the same slot says how to
  // open it; addr is the owner's device pointer). Zero-filled blocks read
  // as host memory.
  std::int32_t cuda = 0;
  std::uint64_t gen = 0;    // SharedAllocation::gen
  std::uint64_t base = 0;   // SharedAllocation::base
  std::uint64_t size = 0;   // SharedAllocation::size
  // Device calls: the call's ticket + 1, on all three slots, every call. A
  // device rank reading a slot without its call's stamp knows the peer runs
  // another plan (it passed host or managed memory, say) and refuses before
  // any kernel could write into a buffer described for an older call. Host
  // calls leave it 0 (rewriting the line every call would cost their
  // readers a miss).
  std::uint64_t stamp = 0;
  // The call's shape (CompiledPlan::shape): a reader whose own call has
  // another shape knows the owner passed other counts, dtype, root or
  // algorithm, rather than reading a prefix of its buffer as if all agreed.
  std::uint32_t shape = 0;
};

// How a peer opens a device buffer: a cudaIpcMemHandle_t of the allocation
// holding it and the buffer's offset in that allocation. Kept apart from
// BufDesc so that host calls copy and compare only the small descriptor.
struct IpcDesc {
  std::array<unsigned char, 64> handle{};
  std::uint64_t offset = 0;
  std::uint64_t buffer_id = 0;  // the exporter's allocation id (never reused)
};

class Window {
 public:
  // Creates this rank's block, publishes it under "os/<group>/<rank>" and
  // maps every peer's (waiting for them up to the deadline). `world` maps
  // group ranks to world ranks, for error messages. While a peer's record is
  // missing, `check_alive(world rank)` is called every 100 ms: it throws if
  // that peer died (before it could publish) or the job was aborted.
  Window(store::Store& store, std::uint32_t group_id, std::vector<int> world, int me, Deadline deadline,
         const std::function<void(int)>& check_alive);
  ~Window();
  Window(const Window&) = delete;
  Window& operator=(const Window&) = delete;

  int size() const { return static_cast<int>(world_.size()); }
  int me() const { return me_; }
  int world_rank(int peer) const { return world_[static_cast<std::size_t>(peer)]; }

  // --- descriptors (which = 0 Input, 1 Output, 2 Scratch) -------------------
  void publish(int parity, int which, const BufDesc& d);
  BufDesc peer_desc(int peer, int parity, int which) const;
  // Device buffers (BufDesc::cuda != 0): published before the BufDesc.
  void publish_ipc(int parity, int which, const IpcDesc& d);
  IpcDesc peer_ipc(int peer, int parity, int which) const;
  // The peer's bytes [addr, addr + bytes) as mapped here, mapping the
  // allocation on first use; nullptr when the buffer is not shareable.
  // Writable: a Put into a peer's shareable Output stores straight into it.
  char* map(int peer, const BufDesc& d, std::uint64_t addr, std::size_t bytes);
  // One copy from the peer's memory (process_vm_readv); throws braid::Error
  // naming the peer if it is gone.
  void read_peer(int peer, std::uint64_t addr, void* dst, std::size_t bytes);
  // One copy into the peer's memory (process_vm_writev), the same way.
  void write_peer(int peer, std::uint64_t addr, const void* src, std::size_t bytes);

  // --- signals ---------------------------------------------------------------
  void signal(int peer);
  // Wakes `peer` if it sleeps on its doorbell (after a seq_cst store it must
  // see, such as a fast box's flag).
  void ring(int peer);
  // The fast box `writer` fills for `reader` in the call with this ticket:
  // kBoxLines lines in the reader's block, line-aligned.
  char* box(int writer, int reader, std::uint64_t ticket) const;
  // Signals received from `peer` so far (acquire: what it wrote before
  // signalling is visible after this returns a count that includes it).
  std::uint32_t received(int peer) const;
  // Sleeps until a signal may have arrived, at most `ms`; `ready()` is
  // checked after announcing the sleep, so no wake-up is lost. Returns what
  // that check returned (true: it did not sleep).
  template <class Ready>
  bool sleep(Ready&& ready, int ms);
  // Cumulative waits satisfied per peer (plans advance it; the runtime
  // compares with received()).
  std::vector<std::uint32_t>& consumed() { return consumed_; }
  bool peer_gone(int peer) const;
  // A call that fails part-way leaves the window out of step for good. The
  // failing rank says so in its block, with its error, so that peers waiting
  // for its signals fail at once with that error (naming it) instead of
  // waiting out their timeouts. Sticky: later calls fail too.
  struct Failure {
    int code = 0;          // braid::ErrorCode
    int about = -1;        // the world rank its error names, or -1
    std::string why;
    std::uint64_t call = 0;  // the failed call's identity (doing()), 0 if unknown
  };
  void mark_failed(const Failure& f);
  // True if `peer` marked its window failed, with what it said.
  bool peer_failed(int peer, Failure* f) const;
  // What this rank runs now, for a peer that waits on it to tell "it runs
  // this call another way" (it passed other counts) from "it is slow": the
  // call's identity (executor.hpp, call_identity), 0 when idle; one slot
  // for the one-sided runner, one for message plans. Owner-written, on a
  // line of its own. A one-sided call also says its shape
  // (CompiledPlan::shape), written before its identity: a waiting peer whose
  // call has the same identity but another shape knows the rank passed
  // other arguments. (`shape` is ignored for message plans and idle.)
  void doing(bool one_sided, std::uint64_t identity, std::uint32_t shape = 0);
  std::uint64_t peer_doing(int peer, bool one_sided) const;
  std::uint32_t peer_doing_shape(int peer) const;
  // Calls this rank / a peer has completed on the window. Before a call
  // writes anything it alternates by parity (descriptors, Scratch), every
  // peer must have completed the call two before it: whatever plans ran in
  // between, nobody still reads that half.
  void completed(std::uint64_t calls);
  // At least `need` if the peer has completed that many calls; reads the
  // peer's line only when the last value seen is below `need`.
  std::uint64_t peer_completed(int peer, std::uint64_t need);
  // Something the peer wrote in call `ticket` has arrived: it runs that
  // call, so it has completed every one before (calls run one at a time, in
  // ticket order). Spares reading its line, which it rewrites every call.
  void peer_progressed(int peer, std::uint64_t ticket) {
    auto& seen = completed_seen_[static_cast<std::size_t>(peer)];
    if (seen < ticket) seen = ticket;
  }

  // --- scratch -----------------------------------------------------------------
  // How many calls every peer must have completed before the call `ticket`,
  // with `bytes` of Scratch, writes its descriptors or Scratch: ticket-1
  // (its half was last used by ticket-2), or ticket when it or the call
  // before uses the one large region (scratch()). Called once per call.
  std::uint64_t writable_after(std::size_t bytes, std::uint64_t ticket);
  // This call's Scratch half (zero-size plans get nullptr); may move to a
  // bigger allocation, retiring the old one until no peer can still read it
  // (a later call frees it).
  // Above kSplitScratchBytes both parities get the same region: two halves
  // of megabytes double the cache footprint (a bare two-process oneshot
  // all_reduce of 4 MiB: 30% slower with alternating halves).
  char* scratch(int parity, std::size_t bytes, std::uint64_t ticket, BufDesc* desc);
  static constexpr std::size_t kSplitScratchBytes = std::size_t{1} << 20;

  struct Header;  // the block's layout (window.cpp)

  // A peer's device allocations opened here through CUDA IPC (kept for the
  // device runner, which knows CUDA: a new allocation overlapping one seen
  // before means the peer freed that one, whose mapping then goes).
  struct IpcSeen {
    std::array<unsigned char, 64> handle{};
    std::uint64_t base = 0, size = 0, buffer_id = 0;
  };
  std::vector<IpcSeen>& ipc_seen(int peer) { return peers_[static_cast<std::size_t>(peer)].ipc_seen; }

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

  std::vector<int> world_;
  int me_;
  std::size_t block_bytes_;
  Fd own_fd_;
  void* own_ = nullptr;
  std::vector<Peer> peers_;
  std::vector<std::uint32_t> sent_, consumed_;
  std::vector<std::uint64_t> completed_seen_;
  SharedAllocation scratch_;
  struct Retired {
    SharedAllocation a;
    std::uint64_t until;  // the call that retired it: freed once every peer completed the calls before
  };
  std::vector<Retired> retired_;
  std::uint64_t last_single_ = ~std::uint64_t{0};  // last call on the one large region
  std::uint32_t doing_shape_ = 0;                  // the shape doing() stored last
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
