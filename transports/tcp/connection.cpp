#include "transports/tcp/connection.hpp"

#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <cerrno>
#include <cstring>

#include "src/common/errors.hpp"
#include "src/common/log.hpp"
#include "transports/tcp/tcp_transport.hpp"

namespace braid {

namespace {
// A frame larger than this is a protocol error for EAGER (senders use the
// eager limit, at most 4 MiB): an allocation bound a peer cannot push past.
constexpr std::uint64_t kMaxEagerPayload = 4u << 20;
constexpr std::size_t kHeader = sizeof(wire::FrameHeader);
constexpr std::size_t kReadBuffer = 64 * 1024;
// Payload bytes still to come above which reading goes straight into the
// receive buffer instead of through the read buffer (saves a copy).
constexpr std::size_t kDirectBytes = 16 * 1024;
}  // namespace

Connection::Connection(TcpTransport& owner, Fd fd, int peer, bool dialed, std::uint64_t id)
    : t_(owner), fd_(std::move(fd)), peer_(peer), dialed_(dialed), id_(id) {
  t_.host().add_fd(fd_.get(), this, EPOLLIN);
}

Connection::~Connection() = default;

void Connection::close() {
  if (closed_) return;
  closed_ = true;
  t_.host().del_fd(fd_.get());
  fd_.reset();
}

std::optional<net::SockAddr> Connection::far_end() const {
  net::SockAddr a;
  a.len = sizeof a.ss;
  if (closed_ || ::getpeername(fd_.get(), reinterpret_cast<sockaddr*>(&a.ss), &a.len) != 0) return std::nullopt;
  return a;
}

Fd Connection::park() {
  if (closed_) return Fd();
  closed_ = true;
  t_.host().del_fd(fd_.get());
  return std::move(fd_);
}

void Connection::on_events(std::uint32_t events) {
  if (closed_) return;  // a stale event from the round that closed us
  // A hang-up or error is reported whatever the interest: read on to the
  // failure even while held back (level-triggered, it would come back on
  // every round otherwise).
  if (events & (EPOLLERR | EPOLLHUP)) hung_up_ = true;
  if (events & (EPOLLIN | EPOLLERR | EPOLLHUP)) read_ready();
  if (!closed_ && (events & EPOLLOUT)) flush();
}

void Connection::enqueue(Request* r, const wire::FrameHeader& h, std::size_t payload, std::size_t offset) {
  if (qcount_ == q_.size()) {
    // Grow, keeping the ring's order (oldest first).
    std::vector<Outgoing> bigger;
    bigger.reserve(q_.empty() ? 8 : 2 * q_.size());
    for (std::size_t i = 0; i < qcount_; ++i) bigger.push_back(at(i));
    bigger.resize(bigger.capacity());
    q_ = std::move(bigger);
    qhead_ = 0;
  }
  at(qcount_) = Outgoing{r, h, payload, offset, 0};
  ++qcount_;
  if (r) r->queued = true;
  // Write now, on the caller's thread, unless older frames are still waiting
  // for socket space (then EPOLLOUT already watches for it).
  if (qcount_ == 1) flush();
}

bool Connection::unqueue(Request& r) {
  for (std::size_t i = 0; i < qcount_; ++i) {
    if (at(i).r != &r) continue;
    if (at(i).written > 0) {
      // Partly written. A frame without payload (RTS, CTS) still goes out
      // whole from its copy of the header, detached from r, which the peer
      // treats as it treats a withdrawn rendezvous; one with payload cannot.
      if (at(i).payload > 0) return false;
      at(i).r = nullptr;
      r.queued = false;
      return true;
    }
    // Close the gap (a cancel: rare, and queues are short).
    for (std::size_t j = i; j + 1 < qcount_; ++j) at(j) = at(j + 1);
    --qcount_;
    r.queued = false;
    return true;
  }
  return false;
}

bool Connection::writing(const Request& r) const {
  return qcount_ > 0 && at(0).r == &r && at(0).written > 0 && at(0).payload > 0;
}

bool Connection::divert(Request& r) {
  if (reading_req_ != &r) return false;
  reading_req_ = nullptr;
  rstate_ = ReadState::Discard;
  return true;
}

void Connection::adopt_partial(std::unique_ptr<Unexpected> u) { partial_ = std::move(u); }

void Connection::flush() {
  while (qcount_ > 0 && !closed_ && auth_ == Auth::Done) {
    Outgoing& o = front();
    const std::size_t total = kHeader + o.payload;
    char* buf = o.r ? static_cast<char*>(o.r->buf) + o.offset : nullptr;
    iovec iov[2];
    int cnt = 0;
    if (o.written < kHeader) {
      iov[cnt++] = {reinterpret_cast<char*>(&o.h) + o.written, kHeader - o.written};
      if (o.payload > 0) iov[cnt++] = {buf, o.payload};
    } else {
      iov[cnt++] = {buf + (o.written - kHeader), total - o.written};
    }
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = static_cast<std::size_t>(cnt);
    ssize_t n = ::sendmsg(fd_.get(), &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      broken(fmt::format("send failed: {}", errno_text()));
      return;
    }
    o.written += static_cast<std::size_t>(n);
    if (o.written < total) continue;
    Request* r = o.r;
    const auto type = static_cast<wire::FrameType>(o.h.type);
    pop_front();
    // The last DATA frame of a striped send completes it; the others only
    // count down (the request stays queued on its other sockets).
    if (r && type == wire::FrameType::Data && r->left > 1) {
      --r->left;
    } else if (r) {
      r->left = 0;
      r->queued = false;
      frame_written(*r, type);
    }
  }
  update_interest();
}

void Connection::update_interest() {
  if (closed_) return;
  bool want = qcount_ > 0 && auth_ == Auth::Done;
  if (want == want_out_) return;
  want_out_ = want;
  t_.host().mod_fd(fd_.get(), this, (held_ ? 0u : EPOLLIN) | (want ? EPOLLOUT : 0u));
}

// Between frames of a peer's stream (the only place a frame's memory is
// decided): stop reading it while the host holds the peer back, or while
// it waits at FOLLOWS for the SWITCH on the peer's old socket. With a
// socket per direction only connections the peer dialed carry its
// messages; a dialed one carries control frames back, never held. Nor is
// one the peer switched away from (a goodbye's socket among them): what
// comes on it is a CTS or a goodbye, which must come in.
bool Connection::hold_back() {
  if (peer_ < 0 || auth_ != Auth::Done) return false;
  // Past FOLLOWS nothing is read before the SWITCH on the old socket, even
  // on a socket that hung up or whose peer broke: its messages would be
  // matched before earlier ones (the old socket is read to its end too).
  if (!awaiting_switch_) {
    if (hung_up_ || draining_ || switched_away_) return false;
    if ((dialed_ && !t_.shares()) || !t_.hold_back(peer_)) return false;
  }
  if (!held_) {
    held_ = true;
    t_.host().mod_fd(fd_.get(), this, want_out_ ? EPOLLOUT : 0u);
  }
  return true;
}

void Connection::resume() {
  if (!held_ || closed_) return;
  held_ = false;
  t_.host().mod_fd(fd_.get(), this, EPOLLIN | (want_out_ ? EPOLLOUT : 0u));
  read_ready();  // what is already in the read buffer is not announced again
}

void Connection::frame_written(Request& r, wire::FrameType type) {
  // EAGER and (the last) DATA carried the payload: the send is done. After
  // RTS the send waits for the CTS; after CTS the receive waits for DATA.
  if (type == wire::FrameType::Eager || type == wire::FrameType::Data) t_.host().complete(r);
}

// Reads whatever the socket has. Headers, small payloads and discarded
// bytes come through a per-connection buffer, so one recv() picks up many
// small frames; a large payload streams straight into its receive buffer.
// A recv() that returns less than it asked for emptied the socket: reading
// stops there rather than asking again for the EAGAIN (a system call per
// small message, half of a receiver's calls in a stream of them). The
// interest is level-triggered, so bytes that arrive meanwhile are announced
// on the next round; a hung-up socket reads on to its end.
void Connection::read_ready() {
  bool emptied = false;
  for (;;) {
    if (closed_ || (emptied && !hung_up_)) return;
    if (rstate_ == ReadState::Payload && rpos_ == rlen_ && remaining_ >= kDirectBytes) {
      const ssize_t n = ::recv(fd_.get(), dst_, remaining_, 0);
      if (n <= 0) {
        if (stop_reading(n)) return;
        continue;
      }
      ++reads_;
      emptied = static_cast<std::size_t>(n) < remaining_;
      dst_ += n;
      remaining_ -= static_cast<std::size_t>(n);
      if (remaining_ == 0) payload_done();
      continue;
    }
    if (rpos_ == rlen_) {
      if (rstate_ == ReadState::Header && hdr_got_ == 0 && hold_back()) return;
      if (!rbuf_) rbuf_.reset(new char[kReadBuffer]);
      const ssize_t n = ::recv(fd_.get(), rbuf_.get(), kReadBuffer, 0);
      if (n <= 0) {
        if (stop_reading(n)) return;
        continue;
      }
      ++reads_;
      rpos_ = 0;
      rlen_ = static_cast<std::size_t>(n);
      emptied = rlen_ < kReadBuffer;
    }
    while (rpos_ < rlen_ && !closed_) {
      const std::size_t avail = rlen_ - rpos_;
      if (rstate_ == ReadState::Header && hdr_got_ == 0 && hold_back()) return;
      if (rstate_ == ReadState::Header) {
        const std::size_t take = std::min(avail, kHeader - hdr_got_);
        std::memcpy(reinterpret_cast<char*>(&hdr_) + hdr_got_, rbuf_.get() + rpos_, take);
        rpos_ += take;
        hdr_got_ += take;
        if (hdr_got_ == kHeader) {
          hdr_got_ = 0;
          handle_header();
        }
        continue;
      }
      const std::size_t take = std::min(avail, remaining_);
      if (rstate_ == ReadState::Payload) {
        std::memcpy(dst_, rbuf_.get() + rpos_, take);
        dst_ += take;
      }
      rpos_ += take;
      remaining_ -= take;
      if (remaining_ == 0) payload_done();
    }
  }
}

// recv() returned n <= 0: true if reading must stop now.
bool Connection::stop_reading(ssize_t n) {
  if (n < 0 && errno == EINTR) return false;
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
  if (peer_ < 0) {  // a probe, or a stray connection that never said hello
    t_.retire(*this);
    return true;
  }
  if (auth_ == Auth::AwaitAuth || auth_ == Auth::ReadingAuth) {
    auth_failed(fmt::format("it closed the connection before it authenticated: it has another secret, or none ({})",
                            auth::kHint));
    return true;
  }
  // After its goodbye a reset is an end as clean as EOF: the peer closed
  // the socket with bytes of ours unread that it no longer needed (a
  // SWITCH, say, one socket per pair).
  if (bye_received_) t_.connection_closed_cleanly(*this);
  else if (n == 0) broken("connection closed without goodbye (the process exited or was killed)");
  else broken(fmt::format("receive failed: {}", errno_text()));
  return true;
}

void Connection::handle_header() {
  const wire::FrameHeader h = hdr_;
  if (h.magic != wire::kMagic || h.version != wire::kVersion) {
    if (peer_ < 0) {  // not one of ours: drop it quietly
      BRAID_WARN("dropping a connection that did not speak Braid's protocol");
      t_.retire(*this);
      return;
    }
    broken(fmt::format("sent a malformed frame (magic {:#x}, version {})", h.magic, h.version));
    return;
  }
  const auto type = static_cast<wire::FrameType>(h.type);
  if (auth_ != Auth::Done) return auth_header(h);
  if (peer_ < 0) {
    if (type != wire::FrameType::Hello) {
      BRAID_WARN("dropping a connection whose first frame was not HELLO");
      t_.retire(*this);
      return;
    }
    if (!t_.hello_valid(*this, h)) return;
    if (t_.secret()) {  // the dialer's nonce follows; AUTH answers it
      hello_ = h;
      auth_ = Auth::HelloNonce;
      dst_ = reinterpret_cast<char*>(auth_buf_);
      remaining_ = auth::kNonceBytes;
      rstate_ = ReadState::Payload;
      return;
    }
    hello_ = h;
    peer_ = static_cast<int>(h.id);
    t_.accept_peer(*this, peer_);
    return;
  }
  switch (type) {
    case wire::FrameType::Eager: {
      if (h.bytes > kMaxEagerPayload) {
        broken(fmt::format("sent an eager frame of {} bytes (limit {})", h.bytes, kMaxEagerPayload));
        return;
      }
      const Envelope env{h.ctx, h.tag, h.reserved, h.reserved2};
      const auto bytes = static_cast<std::size_t>(h.bytes);
      Request* r = t_.host().take_posted(peer_, env);
      remaining_ = bytes;
      if (r) {
        r->source = peer_;
        if (auto err = receive_error(*r, peer_, env, bytes)) {
          // The receive fails; the message is consumed and dropped.
          t_.host().complete(*r, err);
          rstate_ = ReadState::Discard;
        } else {
          r->received = bytes;
          reading_req_ = r;
          dst_ = static_cast<char*>(r->buf);
          rstate_ = ReadState::Payload;
        }
      } else {
        auto u = std::make_unique<Unexpected>();
        u->kind = Unexpected::Kind::Eager;
        u->src = peer_;
        u->env = env;
        u->bytes = bytes;
        u->data.reset(new std::uint8_t[bytes ? bytes : 1]);
        u->transport = &t_;
        u->channel = id_;
        Unexpected& ref = t_.host().add_unexpected(std::move(u));
        reading_unexp_ = &ref;
        dst_ = reinterpret_cast<char*>(ref.data.get());
        rstate_ = ReadState::Payload;
      }
      if (remaining_ == 0) payload_done();
      return;
    }
    case wire::FrameType::Rts:
      t_.on_rts(*this, h);
      return;
    case wire::FrameType::Cts:
      t_.on_cts(*this, h);
      return;
    case wire::FrameType::Data: {
      Request* r = t_.on_data(h);
      remaining_ = static_cast<std::size_t>(h.bytes);
      part_bytes_ = remaining_;
      if (r) {
        reading_req_ = r;
        dst_ = static_cast<char*>(r->buf) + h.tag;  // on_data checked the part lies inside the message
        rstate_ = ReadState::Payload;
      } else {
        rstate_ = ReadState::Discard;
      }
      if (remaining_ == 0) payload_done();
      return;
    }
    case wire::FrameType::Bye:
      bye_received_ = true;
      bye_word_ = h.id2;
      if (bye_carried()) t_.note_shares(peer_);  // only a rank that shares says so
      t_.heard_goodbye(peer_, h.id);
      return;
    case wire::FrameType::Switch:
      t_.on_switch(*this, h);
      return;
    case wire::FrameType::Follows:
      t_.on_follows(*this);
      return;
    default:
      broken(fmt::format("sent a frame of unknown type {}", static_cast<int>(h.type)));
      return;
  }
}

void Connection::await_auth(const wire::FrameHeader& hello, const auth::Nonce& nonce) {
  hello_ = hello;
  dialer_nonce_ = nonce;
  auth_ = Auth::AwaitAuth;
}

void Connection::auth_header(const wire::FrameHeader& h) {
  const auto type = static_cast<wire::FrameType>(h.type);
  if (auth_ == Auth::AwaitProof && type == wire::FrameType::Proof && h.bytes == auth::kMacBytes) {
    auth_ = Auth::ReadingProof;
    remaining_ = auth::kMacBytes;
  } else if (auth_ == Auth::AwaitAuth && type == wire::FrameType::Auth &&
             h.bytes == auth::kNonceBytes + auth::kMacBytes) {
    auth_ = Auth::ReadingAuth;
    remaining_ = auth::kNonceBytes + auth::kMacBytes;
  } else {
    return auth_failed(fmt::format("it sent a frame of type {} where the challenge-response expects another",
                                   static_cast<int>(h.type)));
  }
  dst_ = reinterpret_cast<char*>(auth_buf_);
  rstate_ = ReadState::Payload;
}

void Connection::auth_payload() {
  const auth::Secret& secret = *t_.secret();
  auth::Mac mac;
  switch (auth_) {
    case Auth::HelloNonce: {  // acceptor: prove the secret over both nonces
      std::memcpy(dialer_nonce_.data(), auth_buf_, auth::kNonceBytes);
      acceptor_nonce_ = auth::fresh_nonce();
      mac = secret.mac(TcpTransport::proof_label(true, hello_), auth::view(dialer_nonce_), auth::view(acceptor_nonce_));
      std::memcpy(auth_buf_, acceptor_nonce_.data(), auth::kNonceBytes);
      std::memcpy(auth_buf_ + auth::kNonceBytes, mac.data(), auth::kMacBytes);
      auth_ = Auth::AwaitProof;
      if (!send_now(wire::FrameType::Auth, auth_buf_, sizeof auth_buf_)) auth_failed("its socket did not take AUTH");
      return;
    }
    case Auth::ReadingProof:  // acceptor: the dialer's proof
      std::memcpy(mac.data(), auth_buf_, auth::kMacBytes);
      if (!secret.check(mac, TcpTransport::proof_label(false, hello_), auth::view(dialer_nonce_),
                        auth::view(acceptor_nonce_)))
        return auth_failed("it could not prove the job's secret");
      auth_ = Auth::Done;
      peer_ = static_cast<int>(hello_.id);
      t_.accept_peer(*this, peer_);
      return;
    case Auth::ReadingAuth:  // dialer: the acceptor's proof, then ours
      std::memcpy(acceptor_nonce_.data(), auth_buf_, auth::kNonceBytes);
      std::memcpy(mac.data(), auth_buf_ + auth::kNonceBytes, auth::kMacBytes);
      if (!secret.check(mac, TcpTransport::proof_label(true, hello_), auth::view(dialer_nonce_),
                        auth::view(acceptor_nonce_)))
        return auth_failed(fmt::format("it could not prove the job's secret ({})", auth::kHint));
      mac = secret.mac(TcpTransport::proof_label(false, hello_), auth::view(dialer_nonce_), auth::view(acceptor_nonce_));
      auth_ = Auth::Done;
      if (!send_now(wire::FrameType::Proof, mac.data(), mac.size())) return auth_failed("its socket did not take PROOF");
      flush();  // the frames queued meanwhile
      return;
    default:
      return;
  }
}

bool Connection::send_now(wire::FrameType type, const std::uint8_t* payload, std::size_t n) {
  const auto h = wire::make_header(type, 0, 0, n);
  iovec iov[2] = {{const_cast<wire::FrameHeader*>(&h), kHeader}, {const_cast<std::uint8_t*>(payload), n}};
  msghdr msg{};
  msg.msg_iov = iov;
  msg.msg_iovlen = 2;
  ssize_t sent;
  do sent = ::sendmsg(fd_.get(), &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
  while (sent < 0 && errno == EINTR);
  return sent == static_cast<ssize_t>(kHeader + n);
}

void Connection::auth_failed(const std::string& why) {
  if (peer_ < 0) {  // accepted: a stranger, or another job's process; the job goes on
    BRAID_WARN("tcp: refusing a connection that claims rank {}: authentication failed: {} ({})", hello_.id, why,
               auth::kHint);
    t_.retire(*this);
    return;
  }
  broken(fmt::format("authentication failed: {}", why));  // dialed: the peer we meant to reach is not it
}

void Connection::payload_done() {
  rstate_ = ReadState::Header;
  if (auth_ != Auth::Done) return auth_payload();
  if (reading_req_) {
    Request* r = std::exchange(reading_req_, nullptr);
    t_.data_arrived(*r, part_bytes_);
    return;
  }
  if (reading_unexp_) {
    Unexpected* u = std::exchange(reading_unexp_, nullptr);
    u->arrived = u->bytes;
    // Claimed by a receive while it was arriving: hand the data over now.
    if (partial_ && partial_.get() == u) {
      auto owned = std::move(partial_);
      if (owned->waiter) {
        Request& r = *owned->waiter;
        if (owned->bytes) std::memcpy(r.buf, owned->data.get(), owned->bytes);
        t_.host().complete(r);
      }
    }
  }
}

void Connection::broken(const std::string& why) { t_.connection_broken(*this, why); }

}  // namespace braid
