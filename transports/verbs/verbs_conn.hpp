// The per-connection state of VerbsTransport, and its bookkeeping records.
// Private to transports/verbs.
//
// A connection's life (the QP's own states are in queue_pair.hpp):
//   AwaitRequest  accepted socket, reading the dialer's Hello; no QP yet
//                 (with a secret, then its PROOF: QP in INIT, auth_step 1)
//   AwaitAccept   dialed: QP in INIT, request written, reading the answer;
//                 sends queue (with a secret, then READY: QP in RTS,
//                 auth_step 1)
//   Ready         QP in RTS; the socket is only a liveness channel
//   Eof           the socket closed; waiting briefly for a BYE still in the
//                 completion queue before calling it a failure
//   Closed        retired: the QP is in ERR, its completions are ignored
#pragma once

#include <deque>

#include "src/common/auth.hpp"
#include "src/common/time.hpp"
#include "transports/verbs/queue_pair.hpp"
#include "transports/verbs/verbs_transport.hpp"

namespace braid {

namespace verbs {
// Data credits per direction of a QP, returned in batches of kCreditBatch
// (eager.hpp); each QP posts receive_depth() buffers for them.
inline constexpr std::uint32_t kCredits = 32;
inline constexpr std::uint32_t kCreditBatch = 8;
inline constexpr std::uint32_t kSendWr = 64;  // send queue: messages and READs
inline constexpr std::uint32_t kSlots = 128;  // registered send slots per transport
inline constexpr std::size_t kHeader = sizeof(MsgHeader);
// Receive buffers and send slots: a header and an eager payload, rounded up.
inline std::uint32_t buffer_bytes(std::size_t eager_limit) {
  return static_cast<std::uint32_t>((kHeader + eager_limit + 63) / 64 * 64);
}

// Work-request ids: what completed, on which connection, which buffer.
enum class WrKind : std::uint8_t { Recv = 1, Send = 2, Read = 3 };
inline std::uint64_t wr_id(WrKind k, std::uint32_t conn, std::uint32_t index) {
  return (std::uint64_t(k) << 60) | (std::uint64_t(conn & 0x0fffffffu) << 32) | index;
}
inline WrKind wr_kind(std::uint64_t id) { return static_cast<WrKind>(id >> 60); }
inline std::uint32_t wr_conn(std::uint64_t id) { return static_cast<std::uint32_t>(id >> 32) & 0x0fffffffu; }
inline std::uint32_t wr_index(std::uint64_t id) { return static_cast<std::uint32_t>(id); }
}  // namespace verbs

struct VerbsTransport::Outgoing {
  enum class Kind : std::uint8_t { Data, Fin, Read, Bye };
  Kind kind = Kind::Data;
  Request* r = nullptr;       // Data: the send (eager or RTS, decided when posted)
  std::uint64_t token = 0;    // Fin: the sender's token
  std::uint8_t status = 0;    // Fin
  std::uint32_t read_id = 0;  // Read
  Refusal refused{};          // Fin of status kFinRejected (last: the others are built by position)
};

// A receive being filled by RDMA READ from the sender's buffer.
struct VerbsTransport::ReadOp {
  std::uint32_t conn = 0;
  Request* r = nullptr;  // null once withdrawn (the QP was stopped)
  verbs::RegCache::Entry* mr = nullptr;
  std::uint64_t send_token = 0;
  std::uint64_t remote_addr = 0;
  std::uint32_t rkey = 0;
  std::size_t bytes = 0;
  std::size_t posted = 0;  // bytes covered by posted READs
  std::uint32_t chunks_posted = 0;
  std::uint32_t chunks_done = 0;
};

// A send announced by RTS, its buffer registered for the peer to read.
struct VerbsTransport::RtsOut {
  Request* r = nullptr;  // null once withdrawn (timed out): still readable
  verbs::RegCache::Entry* mr = nullptr;
  std::uint32_t conn = 0;
};

struct VerbsTransport::Conn final : EventSource {
  enum class State : std::uint8_t { AwaitRequest, AwaitAccept, Ready, Eof, Closed };

  Conn(VerbsTransport& t, int peer, bool dialed) : t(t), id(t.next_conn_id_++), peer(peer), dialed(dialed) {}
  void on_events(std::uint32_t events) override { t.on_socket(*this, events); }
  bool usable() const { return state == State::Ready || state == State::AwaitAccept; }

  VerbsTransport& t;
  const std::uint32_t id;
  int peer;  // -1 until an accepted socket's request names it
  const bool dialed;
  State state = State::AwaitRequest;
  Fd sock;
  bool in_epoll = false;
  verbs::HelloReader reader;
  // The authenticated handshake (handshake.hpp), where the job has a secret.
  int auth_step = 0;               // 1: acceptor awaits PROOF, dialer READY
  int claimed = -1;                // acceptor: the rank the request names
  verbs::HelloFields remote;       // the other side's Hello, used at step 1
  auth::Nonce dialer_nonce{}, acceptor_nonce{};
  // The ring is declared before the QP: the QP is destroyed first.
  std::unique_ptr<verbs::RecvRing> rx;
  verbs::QpPtr qp;
  verbs::QpEndpoint local;
  verbs::Credits credits;
  std::size_t eager_limit = 0;  // largest payload the peer's buffers take
  std::uint32_t sq_free = 0;    // send-queue slots
  std::uint32_t reads_out = 0;  // READs in flight
  std::uint32_t read_limit = 1;
  std::deque<Outgoing> pending;
  std::uint32_t bye_slot = verbs::SendSlots::kNone;
  bool bye_acked = false;
  bool bye_seen = false;
  std::string stop_reason;  // set when we stopped the QP ourselves
  Clock::time_point eof_deadline{};
};

}  // namespace braid
