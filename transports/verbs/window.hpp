// verbs::Window: the one-sided face (transports/one_sided.hpp) over RDMA, so
// the one-sided plans (oneshot, staged, push, peer_read, ...) run between
// hosts. One per group, under backend 'verbs'.
//
// Connections. A window opens the RDMA device itself and makes one
// reliable-connected QP per peer, apart from the message transport's, so
// its WRITEs and READs never queue behind messages. QP endpoints, the
// block's address and rkey travel through the store ("osv/<group>/<rank>");
// a second record ("osv/<group>/<rank>/up") says the QPs are ready to
// receive, and nobody writes before every peer said so.
//
// The block. Each rank registers one block that its peers write into:
//   - a copy of every member's call ledger (ledger.hpp): a rank updates its
//     own, then WRITEs the changed bytes into each peer's copy of it (the
//     Mirror), so reading a peer's ledger is a local load;
//   - one signal line per peer, written only by that peer: its count of
//     signals sent to us, as one 4-byte WRITE;
//   - two halves of small Scratch, which peers READ or WRITE.
// Larger Scratch is a registered region of its own, retired as the shared
// memory window retires its own (ledger.hpp's rules say when).
//
// Data. get is one RDMA READ, put one RDMA WRITE, each waited for; a user
// buffer is registered through a RegCache on describe() and held for two
// calls (peers may read it until they complete the call after it).
//
// Ordering. RC QPs execute WRITEs in order, but the specification does not
// promise that the CPU sees the data of one WRITE before the next one's.
// signal() therefore waits until everything posted to that peer before it
// has completed (ACKed, so placed in the peer's memory), then WRITEs the
// count. That costs a round trip when a ledger update is in flight;
// WRITE_WITH_IMM signals would not, at the price of receive queues and
// completions on the waiting side.
//
// Liveness. A failed completion (retries exhausted, remote access error)
// marks the peer gone. A rank that waits on a peer also probes it, at most
// every kProbeInterval: an 8-byte READ, which fails once the QP's retries
// run out (7 x 268 ms) on adapters that answer a dead QP's packets; and
// the host's own check (the constructor's check_alive: the runtime asks its
// transports, whose TCP listener refuses once the process is gone), because
// Soft-RoCE drops those packets and its READs never fail (measured in the
// VM: no failure within 40 s). The destructor waits (bounded) until every
// peer has completed the calls this rank has, so nobody READs a block that
// is gone.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <sched.h>
#include <string>
#include <vector>

#include "src/common/time.hpp"
#include "src/store/store.hpp"
#include "transports/one_sided.hpp"
#include "transports/verbs/device.hpp"
#include "transports/verbs/reg_cache.hpp"
#include "transports/verbs/verbs_objects.hpp"

namespace braid::verbs {

class Window final : public onesided::Window, private onesided::Ledger::Mirror {
 public:
  // Throws braid::Error(NotSupported) where no RDMA device is usable,
  // (Timeout) naming a peer that never published, (Transport) on a QP or
  // registration failure.
  Window(store::Store& store, std::uint32_t group_id, std::vector<int> world, int me, Deadline deadline,
         const std::function<void(int)>& check_alive);
  ~Window() override;

  const char* transport() const override { return "verbs"; }
  static constexpr bool kFastBoxes = false;
  static constexpr bool kDeviceMemory = false;

  // --- memory (window_data.cpp) ---------------------------------------------------
  onesided::BufDesc describe(const void* p, std::size_t bytes) override;
  char* scratch(int parity, std::size_t bytes, std::uint64_t ticket, onesided::BufDesc* desc) override;
  char* map(int, const onesided::BufDesc&, std::uint64_t, std::size_t) override { return nullptr; }
  void get(int peer, const onesided::BufDesc& d, std::uint64_t addr, void* dst, std::size_t bytes) override;
  void put(int peer, const onesided::BufDesc& d, std::uint64_t addr, const void* src, std::size_t bytes) override;
  bool peer_gone(int peer) override;

