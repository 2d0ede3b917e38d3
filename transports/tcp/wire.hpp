// The frame format spoken over byte-stream transports (TCP today).
//
// Every frame starts with a fixed 48-byte header, little-endian (the only
// byte order Braid runs on; the HELLO frame checks it). Lengths and types are
// validated before any use: a peer can make us fail the connection, never
// make us write out of bounds.
//
//   HELLO  dialer -> acceptor, first frame: tag = job id, id = dialer's rank,
//          id2 = world size, reserved = flags: kHelloShares (the dialer
//          shares one socket per pair, below), kHelloByeOnly (the socket
//          carries one goodbye and nothing else), kHelloDataOnly (it
//          carries the dialer's DATA, beside a shared socket).
//   EAGER  a whole message: envelope + `bytes` of payload follow.
//   RTS    "ready to send" a large message of `bytes`; id = sender's token.
//   CTS    "clear to send": id = sender's token, id2 = receiver's token, or
//          id2 = 0 to tell the sender the receiver dropped the message
//          (truncation error on the receiving side).
//   DATA   payload of a rendezvous, or of one part of it: id2 = receiver's
//          token, tag = the part's offset in the message, `bytes` follow.
//          A large message's parts travel over several sockets (stripes,
//          tcp_transport.hpp) and arrive in any order.
//   BYE    the peer is shutting down cleanly; EOF after it is not a failure.
//          id = 1 + the first rank it learned had failed, or 0; id2 bit 0:
//          its messages came over this socket (one socket per pair: its
//          other sockets' ends say nothing of them), bit 1: its DATA came
//          over a socket of its own (whose end, too, is awaited).
//   SWITCH the sender writes no more messages on this socket: id = 1 if
//          they go on over another, behind a FOLLOWS; id = 0 if it never
//          wrote any here.
//   FOLLOWS the first frame on the socket the sender moved its messages to:
//          nothing after it is read before the SWITCH on the old socket.
// One socket per pair: two ranks that dial each other at once end with two
// sockets; both move their messages to the one the lower rank dialed
// (tcp_transport.hpp), and SWITCH/FOLLOWS keep each direction in order
// across the move.
// Where the job has a secret (src/common/auth.hpp), a connection opens with
// a challenge-response before any other frame:
//   HELLO  as above, with `bytes` = 32: the dialer's nonce follows;
//   AUTH   acceptor -> dialer, `bytes` = 64: the acceptor's nonce and its
//          proof (HMAC over both nonces, bound to the HELLO's job and ranks);
//   PROOF  dialer -> acceptor, `bytes` = 32: the dialer's proof.
// The acceptor takes no other frame before a good PROOF, and the dialer
// sends none before a good AUTH.
#pragma once

#include <cstdint>

namespace braid::wire {

inline constexpr std::uint32_t kMagic = 0x44524231;  // "1BRD" little-endian
inline constexpr std::uint16_t kVersion = 1;

enum class FrameType : std::uint8_t { Hello = 1, Eager, Rts, Cts, Data, Bye, Auth, Proof, Switch, Follows };

// HELLO's flags (FrameHeader::reserved).
inline constexpr std::uint8_t kHelloShares = 1;
inline constexpr std::uint8_t kHelloByeOnly = 2;
inline constexpr std::uint8_t kHelloDataOnly = 4;

struct FrameHeader {
  std::uint32_t magic;
  std::uint16_t version;
  std::uint8_t type;
  std::uint8_t reserved;
  std::uint32_t ctx;
  std::uint32_t reserved2;
  std::int64_t tag;
  std::uint64_t bytes;
  std::uint64_t id;
  std::uint64_t id2;
};
static_assert(sizeof(FrameHeader) == 48, "frame header must stay 48 bytes");

inline FrameHeader make_header(FrameType t, std::uint32_t ctx, std::int64_t tag,
                               std::uint64_t bytes, std::uint64_t id = 0, std::uint64_t id2 = 0) {
  return FrameHeader{kMagic, kVersion, static_cast<std::uint8_t>(t), 0, ctx, 0, tag, bytes, id, id2};
}

}  // namespace braid::wire
