// The eager path: small messages copied into registered buffers, and the
// credit protocol that keeps a sender from overrunning its receiver.
//
// Buffers. Each QP has a RecvRing of pre-posted receive buffers (header +
// eager limit each). Sends copy header and payload into a SendSlot from one
// pool per transport, so the caller's buffer is free as soon as the copy is
// done (an eager send completes at once); the slot returns to the pool when
// the HCA reports the SEND complete.
//
// Credits. A receiver lends its peer R "data" buffers (announced in the
// handshake). Every EAGER, RTS and FIN costs the sender one credit; the
// receiver, once it has copied a message out and re-posted the buffer, owes
// the credit back. Owed credits ride in the `credits` field of every message
// going the other way; when T or more are owed and nothing else is going
// out, a CREDIT message carries them alone.
// CREDIT (and the one BYE) cost no credit, so two sides that both ran out
// can never wait on each other. They still need posted buffers, so each QP
// posts R + R/T + 2 receives: credits are conserved (R per direction, held
// by the sender, in flight, or owed), a CREDIT carries at least T of them,
// so at most R/T CREDIT messages can be unprocessed at once, plus one BYE.
// A sender that runs out always gets credits back: whatever it spent is
// either still in flight (it will be processed) or owed, and once T are owed
// the receiver sends them.
#pragma once

#include <cstdint>
#include <vector>

#include "transports/verbs/verbs_objects.hpp"

namespace braid::verbs {

class Credits {
 public:
  // lent_to_us: data buffers the peer posted for us; lent_by_us: ours for it.
  void start(std::uint32_t lent_to_us, std::uint32_t lent_by_us, std::uint32_t threshold) {
    lent_to_us_ = available_ = lent_to_us;
    lent_by_us_ = lent_by_us;
    threshold_ = threshold ? threshold : 1;
    owed_ = 0;
  }
  bool can_send() const { return available_ > 0; }
  std::uint32_t available() const { return available_; }
  void spend() { --available_; }
  // The peer returned n credits. False if it returned more than it was
  // ever lent: a protocol violation.
  [[nodiscard]] bool give_back(std::uint32_t n) {
    if (n > lent_to_us_ - available_) return false;
    available_ += n;
    return true;
  }
  // We processed one of the peer's data messages and re-posted its buffer.
  // False if the peer sent more than we lent it.
  [[nodiscard]] bool consumed_one() { return ++owed_ <= lent_by_us_; }
  std::uint32_t owed() const { return owed_; }
  bool should_return() const { return owed_ >= threshold_; }
  // The credits to put in an outgoing header (all of them).
  std::uint16_t take_owed() {
    const auto n = static_cast<std::uint16_t>(owed_);
    owed_ = 0;
    return n;
  }

 private:
  std::uint32_t lent_to_us_ = 0;
  std::uint32_t lent_by_us_ = 0;
  std::uint32_t available_ = 0;
  std::uint32_t owed_ = 0;
  std::uint32_t threshold_ = 1;
};

// Receive WQEs a QP posts for R data credits returned in batches of T.
inline std::uint32_t receive_depth(std::uint32_t credits, std::uint32_t threshold) {
  return credits + credits / (threshold ? threshold : 1) + 2;
}

// Pre-posted receive buffers of one QP.
class RecvRing {
 public:
  RecvRing(ibv_pd* pd, std::uint32_t count, std::uint32_t bytes);
  std::uint32_t count() const { return count_; }
  std::uint32_t bytes() const { return bytes_; }
  const std::uint8_t* buffer(std::uint32_t i) const { return mem_.get() + std::size_t{i} * bytes_; }
  // Posts buffer i with the given work-request id; 0 or an errno value.
  int post(ibv_qp* qp, std::uint32_t i, std::uint64_t wr_id);

 private:
  std::uint32_t count_;
  std::uint32_t bytes_;
  AlignedBuffer mem_;  // declared before mr_: deregistered first, freed last
  MrPtr mr_;
};

// Registered send buffers shared by every QP of a transport. Each slot in
// use records its owner (a connection id) so that a connection torn down
// with sends in flight gives its slots back.
class SendSlots {
 public:
  static constexpr std::uint32_t kNone = 0xffffffffu;
  SendSlots(ibv_pd* pd, std::uint32_t count, std::uint32_t bytes);
  std::uint32_t take(std::uint32_t owner);  // kNone when all are in use
  void release(std::uint32_t slot);
  void release_owned_by(std::uint32_t owner);
  bool any_free() const { return !free_.empty(); }
  std::uint8_t* buffer(std::uint32_t i) { return mem_.get() + std::size_t{i} * bytes_; }
  std::uint32_t bytes() const { return bytes_; }
  std::uint32_t lkey() const { return mr_->lkey; }

 private:
  std::uint32_t bytes_;
  AlignedBuffer mem_;
  MrPtr mr_;
  std::vector<std::uint32_t> free_;
  std::vector<std::uint32_t> owner_;
};

}  // namespace braid::verbs
