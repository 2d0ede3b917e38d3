// Request: one message in flight, a send or a receive, as the matching layer
// and the transports see it. A blocking op keeps its Request on the caller's
// stack (no allocation); an async op keeps it in its WorkState.
//
// Every field is guarded by the engine mutex. `done` is also read without the
// lock by Work::is_completed(), hence atomic.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>

#include "braid/tensor.hpp"
#include "common/time.hpp"
#include "wire.hpp"

namespace braid {

class Connection;

// Where a message matches: a context (one per group and per kind of traffic)
// and a tag inside it. `dtype` does not take part in matching: it says what
// the sender's elements are (0: unsaid, else DType + 1), so that a receive of
// another dtype fails naming both sides instead of reinterpreting the bytes
// (receive_error in matcher.hpp). Every transport carries it in a spare byte
// of its message header.
struct Envelope {
  std::uint32_t ctx = 0;
  std::int64_t tag = 0;
  std::uint8_t dtype = 0;
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

  std::atomic<bool> done{false};
  std::exception_ptr error;

  // --- owned by the matching layer / transports --------------------------
  Request* prev = nullptr;  // posted-receive list
  Request* next = nullptr;
  Request* qnext = nullptr;  // a connection's send queue
  bool posted = false;       // in the posted-receive list
  bool queued = false;       // in a connection's send queue
  bool started = false;      // bytes of it are on the wire: no clean cancel
  Connection* conn = nullptr;  // where its frames go / come from
  wire::FrameHeader frame{};   // the frame being written for it
  std::size_t frame_written = 0;   // bytes of header + payload written
  std::size_t frame_payload = 0;   // payload bytes of the current frame
  std::uint64_t token = 0;         // rendezvous id (sender's or receiver's)
  bool transport_owned = false;    // a control frame the transport allocated

  // --- owned by the engine --------------------------------------------------
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
    done.store(false, std::memory_order_relaxed);
    error = nullptr;
    prev = next = qnext = nullptr;
    posted = queued = started = transport_owned = is_async = false;
    conn = nullptr;
    frame = {};
    frame_written = frame_payload = 0;
    token = 0;
    keepalive.reset();
    deadline = {};
    timeout = Millis(0);
  }
};

}  // namespace braid
