// The call ledger of a one-sided window (one_sided.hpp): what each rank
// publishes for its peers about the call it runs, and the rules for when a
// call may reuse what an older one published.
//
// Each rank owns one LedgerBlock. It writes only its own; it reads its
// peers' where the transport makes them readable (shared memory: the peer's
// block, mapped; RDMA: a local copy the peer keeps up to date with RDMA
// WRITEs, which the transport's Mirror sends after each update here).
//
// The rules (algorithms/plan.hpp states them for plans):
//   - Descriptors and Scratch alternate between two halves by call parity.
//     Before a call writes its half, every peer must have completed the
//     call two before it: whatever plans ran in between, nobody still reads
//     that half (writable_after).
//   - Above kSplitScratchBytes both parities share one Scratch region (two
//     halves of megabytes would double the cache footprint), so a call
//     using it, and the call after one that did, wait for every peer to
//     have completed the call just before.
//   - A call that fails part-way leaves the window out of step for good. The
//     failing rank marks its block failed with its error, so peers waiting
//     for its signals fail at once naming it instead of waiting out their
//     timeouts. Sticky.
//   - doing(): the call a rank runs now, so a peer that waits on it can tell
//     "it runs this call another way" (it passed other counts, so it runs a
//     message plan) from "it is slow".
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace braid::onesided {

inline constexpr std::size_t kLine = 64;
inline std::size_t line_round(std::size_t bytes) { return (bytes + kLine - 1) / kLine * kLine; }

// BufDesc::fd: the buffer is in the owner's window block (shared memory).
inline constexpr std::int32_t kInBlock = -2;

// Whether [addr, addr + bytes) lies inside [base, base + size), computed
// without overflow: every descriptor was written by another process.
inline bool span_inside(std::uint64_t base, std::uint64_t size, std::uint64_t addr, std::uint64_t bytes) {
  return addr >= base && bytes <= size && addr - base <= size - bytes;
}

// Where one buffer of one rank is for the current call (which = 0 Input,
// 1 Output, 2 Scratch). The fields after `bytes` say how to reach it; each
// transport fills the ones it needs and leaves the rest zero.
struct BufDesc {
  std::uint64_t addr = 0;   // in the owner's address space
  std::uint64_t bytes = 0;
  // Shared memory: memfd in the owner (shareable), kInBlock, else -1 (then
  // the bytes are read with process_vm_readv).
  std::int32_t fd = -1;
  // 0: host memory. d + 1: memory of the owner's CUDA device d, shared
  // through CUDA IPC (the IpcDesc for the same slot says how to open it;
  // addr is the owner's device pointer). Zero-filled blocks read as host
  // memory.
  std::int32_t cuda = 0;
  std::uint64_t gen = 0;    // shared memory: SharedAllocation::gen
  std::uint64_t base = 0;   // SharedAllocation::base (RDMA: the registered range)
  std::uint64_t size = 0;   // SharedAllocation::size (RDMA: the registered range)
  // Device calls: the call's ticket + 1, on all three slots, every call. A
  // device rank reading a slot without its call's stamp knows the peer runs
  // another plan and refuses before any kernel could write into a buffer
  // described for an older call. Host calls leave it 0.
  std::uint64_t stamp = 0;
  // The call's shape (CompiledPlan::shape): a reader whose own call has
  // another shape knows the owner passed other counts, dtype, root or
  // algorithm, rather than reading a prefix of its buffer as if all agreed.
  std::uint32_t shape = 0;
  std::uint32_t rkey = 0;   // RDMA: the remote key of [base, base + size)
};

// How a peer opens a device buffer: a cudaIpcMemHandle_t of the allocation
// holding it and the buffer's offset in that allocation. Kept apart from
// BufDesc so that host calls copy and compare only the small descriptor.
struct IpcDesc {
  std::array<unsigned char, 64> handle{};
  std::uint64_t offset = 0;
  std::uint64_t buffer_id = 0;  // the exporter's allocation id (never reused)
};

struct Failure {
  int code = 0;            // braid::ErrorCode
  int about = -1;          // the world rank its error names, or -1
  std::string why;
  std::uint64_t call = 0;  // the failed call's identity (doing()), 0 if unknown
};

// One rank's ledger, as its peers read it. Plain data and atomics: it lives
// in memory other processes (or an RDMA adapter) write.
struct LedgerBlock {
  alignas(kLine) std::atomic<std::uint64_t> completed;  // calls done
  alignas(kLine) BufDesc desc[2][3];
  alignas(kLine) IpcDesc ipc[2][3];
  alignas(kLine) std::atomic<std::uint64_t> doing_one_sided;  // a call's identity, or 0
  std::atomic<std::uint64_t> doing_messages;
  std::atomic<std::uint32_t> doing_shape;  // the one-sided call's shape
  alignas(kLine) std::atomic<std::uint32_t> failed;  // 0, or 1 once the rest is written
  std::int32_t failure_code;
  std::int32_t failure_about;
  std::uint64_t failure_call;
  char failure[236];  // the error's message, NUL-terminated
  // 1 + the world rank the owner learned had failed before it left, or 0
  // (Ledger::knew_failed).
  alignas(kLine) std::atomic<std::uint32_t> knew_failed;
};
static_assert(sizeof(LedgerBlock) % kLine == 0);

class Ledger {
 public:
  // Sends an update of this rank's block to the peers' copies: called after
  // each write here with the bytes written. `ordered`: every update pushed
  // before must be visible to a peer before this one is. Shared memory
  // needs no mirror.
  class Mirror {
   public:
    virtual void push(const void* field, std::size_t bytes, bool ordered) = 0;

   protected:
    ~Mirror() = default;
  };

  static constexpr std::size_t kSplitScratchBytes = std::size_t{1} << 20;

  Ledger(int n, int me);
  // Where this rank's block is, where each peer's is readable (peers[me]
  // unused), and who mirrors updates (null: nobody needs to).
  void bind(LedgerBlock* mine, std::vector<const LedgerBlock*> peers, Mirror* mirror);

  // --- descriptors ------------------------------------------------------------
  void publish(int parity, int which, const BufDesc& d);
  BufDesc peer_desc(int peer, int parity, int which) const;
  // Device buffers (BufDesc::cuda != 0): published before the BufDesc.
  void publish_ipc(int parity, int which, const IpcDesc& d);
  IpcDesc peer_ipc(int peer, int parity, int which) const;

  // --- what runs ----------------------------------------------------------------
  // One slot for one-sided calls, one for message plans; `identity` 0 when
  // idle. A one-sided call also says its shape, written before its identity.
  void doing(bool one_sided, std::uint64_t identity, std::uint32_t shape = 0);
  std::uint64_t peer_doing(int peer, bool one_sided) const;
  std::uint32_t peer_doing_shape(int peer) const;

  // --- completion and reuse -----------------------------------------------------------
  void completed(std::uint64_t calls);
  // At least `need` if the peer has completed that many calls; reads the
  // peer's block only when the last value seen is below `need`.
  std::uint64_t peer_completed(int peer, std::uint64_t need);
  // Every peer has completed `need` calls.
  bool all_completed(std::uint64_t need);
  // Something the peer wrote in call `ticket` has arrived: it runs that
  // call, so it has completed every one before (calls run one at a time, in
  // ticket order). Spares reading its block, which it rewrites every call.
  void peer_progressed(int peer, std::uint64_t ticket) {
    auto& seen = completed_seen_[static_cast<std::size_t>(peer)];
    if (seen < ticket) seen = ticket;
  }
  // How many calls every peer must have completed before the call `ticket`,
  // with `bytes` of Scratch, writes its descriptors or Scratch (see the
  // rules above). Called once per call.
  std::uint64_t writable_after(std::size_t bytes, std::uint64_t ticket);
  static bool single_region(std::size_t bytes);
  // Large Scratch, in a region of a window's own (above what its block
  // holds): the size a new region must have for `bytes` per call when the
  // current one has `current` bytes, or 0 when that one fits. A new one is at
  // least twice the old, so the retired ones a window keeps until no peer
  // reads them never sum to more than the current region.
  static std::size_t region_to_grow(std::size_t bytes, std::size_t current);
  // Where this call's half starts in a region of `region` bytes (both
  // parities share offset 0 above kSplitScratchBytes, writable_after()).
  static std::size_t half_offset(std::size_t bytes, int parity, std::size_t region);
  // Cumulative waits satisfied per peer (the runner advances it and
  // compares with Window::received()).
  std::vector<std::uint32_t>& consumed() { return consumed_; }

  // --- failure marks ------------------------------------------------------------
  void mark_failed(const Failure& f);
  bool peer_failed(int peer, Failure* f) const;
  // Leaving after learning that world rank `rank` failed: said here for a
  // peer that finds this rank gone while it waits on it in the window. With
  // the store's host dead, the job's failure log that would say why this
  // rank left is gone too.
  void knew_failed(int rank);
  // What the peer said so, checked against `world` ranks: -1 if nothing.
  int peer_knew_failed(int peer, int world) const;

 private:
  void pushed(const void* field, std::size_t bytes, bool ordered = false) {
    if (mirror_) mirror_->push(field, bytes, ordered);
  }
  const LedgerBlock& of(int peer) const { return *peers_[static_cast<std::size_t>(peer)]; }
  template <class T>
  void store_if_changed(T& slot, const T& value);

  int n_, me_;
  LedgerBlock* mine_ = nullptr;
  std::vector<const LedgerBlock*> peers_;
  Mirror* mirror_ = nullptr;
  std::vector<std::uint32_t> consumed_;
  std::vector<std::uint64_t> completed_seen_;
  std::uint64_t last_single_ = ~std::uint64_t{0};  // last call on the one large region
  std::uint32_t doing_shape_ = 0;                  // the shape doing() stored last
};

}  // namespace braid::onesided
