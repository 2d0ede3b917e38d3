// Connection: one TCP socket to one peer, speaking the frames of wire.hpp.
//
// Reading is a small state machine (header -> payload -> header ...) that
// writes payload bytes straight into the matched receive buffer when the
// receive was posted first; otherwise into the unexpected message's buffer.
// Writing drains a queue of requests with writev: header and payload in one
// system call, no staging copy. Both directions are non-blocking and driven
// by the engine's epoll loop; all calls happen under the engine mutex.
#pragma once

#include <cstdint>
#include <sys/types.h>

#include <memory>

#include "common/fd.hpp"
#include "core/matcher.hpp"
#include "core/request.hpp"
#include "transport.hpp"
#include "wire.hpp"

namespace braid {

class TcpTransport;

class Connection final : public EventSource {
 public:
  Connection(TcpTransport& owner, Fd fd, int peer, bool dialed);
  ~Connection() override;

  void on_events(std::uint32_t events) override;
  // Appends r (whose `frame` is filled in) to the send queue and writes what
  // the socket takes now.
  void enqueue(Request& r);
  // Closes the socket; requests queued here are left for the owner to fail.
  void close();

  int peer() const { return peer_; }
  bool dialed() const { return dialed_; }
  bool closed() const { return closed_; }
  bool said_bye() const { return bye_received_; }
  int fd() const { return fd_.get(); }

  // A receive claimed the unexpected message this connection is still
  // filling: finish it, then hand the data to `u->waiter` (or drop it).
  void adopt_partial(std::unique_ptr<Unexpected> u);
  // Withdraws r if it is queued and not started; true on success.
  bool unqueue(Request& r);
  // Stops writing payload into r (a cancelled receive): drain to nowhere.
  bool divert(Request& r);
  // Calls f on every request queued here (for failure handling).
  template <class F>
  void for_each_queued(F&& f) {
    for (Request* r = qhead_; r;) {
      Request* next = r->qnext;
      f(*r);
      r = next;
    }
  }
  void clear_queue() { qhead_ = qtail_ = nullptr; }
  Request* reading_request() const { return reading_req_; }
  Unexpected* reading_unexpected() const { return reading_unexp_; }

 private:
  enum class ReadState : std::uint8_t { Header, Payload, Discard };
  void read_ready();
  bool stop_reading(ssize_t n);
  void handle_header();
  void payload_done();
  void flush();
  void frame_written(Request& r);
  void update_interest();
  // A fatal condition on this socket: tell the transport (which fails the peer).
  void broken(const std::string& why);

  TcpTransport& t_;
  Fd fd_;
  int peer_;  // -1 until the HELLO of an accepted connection arrives
  bool dialed_;
  bool closed_ = false;
  bool bye_received_ = false;
  bool want_out_ = false;

  Request* qhead_ = nullptr;
  Request* qtail_ = nullptr;

  ReadState rstate_ = ReadState::Header;
  wire::FrameHeader hdr_{};
  std::size_t hdr_got_ = 0;
  char* dst_ = nullptr;
  std::size_t remaining_ = 0;
  Request* reading_req_ = nullptr;       // payload -> a posted receive
  Unexpected* reading_unexp_ = nullptr;  // payload -> an unexpected buffer
  std::unique_ptr<Unexpected> partial_;  // claimed while still arriving
  std::unique_ptr<char[]> rbuf_;         // read buffer (allocated on first read)
  std::size_t rpos_ = 0, rlen_ = 0;      // unread bytes: rbuf_[rpos_, rlen_)
};

}  // namespace braid
