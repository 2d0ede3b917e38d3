// Connection: one TCP socket to one peer, speaking the frames of wire.hpp.
//
// Reading is a small state machine (header -> payload -> header ...) that
// writes payload bytes straight into the matched receive buffer when the
// receive was posted first; otherwise into the unexpected message's buffer.
// Writing drains a queue of frames with sendmsg: header and payload in one
// system call, no staging copy. The framing state (each frame's header and
// how much of it is written) lives here, in the queue, not in the requests.
// Both directions are non-blocking and driven by the host's epoll loop; all
// calls happen under the host's lock.
#pragma once

#include <cstdint>
#include <sys/types.h>

#include <memory>
#include <optional>
#include <vector>

#include "src/common/auth.hpp"
#include "src/common/fd.hpp"
#include "src/common/socket.hpp"
#include "transports/tcp/wire.hpp"
#include "transports/transport.hpp"

namespace braid {

class TcpTransport;

class Connection final : public EventSource {
 public:
  Connection(TcpTransport& owner, Fd fd, int peer, bool dialed, std::uint64_t id);
  ~Connection() override;

  void on_events(std::uint32_t events) override;
  // Appends a frame to the send queue and writes what the socket takes now:
  // header h, then `payload` bytes of r's buffer from `offset` on. r is null
  // for a control frame that belongs to no request; otherwise it is marked
  // queued here.
  void enqueue(Request* r, const wire::FrameHeader& h, std::size_t payload, std::size_t offset = 0);
  // Closes the socket; requests queued here are left for the owner to fail.
  void close();
  // Closed as close() is, but the socket is handed over, still open: the
  // peer sees nothing (TcpTransport::break_off).
  Fd park();

  // A dialed connection of a job with a secret: frames queue until the
  // acceptor has proved the secret over `nonce` (wire.hpp, AUTH).
  void await_auth(const wire::FrameHeader& hello, const auth::Nonce& nonce);

  int peer() const { return peer_; }
  bool dialed() const { return dialed_; }
  // The HELLO's flags of an accepted connection (wire::kHelloShares, ...).
  std::uint8_t hello_flags() const { return dialed_ ? 0 : hello_.reserved; }
  // The peer said SWITCH here: no more of its messages come on it.
  bool switched_away() const { return switched_away_; }
  void mark_switched_away() { switched_away_ = true; }
  // Reading stops before the next frame (at FOLLOWS) until end_wait().
  void wait_for_switch() { awaiting_switch_ = true; }
  void end_wait() {
    awaiting_switch_ = false;
    resume();
  }
  bool closed() const { return closed_; }
  bool said_bye() const { return bye_received_; }
  // Its goodbye said the peer's messages to us came over this socket, and
  // whether its DATA came over another (TcpTransport::shutdown).
  bool bye_carried() const { return bye_word_ & 1; }
  bool bye_has_data() const { return bye_word_ & 2; }
  int fd() const { return fd_.get(); }
  // Names this connection in Unexpected::channel (never reused).
  std::uint64_t id() const { return id_; }
  bool idle() const { return qcount_ == 0; }
  // The challenge-response is over (or the job has none): frames may go.
  bool authenticated() const { return auth_ == Auth::Done; }
  // False once a frame was dropped partly written (drain_queue).
  bool in_step() const { return !mid_frame_; }
  // The socket's far end (getpeername): for a dialed connection, the peer's
  // listener.
  std::optional<net::SockAddr> far_end() const;

  // A receive claimed the unexpected message this connection is still
  // filling: finish it, then hand the data to `u->waiter` (or drop it).
  void adopt_partial(std::unique_ptr<Unexpected> u);
  // Reads again after the host held this peer back (TcpTransport::resume).
  void resume();
  // Reads what has arrived, as an EPOLLIN would (TcpTransport::poll_peer):
  // true if any bytes did.
  bool poll_read() {
    const std::uint64_t before = reads_;
    read_ready();
    return reads_ != before;
  }
  // Reads what has arrived, now, held back or not (TcpTransport::
  // connection_broken: what a peer sent before it reset the connection, its
  // goodbye perhaps, is worth its memory).
  void read_now() {
    draining_ = true;
    read_ready();
    draining_ = false;
  }
  // Withdraws r's frame: true unless payload bytes of r's are partly
  // written (or r has no frame here).
  bool unqueue(Request& r);
  // Is a frame with r's payload partly written (the stream would be out of
  // step without the rest)?
  bool writing(const Request& r) const;
  // Stops writing payload into r (a cancelled receive): drain to nowhere.
  bool divert(Request& r);
  // Empties the send queue, calling f on each request that had a frame in
  // it (for failure handling).
  template <class F>
  void drain_queue(F&& f) {
    // A frame partly written goes too: the stream is then mid-frame, and
    // nothing more, a goodbye included, may be written to it.
    if (qcount_ > 0 && front().written > 0) mid_frame_ = true;
    while (qcount_ > 0) {
      Request* r = front().r;
      pop_front();
      if (r) {
        r->queued = false;
        f(*r);
      }
    }
  }
  Request* reading_request() const { return reading_req_; }
  Unexpected* reading_unexpected() const { return reading_unexp_; }