  // --- signals -----------------------------------------------------------------------
  void signal(int peer) override;
  std::uint32_t received(int peer) const override {
    return line(peer).load(std::memory_order_acquire);
  }
  void ring(int) override {}  // waiters poll; nobody sleeps in the kernel
  bool sleep_until(FunctionRef<bool()> ready, int ms) override { return sleep(ready, ms); }
  // Polls `ready` for up to `ms`, yielding the CPU between looks (an RDMA
  // write wakes nobody), and reaps completions meanwhile. True as soon as
  // ready() returns true: it may act on what it finds (the runner's reap),
  // so its true is never dropped.
  template <class Ready>
  bool sleep(Ready&& ready, int ms) {
    const auto end = Clock::now() + std::chrono::milliseconds(ms);
    do {
      if (ready()) return true;
      poll();
      sched_yield();
    } while (Clock::now() < end);
    return false;
  }

 private:
  struct Peer {
    QpPtr qp;
    std::uint64_t block = 0;  // its block's address and rkey
    std::uint32_t rkey = 0;
    std::uint32_t posted = 0;  // work requests not yet completed
    std::string error;         // set once a completion failed: the peer is gone
    Clock::time_point last_probe{}, last_check{};
    bool probing = false;
  };
  struct Region {  // a registered region of our own (large Scratch)
    AlignedBuffer mem;
    MrPtr mr;
    std::size_t bytes = 0;
  };

  // Our signal line that `writer` WRITEs (window_layout.hpp).
  std::atomic<std::uint32_t>& line(int writer) const;
  std::uint64_t local(std::size_t offset) const { return reinterpret_cast<std::uint64_t>(block_.get()) + offset; }

  void push(const void* field, std::size_t bytes, bool ordered) override;
  // Posts one signaled WRITE or READ to `peer`; waits for room first.
  void post(int peer, ibv_wr_opcode op, std::uint64_t local, std::uint32_t lkey, std::uint64_t remote,
            std::uint32_t rkey, std::size_t bytes, std::uint64_t tag);
  // Reaps completions; a failed one marks its peer gone.
  void poll();
  // Until nothing posted to `peer` is outstanding; throws naming it if it
  // fails or does not complete within kOpTimeout. `ask_host`: also ask the
  // host's check while waiting (never from the destructor).
  void drain(int peer, const char* what, bool ask_host = true);
  // The same for every peer, quietly: for the destructor.
  void drain_all();
  // The host's check (the constructor's check_alive) for `peer`, at most
  // every kProbeInterval; throws naming the peer if the host knows it gone.
  void ask_host_now_and_then(int peer);
  [[noreturn]] void peer_failed(int peer, const char* what) const;
  // A staging slot for a small WRITE, free (its last WRITE completed).
  int take_slot();
  void check_remote(int peer, const onesided::BufDesc& d, std::uint64_t addr, std::size_t bytes) const;
  // One READ (into local) or WRITE (from local) of a described range, waited for.
  void transfer(int peer, ibv_wr_opcode op, const onesided::BufDesc& d, std::uint64_t addr, const void* local,
                std::size_t bytes);
  void linger();

  std::function<void(int)> check_alive_;
  std::unique_ptr<Device> dev_;
  PdPtr pd_;
  CqPtr cq_;
  AlignedBuffer block_;
  std::size_t block_bytes_ = 0;
  MrPtr block_mr_;
  std::vector<Peer> peers_;
  std::vector<std::uint32_t> sent_;
  std::vector<bool> slot_busy_;
  int next_slot_ = 0;
  std::unique_ptr<RegCache> reg_;
  std::vector<RegCache::Entry*> held_[2];  // per parity: buffers described in that call
  int parity_ = 0;                          // the current call's (scratch() sets it)
  Region scratch_;
  struct Retired {
    Region r;
    std::uint64_t until;
  };
  std::vector<Retired> retired_;
};

}  // namespace braid::verbs
