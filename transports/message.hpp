// The message vocabulary every transport and the runtime speak: where a
// message matches (Envelope), one message in flight (Request), and a message
// that arrived before its receive (Unexpected).
//
// A blocking op keeps its Request on the caller's stack (no allocation); an
// async op keeps it in its WorkState. Every field is guarded by the host's
// lock (TransportHost); `done` is also read without it by Work::is_completed(),
// hence atomic.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>

#include "braid/tensor.hpp"
#include "src/common/time.hpp"

namespace braid {

class Transport;

// Where a message matches: a context (one per group and per kind of traffic)
// and a tag inside it. `dtype` does not take part in matching: it says what
// the sender's elements are (0: unsaid, else DType + 1), so that a receive of
// another dtype fails naming both sides instead of reinterpreting the bytes
// (receive_error in matcher.hpp). Every transport carries it in a spare byte
// of its message header. `shape` neither: a collective's fingerprint (its
// collective, dtype, op, count, root and algorithm, as one word the runtime
// makes: executor.hpp, shape_of; 0 for point-to-point), carried in a spare
// word of every header, so that a message of another call is refused, not
// reduced.
struct Envelope {
  std::uint32_t ctx = 0;
  std::int64_t tag = 0;
  std::uint8_t dtype = 0;
  std::uint32_t shape = 0;
};

inline std::uint8_t wire_dtype(DType d) { return static_cast<std::uint8_t>(static_cast<unsigned>(d) + 1); }

struct Request {
  enum class Kind : std::uint8_t { Send, Recv };

  Kind kind = Kind::Send;
  int peer = -1;  // global rank; a receive may say ANY_SOURCE until matched
  Envelope env;
  void* buf = nullptr;     // data to send, or where to receive
  std::size_t bytes = 0;   // send size, or receive capacity
  std::size_t received = 0;  // bytes that arrived (receives)
  int source = -1;         // global rank a receive matched
  // The other side's call fingerprint when it differed from env.shape (a
  // receive refused a message of another call, or a send was refused for
  // it): the runtime names both calls from it.
  std::uint32_t other_shape = 0;

  std::atomic<bool> done{false};
  std::exception_ptr error;

  // --- the matcher's: the posted-receive list ------------------------------
  Request* prev = nullptr;
  Request* next = nullptr;
  bool posted = false;

  // --- the transport's that holds it (one at a time). What a transport
  // writes on the wire for it (frame headers, progress) stays in the
  // transport's own state, keyed by these.
  bool queued = false;        // waiting in the transport's send queue
  std::uint64_t token = 0;    // the transport's id for it (rendezvous)
  // A rendezvous cut into parts over several sockets (TCP's stripes): a
  // send's DATA frames not yet written, a receive's bytes not yet arrived.
  std::size_t left = 0;

  // --- the runtime's ---------------------------------------------------------
  bool is_async = false;
  std::shared_ptr<void> keepalive;  // the async Work's state, until completion
  Deadline deadline{};
  Millis timeout{0};  // for the error message

  // Back to a fresh state, so the executor can reuse requests across calls
  // without allocating. Only for a request no list or transport holds.
  void reset() {
    kind = Kind::Send;
    peer = -1;
    env = {};
    buf = nullptr;
    bytes = received = 0;
    source = -1;
    other_shape = 0;
    done.store(false, std::memory_order_relaxed);
    error = nullptr;
    prev = next = nullptr;
    posted = queued = is_async = false;
    token = 0;
    left = 0;
    keepalive.reset();
    deadline = {};
    timeout = Millis(0);
  }
};

// A message that arrived (or whose announcement arrived) before its receive.
struct Unexpected {
  enum class Kind : std::uint8_t {
    Eager,       // payload arrives into `data`
    Rendezvous,  // only announced; the transport pulls it when matched
    Local,       // a send to oneself; `local_send` still holds the data
  };
  Kind kind = Kind::Eager;
  int src = -1;
  Envelope env;
  std::size_t bytes = 0;
  std::unique_ptr<std::uint8_t[]> data;  // Eager
  std::size_t arrived = 0;               // Eager: payload bytes so far
  Request* waiter = nullptr;  // Eager: a receive matched before all bytes came
  Transport* transport = nullptr;  // Rendezvous, or Eager still arriving
  std::uint64_t channel = 0;       // which of the transport's channels it came on
  std::uint64_t send_token = 0;    // Rendezvous
  std::uint64_t remote_addr = 0;   // Rendezvous over shared memory or RDMA: the sender's buffer
  std::uint32_t remote_key = 0;    // Rendezvous over RDMA: its memory key (rkey)
  Request* local_send = nullptr;   // Local
};

// Whether message `env` of `bytes` from `src` may land in receive r: null if
// so, else the receive's error: a message of another collective call (its
// fingerprint differs: r.other_shape keeps it), a buffer smaller than the
// message, or a dtype other than the sender's (the message is then dropped;
// an announced one's sender is told: Refusal). The text names both sides'
// dtype and size.
std::exception_ptr receive_error(Request& r, int src, const Envelope& env, std::size_t bytes);

// What the receive that refused a message tells its sender (where the
// message was still the sender's: announced, not yet sent): its dtype (wire
// form) and capacity, so the send fails naming both sides.
struct Refusal {
  std::uint8_t dtype = 0;
  std::uint64_t bytes = 0;
  std::uint32_t shape = 0;  // its call's fingerprint
};
inline Refusal refusal_of(const Request& r) { return {r.env.dtype, r.bytes, r.env.shape}; }
// The error of a send that receive `by` refused (send.other_shape keeps the
// receive's fingerprint when it differs).
std::exception_ptr rejected_send(Request& send, const Refusal& by);

}  // namespace braid
