// The connection handshake over a TCP side channel, and what the channel
// does afterwards.
//
// Each rank's verbs transport listens on a TCP port published in the store
// as "verbs/<rank>" ("host:port"). To reach a peer the first time, a rank:
//   1. creates its QP (INIT) and posts its receive buffers;
//   2. connects to the peer's port and writes a REQUEST Hello: job, ranks,
//      and its QP endpoint (GID, LID, QPN, PSN, MTU, READ depth) with the
//      credits and receive-buffer size it grants;
// and goes on without waiting (sends queue on the connection). The peer,
// when its progress loop sees the request, creates its own QP, takes it to
// RTR and RTS with the dialer's endpoint and posts its receives, and only
// then answers ACCEPT with its endpoint; the dialer takes its QP to RTR and
// RTS and starts sending. So no side ever sends to a QP that is not ready,
// and no side blocks on the other's progress (two ranks dialing each other
// at once cannot deadlock).
//
// Where the job has a secret (src/common/auth.hpp) the handshake also proves
// it both ways, and the acceptor connects its QP only once the dialer has:
//   REQUEST + the dialer's nonce (32 bytes);
//   ACCEPT + the acceptor's nonce and proof (HMAC over both nonces, bound to
//     the job and the two ranks) -- its QP is still in INIT;
//   PROOF: the dialer's proof (32 bytes), after it checked the acceptor's and
//     took its own QP to RTS;
//   READY (8 bytes), once the acceptor checked the proof and took its QP to
//     RTS; only then does the dialer send on its QP.
// Still nobody blocks on the other's progress: each step is read by the
// connection's state machine.
//
// The socket then stays open, silent, in the host's epoll, as a liveness
// channel: the kernel closes it when the process dies, which is seen at once,
// where RDMA retries would take seconds. A peer leaving cleanly sends BYE on
// the QP first (and waits for it to be acknowledged), so EOF after BYE is a
// goodbye and EOF without it a failure.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "transports/verbs/queue_pair.hpp"

namespace braid::verbs {

inline constexpr std::uint32_t kHelloMagic = 0x56524231;  // "1BRV" little-endian
inline constexpr std::uint16_t kHelloVersion = 1;

enum class HelloKind : std::uint8_t { Request = 1, Accept = 2 };

struct Hello {
  std::uint32_t magic;
  std::uint16_t version;
  std::uint8_t kind;
  std::uint8_t reserved;
  std::uint64_t job_id;
  std::int32_t rank;
  std::int32_t world_size;
  std::uint8_t gid[16];
  std::uint32_t qpn;
  std::uint32_t psn;
  std::uint16_t lid;
  std::uint8_t mtu;
  std::uint8_t ethernet;
  std::uint16_t credits;     // data receive buffers granted to the other side
  std::uint8_t rd_atom;
  std::uint8_t reserved2;
  std::uint32_t recv_bytes;  // size of each receive buffer
  std::uint32_t reserved3;
};
static_assert(sizeof(Hello) == 64, "verbs hello must stay 64 bytes");

struct HelloFields {
  std::uint64_t job_id = 0;
  int rank = 0;
  int world_size = 0;
  QpEndpoint endpoint;
  std::uint16_t credits = 0;
  std::uint32_t recv_bytes = 0;
};

Hello make_hello(HelloKind kind, const HelloFields& f);
// Empty if `h` is a well-formed hello of `kind` from a rank of this job
// (`expected_rank` >= 0: from that rank); otherwise what is wrong with it.
std::string check_hello(const Hello& h, HelloKind kind, std::uint64_t job_id, int world_size, int my_rank,
                        int expected_rank);
HelloFields fields_of(const Hello& h);

// The authenticated handshake's extra parts (sizes in bytes) and READY.
inline constexpr std::size_t kProofBytes = 32;   // a nonce or an HMAC
inline constexpr std::size_t kReadyBytes = 8;
inline constexpr std::uint64_t kReadyWord = 0x5944414552425242ull;  // "BRBREADY" little-endian
// The label each side's proof is made under.
std::string proof_label(bool acceptor, std::uint64_t job_id, int dialer, int acceptor_rank);

// Reads one handshake message from a non-blocking socket, across as many
// calls as the bytes take to arrive: a Hello and, where the job has a
// secret, what follows it (expect()).
class HelloReader {
 public:
  enum class Result { Done, More, Closed, Failed };
  // The next message: `bytes` long (a Hello and its extras, or a PROOF or
  // READY alone), at most kMaxBytes.
  void expect(std::size_t bytes) {
    want_ = bytes;
    got_ = 0;
  }
  Result read_from(int fd);
  // The Hello at the start of the message read (when it began with one).
  const Hello& hello() const { return h_; }
  // The message's bytes: after a Hello, its extras start at sizeof(Hello).
  const std::uint8_t* bytes() const { return buf_; }
  int error() const { return err_; }
  static constexpr std::size_t kMaxBytes = sizeof(Hello) + 2 * kProofBytes;

 private:
  Hello h_{};
  std::uint8_t buf_[kMaxBytes]{};
  std::size_t want_ = sizeof(Hello);
  std::size_t got_ = 0;
  int err_ = 0;
};

}  // namespace braid::verbs
