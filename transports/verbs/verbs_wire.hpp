// The messages two verbs endpoints exchange over a queue pair.
//
// Every SEND carries one 48-byte MsgHeader (little-endian, like the TCP
// wire), followed by the payload for EAGER. A receiver validates the header
// against the completion's byte count before using any field: a peer can
// make us fail the connection, never read or write out of bounds.
//
//   EAGER   a whole message: ctx, tag, `bytes` of payload follow.
//   RTS     "ready to send" a large message of `bytes`, readable with RDMA
//           READ at (addr, rkey) in the sender's memory; token = sender's id.
//   FIN     the receiver is done with RTS `token` (status 0: read it; 1:
//           dropped it, nobody wants it; 2: the receive it matched refused
//           it, so the send fails too): the sender's buffer is free.
//   CREDIT  returns credits only.
//   BYE     the sender leaves cleanly: nothing follows on this QP.
// Every message returns `credits` receive buffers of the reverse direction
// (eager.hpp explains the credit protocol). Data messages (EAGER, RTS) flow
// only from the rank that dialed a connection; FIN flows back on it.
#pragma once

#include <cstdint>

#include "transports/message.hpp"

namespace braid::verbs {

enum class MsgType : std::uint8_t { Eager = 1, Rts, Fin, Credit, Bye };

struct MsgHeader {
  std::uint8_t type;
  std::uint8_t status;    // FIN: 0 = read, 1 = dropped
  std::uint16_t credits;  // receive buffers returned to the other side
  std::uint32_t ctx;
  std::int64_t tag;
  std::uint64_t bytes;
  std::uint64_t token;
  std::uint64_t addr;     // RTS: the sender's buffer
  std::uint32_t rkey;     // RTS: its memory key
  std::uint32_t reserved;
};
static_assert(sizeof(MsgHeader) == 48, "verbs message header must stay 48 bytes");

inline constexpr std::uint8_t kFinRead = 0;
inline constexpr std::uint8_t kFinDropped = 1;
inline constexpr std::uint8_t kFinRejected = 2;

// EAGER and RTS carry the sender's dtype in `reserved`'s low byte and its
// call's fingerprint (Envelope::shape) in the rest of `reserved` and in
// `status`, which only FIN uses otherwise.
inline void put_envelope(MsgHeader& h, const Envelope& env) {
  h.ctx = env.ctx;
  h.tag = env.tag;
  h.reserved = env.dtype | (env.shape << 8);
  h.status = static_cast<std::uint8_t>(env.shape >> 24);
}
inline Envelope envelope_of(const MsgHeader& h) {
  return Envelope{h.ctx, h.tag, static_cast<std::uint8_t>(h.reserved & 0xff),
                  (h.reserved >> 8) | (static_cast<std::uint32_t>(h.status) << 24)};
}

// Data and FIN messages consume a credit; CREDIT and BYE travel in receive
// buffers reserved for them (see eager.hpp).
inline bool needs_credit(MsgType t) { return t == MsgType::Eager || t == MsgType::Rts || t == MsgType::Fin; }

}  // namespace braid::verbs