 private:
  enum class ReadState : std::uint8_t { Header, Payload, Discard };
  // Where the connection is in the challenge-response (wire.hpp).
  enum class Auth : std::uint8_t {
    Done,         // authenticated, or the job has no secret
    HelloNonce,   // acceptor: reading the dialer's nonce
    AwaitProof,   // acceptor: sent AUTH, expecting PROOF
    ReadingProof, // acceptor: reading PROOF's payload
    AwaitAuth,    // dialer: expecting AUTH
    ReadingAuth,  // dialer: reading AUTH's payload
  };
  void auth_header(const wire::FrameHeader& h);  // a frame while not Done
  void auth_payload();                            // its payload has arrived
  // Writes a small handshake frame at once (the socket's buffer is empty
  // this early); false if it did not go out whole.
  bool send_now(wire::FrameType type, const std::uint8_t* payload, std::size_t n);
  // The end of an authentication that failed.
  void auth_failed(const std::string& why);
  void read_ready();
  bool stop_reading(ssize_t n);
  void handle_header();
  void payload_done();
  void flush();
  void frame_written(Request& r, wire::FrameType type);
  void update_interest();
  bool hold_back();
  // A fatal condition on this socket: tell the transport (which fails the peer).
  void broken(const std::string& why);

  // One frame waiting to be written.
  struct Outgoing {
    Request* r;              // null: a control frame of no request
    wire::FrameHeader h;
    std::size_t payload;     // bytes of r->buf after the header
    std::size_t offset;      // where in r->buf they start (a part of a striped DATA)
    std::size_t written;     // of header + payload
  };
  // The queue is a ring over a vector that only grows, by doubling (so its
  // size is a power of two): no allocation per frame once it has grown to
  // the deepest queue seen.
  Outgoing& front() { return q_[qhead_]; }
  Outgoing& at(std::size_t i) { return q_[(qhead_ + i) & (q_.size() - 1)]; }
  const Outgoing& at(std::size_t i) const { return q_[(qhead_ + i) & (q_.size() - 1)]; }
  void pop_front() {
    qhead_ = (qhead_ + 1) & (q_.size() - 1);
    --qcount_;
  }

  TcpTransport& t_;
  Fd fd_;
  int peer_;  // -1 until the HELLO of an accepted connection arrives
  bool dialed_;
  bool closed_ = false;
  bool bye_received_ = false;
  std::uint64_t bye_word_ = 0;  // the goodbye's id2
  bool mid_frame_ = false;
  bool draining_ = false;  // in read_now(): never held back
  bool want_out_ = false;
  bool held_ = false;  // not reading: the host holds this peer back (resume())
  std::uint64_t reads_ = 0;  // recv calls that returned bytes (poll_read)
  bool hung_up_ = false;  // epoll reported a hang-up or error: never held
  bool switched_away_ = false;
  bool awaiting_switch_ = false;  // held until the SWITCH on the peer's old socket is read
  Auth auth_ = Auth::Done;
  wire::FrameHeader hello_{};           // bound into both proofs
  auth::Nonce dialer_nonce_{}, acceptor_nonce_{};
  std::uint8_t auth_buf_[auth::kNonceBytes + auth::kMacBytes];

  std::uint64_t id_;
  std::vector<Outgoing> q_;
  std::size_t qhead_ = 0, qcount_ = 0;

  ReadState rstate_ = ReadState::Header;
  wire::FrameHeader hdr_{};
  std::size_t hdr_got_ = 0;
  char* dst_ = nullptr;
  std::size_t remaining_ = 0;
  std::size_t part_bytes_ = 0;  // the DATA frame being read: its payload's size
  Request* reading_req_ = nullptr;       // payload -> a posted receive
  Unexpected* reading_unexp_ = nullptr;  // payload -> an unexpected buffer
  std::unique_ptr<Unexpected> partial_;  // claimed while still arriving
  std::unique_ptr<char[]> rbuf_;         // read buffer (allocated on first read)
  std::size_t rpos_ = 0, rlen_ = 0;      // unread bytes: rbuf_[rpos_, rlen_)
};

}  // namespace braid
