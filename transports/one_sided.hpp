// The one-sided face: what a transport offers the one-sided plans (the steps
// Signal, Wait, Get, GetReduce and Put of algorithms/plan.hpp), next to the
// message face of transport.hpp. One Window per group joins its members.
//
// Four concerns, kept apart (MSCCL++ keeps connection, registered memory
// and semaphore as separate types in the same spirit):
//   - memory: describe a buffer so peers can reach it (shared memory: find
//     its shareable allocation; RDMA: register it and name its rkey), the
//     window's own Scratch, and the data operations get and put. map()
//     gives a pointer where a peer's memory is directly addressable
//     (mapped shared memory), so a GetReduce reads it in place;
//   - signals: counted, never tagged (the plan rules keep each pair's
//     signals and waits in the same order). signal(peer) makes everything
//     this rank put into that peer, and everything it published, visible to
//     it first;
//   - the call ledger (ledger.hpp): per rank, what it published for the
//     current call (buffer descriptors), which call it runs, how many calls
//     it completed (which decides when Scratch and descriptors may be
//     reused), and its failure mark. Written once here, for every
//     transport: a transport only says where each rank's ledger block is
//     readable and how an update reaches the peers (Ledger::Mirror);
//   - liveness: whether a peer is known to be gone.
//
// Implementations: transports/shm/window.* (one host: mappings and
// process_vm_readv, futex doorbells) and transports/verbs/window.* (RDMA READ
// and WRITE, a signal word written by the peer). The registry
// (registry.cpp, make_window; window_kinds.hpp, with_window) is the only
// place that names them.
//
// The one-sided runner (src/runtime/one_sided.cpp) is a template over the
// concrete window, so the hot loop pays no virtual call; everything else
// (the runtime's checks, tests/transports) uses this face.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "src/common/function_ref.hpp"
#include "transports/ledger.hpp"

namespace braid::onesided {

class Window {
 public:
  // `world` maps group ranks to world ranks (for error messages).
  Window(std::vector<int> world, int me);
  virtual ~Window() = default;
  Window(const Window&) = delete;
  Window& operator=(const Window&) = delete;

  int size() const { return static_cast<int>(world_.size()); }
  int me() const { return me_; }
  int world_rank(int peer) const { return world_[static_cast<std::size_t>(peer)]; }
  virtual const char* transport() const = 0;  // "shm", "verbs"

  // --- memory -------------------------------------------------------------------
  // How peers reach [p, p + bytes) of this rank during the current call.
  // Valid until every peer has completed the call two after it (the ledger's
  // rule for descriptors). Throws braid::Error if the memory cannot be
  // offered (RDMA: registration failed).
  virtual BufDesc describe(const void* p, std::size_t bytes) = 0;
  // This call's Scratch half (`parity` = ticket & 1), `bytes` long, and its
  // descriptor; nullptr for zero bytes. Call once per call, after the
  // ledger's writable_after() is satisfied: it may free older regions.
  virtual char* scratch(int parity, std::size_t bytes, std::uint64_t ticket, BufDesc* desc) = 0;
  // The peer's bytes [addr, addr + bytes) (inside what `d` describes), as
  // addressable here; nullptr when they are not (then use get and put).
  virtual char* map(int peer, const BufDesc& d, std::uint64_t addr, std::size_t bytes) = 0;
  // Copies from / into the peer's memory; complete when they return. Throw
  // braid::Error naming the peer if it is gone or the access fails.
  virtual void get(int peer, const BufDesc& d, std::uint64_t addr, void* dst, std::size_t bytes) = 0;
  virtual void put(int peer, const BufDesc& d, std::uint64_t addr, const void* src, std::size_t bytes) = 0;

  // --- signals ------------------------------------------------------------------
  virtual void signal(int peer) = 0;
  // Signals received from `peer` so far (acquire: what it wrote or
  // published before signalling is visible after this returns a count that
  // includes it).
  virtual std::uint32_t received(int peer) const = 0;
  // Wakes `peer` if it sleeps (after a store it must see).
  virtual void ring(int peer) = 0;
  // Waits until `ready()` may have changed, at most `ms`. Returns true if a
  // call of ready() returned true (it may have acted on what it found), false
  // if the time passed without one.
  virtual bool sleep_until(FunctionRef<bool()> ready, int ms) = 0;

  // --- liveness -------------------------------------------------------------------
  // Known to be gone (exited, killed, unreachable). Cheap enough to call on
  // every slice of a wait.
  virtual bool peer_gone(int peer) = 0;

  // --- the call ledger ------------------------------------------------------------
  Ledger& ledger() { return ledger_; }
  const Ledger& ledger() const { return ledger_; }

 protected:
  std::vector<int> world_;
  int me_;
  Ledger ledger_;
};

}  // namespace braid::onesided
