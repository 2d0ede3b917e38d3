// VerbsTransport's connections: set-up through the handshake
// (handshake.hpp), the liveness socket, failure, and teardown.
//
// Why one file of ~540 lines: a connection's life is one state machine
// (handshake, ready, failed, said goodbye), and each of its transitions
// touches the queue pair, the liveness socket and the credits together.
#include <poll.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "src/common/errors.hpp"
#include "src/common/log.hpp"
#include "src/common/socket.hpp"
#include "transports/dial.hpp"
#include "transports/verbs/verbs_conn.hpp"

namespace braid {

using verbs::buffer_bytes;
using verbs::kCreditBatch;
using verbs::kCredits;
using verbs::kHeader;
using verbs::kSendWr;
using verbs::WrKind;

namespace {
// After the liveness socket closes, how long a BYE may still be on its way
// through the completion queue before the close counts as a crash.
constexpr auto kEofGrace = std::chrono::milliseconds(200);
// How long shutdown() waits for its BYEs to be acknowledged.
constexpr auto kByeWait = std::chrono::milliseconds(2000);
}  // namespace

void VerbsTransport::setup_qp(Conn& c) {
  const std::uint32_t depth = verbs::receive_depth(kCredits, kCreditBatch);
  c.rx = std::make_unique<verbs::RecvRing>(pd_.get(), depth, buffer_bytes(eager_limit_));
  c.qp = verbs::create_rc_qp(*dev_, pd_.get(), cq_.get(), {kSendWr, depth});
  for (std::uint32_t i = 0; i < depth; ++i)
    if (int err = c.rx->post(c.qp.get(), i, verbs::wr_id(WrKind::Recv, c.id, i)))
      fail(ErrorCode::Transport, "verbs: cannot post receive buffers: {}", errno_text(err));
  c.local = verbs::local_endpoint(*dev_, c.qp.get(), verbs::random_psn());
  c.sq_free = kSendWr;
}

void VerbsTransport::start_flow(Conn& c, const verbs::HelloFields& remote) {
  c.credits.start(remote.credits, kCredits, kCreditBatch);
  c.eager_limit = std::min<std::size_t>(eager_limit_, remote.recv_bytes - kHeader);
  c.read_limit = std::min(c.local.rd_atom, remote.endpoint.rd_atom);
  c.state = Conn::State::Ready;
  live_[c.id] = &c;
}

void VerbsTransport::ConnDeleter::operator()(Conn* c) const { delete c; }

verbs::HelloFields VerbsTransport::hello_fields(const Conn& c) const {
  verbs::HelloFields f;
  f.job_id = cfg_.job_id;
  f.rank = cfg_.rank;
  f.world_size = cfg_.world_size;
  f.endpoint = c.local;
  f.credits = kCredits;
  f.recv_bytes = c.rx->bytes();
  return f;
}

namespace {
struct DialedQp final : Dialed {
  explicit DialedQp(VerbsTransport::DialedConn conn) : c(std::move(conn)) {}
  VerbsTransport::DialedConn c;
};
}  // namespace

bool VerbsTransport::reaches(const PeerInfo& peer, std::string* why) const {
  // Between hosts, or everywhere when the backend names verbs (then even
  // ranks of one host talk through the device: loopback benchmarking).
  if (cfg_.forced || !peer.same_host) return true;
  *why = "verbs is used between hosts unless backend='verbs' forces it";
  return false;
}

ConnectResult VerbsTransport::connect(const PeerInfo& peer, Deadline deadline) {
  if (peer.address.empty() || peer.address == "-")
    return ConnectResult::unavailable(fmt::format("rank {} has no usable RDMA device", peer.rank));
  DialedConn c(new Conn(*this, peer.rank, true));
  setup_qp(*c);
  Dialing d = dial_listener(peer, "verbs listener", deadline);
  if (d.failed) return std::move(*d.failed);
  Fd fd = std::move(d.fd);
  net::set_nodelay(fd.get());
  const verbs::Hello req = verbs::make_hello(verbs::HelloKind::Request, hello_fields(*c));
  net::write_all(fd.get(), &req, sizeof req, deadline, fmt::format("rank {}", peer.rank));
  if (secret_) {  // the answer (ACCEPT and its proof) is read by on_socket
    c->dialer_nonce = auth::fresh_nonce();
    net::write_all(fd.get(), c->dialer_nonce.data(), c->dialer_nonce.size(), deadline, fmt::format("rank {}", peer.rank));
    c->reader.expect(sizeof(verbs::Hello) + 2 * verbs::kProofBytes);
  }
  net::set_nonblocking(fd.get());
  c->sock = std::move(fd);
  c->state = Conn::State::AwaitAccept;
  return ConnectResult::connected(std::make_unique<DialedQp>(std::move(c)));
}

void VerbsTransport::adopt(int peer, std::unique_ptr<Dialed> d) {
  DialedConn c = std::move(static_cast<DialedQp&>(*d).c);
  Conn& ref = *c;
  out_[static_cast<std::size_t>(peer)] = &ref;
  conns_.push_back(std::unique_ptr<Conn>(c.release()));
  // Its receives are posted, but nothing arrives before it is Ready: the
  // peer sends on this QP only in answer to us.
  live_[ref.id] = &ref;
  host_.add_fd(ref.sock.get(), &ref, EPOLLIN);
  ref.in_epoll = true;
}

void VerbsTransport::on_events(std::uint32_t) {
  // The listener: accept everything pending; the request names the peer.
  for (;;) {
    int fd = ::accept4(listen_fd_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) BRAID_WARN("verbs: accept failed: {}", errno_text());
      return;
    }
    net::set_nodelay(fd);
    auto c = std::make_unique<Conn>(*this, -1, false);
    if (secret_) c->reader.expect(sizeof(verbs::Hello) + verbs::kProofBytes);
    c->sock = Fd(fd);
    host_.add_fd(fd, c.get(), EPOLLIN);
    c->in_epoll = true;
    conns_.push_back(std::move(c));
  }
}

void VerbsTransport::accept_request(Conn& c) {
  const verbs::Hello& h = c.reader.hello();
  const std::string bad = verbs::check_hello(h, verbs::HelloKind::Request, cfg_.job_id, cfg_.world_size, cfg_.rank, -1);
  if (!bad.empty()) {
    BRAID_WARN("verbs: dropping a connection with a bad request: {}", bad);
    retire(c);
    return;
  }
  const verbs::HelloFields remote = verbs::fields_of(h);
  Conn*& slot = in_[static_cast<std::size_t>(remote.rank)];
  if (slot) {
    BRAID_WARN("verbs: dropping a second connection from rank {}", remote.rank);
    retire(c);
    return;
  }
  if (secret_) {
    // Answer with our endpoint and proof; connect the QP only once the
    // dialer has proved the secret too (accept_proof). Until then the
    // connection names no rank: a stranger's failure blames nobody.
    c.claimed = remote.rank;
    c.remote = remote;
    std::memcpy(c.dialer_nonce.data(), c.reader.bytes() + sizeof(verbs::Hello), verbs::kProofBytes);
    try {
      setup_qp(c);
    } catch (const Error& e) {
      BRAID_WARN("verbs: dropping a connection from a process claiming rank {}: {}", remote.rank, e.what());
      retire(c);
      return;
    }
    c.acceptor_nonce = auth::fresh_nonce();
    const auth::Mac mac = secret_->mac(verbs::proof_label(true, cfg_.job_id, remote.rank, cfg_.rank),
                                       auth::view(c.dialer_nonce), auth::view(c.acceptor_nonce));
    std::uint8_t msg[sizeof(verbs::Hello) + 2 * verbs::kProofBytes];
    const verbs::Hello ack = verbs::make_hello(verbs::HelloKind::Accept, hello_fields(c));
    std::memcpy(msg, &ack, sizeof ack);
    std::memcpy(msg + sizeof ack, c.acceptor_nonce.data(), verbs::kProofBytes);
    std::memcpy(msg + sizeof ack + verbs::kProofBytes, mac.data(), verbs::kProofBytes);
    if (!send_now(c, msg, sizeof msg)) {
      retire(c);
      return;
    }
    c.auth_step = 1;
    c.reader.expect(verbs::kProofBytes);
    return;
  }
  c.peer = remote.rank;
  try {
    setup_qp(c);
    verbs::connect_qp(c.qp.get(), *dev_, c.local, remote.endpoint);
  } catch (const Error& e) {
    conn_failed(c, fmt::format("could not set up a verbs connection with it: {}", e.what()));
    return;
  }
  const verbs::Hello ack = verbs::make_hello(verbs::HelloKind::Accept, hello_fields(c));
  // 64 bytes into a fresh socket: the kernel takes them at once.
  if (::send(c.sock.get(), &ack, sizeof ack, MSG_NOSIGNAL | MSG_DONTWAIT) != static_cast<ssize_t>(sizeof ack)) {
    conn_failed(c, fmt::format("could not answer its connection request: {}", errno_text()));
    return;
  }
  slot = &c;
  start_flow(c, remote);
  BRAID_INFO("verbs: rank {} connected (QPN {} -> {})", c.peer, remote.endpoint.qpn, c.local.qpn);
}

void VerbsTransport::finish_dial(Conn& c) {
  const verbs::Hello& h = c.reader.hello();
  const std::string bad =
      verbs::check_hello(h, verbs::HelloKind::Accept, cfg_.job_id, cfg_.world_size, cfg_.rank, c.peer);
  if (!bad.empty()) {
    conn_failed(c, fmt::format("answered the verbs connection request wrongly: {}", bad));
    return;
  }
  const verbs::HelloFields remote = verbs::fields_of(h);
  if (secret_) {
    std::memcpy(c.acceptor_nonce.data(), c.reader.bytes() + sizeof(verbs::Hello), verbs::kProofBytes);
    auth::Mac theirs;
    std::memcpy(theirs.data(), c.reader.bytes() + sizeof(verbs::Hello) + verbs::kProofBytes, verbs::kProofBytes);
    if (!secret_->check(theirs, verbs::proof_label(true, cfg_.job_id, cfg_.rank, c.peer), auth::view(c.dialer_nonce),
                        auth::view(c.acceptor_nonce))) {
      conn_failed(c, fmt::format("authentication failed: its verbs listener could not prove the job's secret ({})",
                                 auth::kHint));
      return;
    }
  }
  try {
    verbs::connect_qp(c.qp.get(), *dev_, c.local, remote.endpoint);
  } catch (const Error& e) {
    conn_failed(c, e.what());
    return;
  }
  if (secret_) {
    // Our proof; the acceptor connects its QP on it and answers READY,
    // before which nothing is sent on ours (dial_ready).
    const auth::Mac mine = secret_->mac(verbs::proof_label(false, cfg_.job_id, cfg_.rank, c.peer),
                                        auth::view(c.dialer_nonce), auth::view(c.acceptor_nonce));
    if (!send_now(c, mine.data(), mine.size())) {
      conn_failed(c, "could not send it the handshake's proof");
      return;
    }
    c.remote = remote;
    c.auth_step = 1;
    c.reader.expect(verbs::kReadyBytes);
    return;
  }
  start_flow(c, remote);
  BRAID_INFO("verbs: connected to rank {} (QPN {} -> {})", c.peer, c.local.qpn, remote.endpoint.qpn);
  flush(c);
}

void VerbsTransport::accept_proof(Conn& c) {
  auth::Mac theirs;
  std::memcpy(theirs.data(), c.reader.bytes(), verbs::kProofBytes);
  if (!secret_->check(theirs, verbs::proof_label(false, cfg_.job_id, c.claimed, cfg_.rank), auth::view(c.dialer_nonce),
                      auth::view(c.acceptor_nonce))) {
    BRAID_WARN("verbs: refusing a connection that claims rank {}: authentication failed ({})", c.claimed, auth::kHint);
    retire(c);
    return;
  }
  Conn*& slot = in_[static_cast<std::size_t>(c.claimed)];
  if (slot) {
    BRAID_WARN("verbs: dropping a second connection from rank {}", c.claimed);
    retire(c);
    return;
  }
  c.peer = c.claimed;
  try {
    verbs::connect_qp(c.qp.get(), *dev_, c.local, c.remote.endpoint);
  } catch (const Error& e) {
    conn_failed(c, fmt::format("could not set up a verbs connection with it: {}", e.what()));
    return;
  }
  const std::uint64_t ready = verbs::kReadyWord;
  if (!send_now(c, &ready, sizeof ready)) {
    conn_failed(c, "could not answer its proof");
    return;
  }
  slot = &c;
  c.auth_step = 0;
  start_flow(c, c.remote);
  BRAID_INFO("verbs: rank {} connected, authenticated (QPN {} -> {})", c.peer, c.remote.endpoint.qpn, c.local.qpn);
}

void VerbsTransport::dial_ready(Conn& c) {
  std::uint64_t word = 0;
  std::memcpy(&word, c.reader.bytes(), sizeof word);
  if (word != verbs::kReadyWord) {
    conn_failed(c, "answered the verbs handshake's proof wrongly");
    return;
  }
  c.auth_step = 0;
  start_flow(c, c.remote);
  BRAID_INFO("verbs: connected to rank {}, authenticated (QPN {} -> {})", c.peer, c.local.qpn, c.remote.endpoint.qpn);
  flush(c);
}

bool VerbsTransport::send_now(Conn& c, const void* p, std::size_t n) {
  // A few dozen bytes into a socket that has carried only the handshake:
  // the kernel takes them at once.
  ssize_t sent;
  do sent = ::send(c.sock.get(), p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
  while (sent < 0 && errno == EINTR);
  return sent == static_cast<ssize_t>(n);
}

bool VerbsTransport::connected(int peer) const {
  const Conn* c = out_[static_cast<std::size_t>(peer)];
  return c && c->usable();
}

bool VerbsTransport::watching(int peer) const {
  for (const auto& c : conns_)
    if (c->peer == peer && c->in_epoll) return true;
  return false;
}

VerbsTransport::Conn* VerbsTransport::live(std::uint32_t id) {
  auto it = live_.find(id);
  return it == live_.end() ? nullptr : it->second;
}

// --- the liveness socket -----------------------------------------------------

void VerbsTransport::on_socket(Conn& c, std::uint32_t) {
  using S = Conn::State;
  if (c.state == S::AwaitRequest || c.state == S::AwaitAccept) {
    switch (c.reader.read_from(c.sock.get())) {
      case verbs::HelloReader::Result::More:
        return;
      case verbs::HelloReader::Result::Done:
        if (c.state == S::AwaitRequest) c.auth_step ? accept_proof(c) : accept_request(c);
        else c.auth_step ? dial_ready(c) : finish_dial(c);
        return;
      case verbs::HelloReader::Result::Closed:
      case verbs::HelloReader::Result::Failed:
        if (c.state == S::AwaitRequest) retire(c);  // a probe, or a stray
        else
          conn_failed(c, secret_ ? fmt::format("its verbs listener closed the connection during the handshake (the "
                                               "process exited or was killed, or it has another secret: {})", auth::kHint)
                                 : std::string("its verbs listener closed the connection during the handshake (the "
                                               "process exited or was killed)"));
        return;
    }
  }
  if (c.state != S::Ready) return;
  char byte;
  const ssize_t n = ::recv(c.sock.get(), &byte, 1, 0);
  if (n > 0) {
    malformed(c, "bytes on its verbs control socket after the handshake");
  } else if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
    on_eof(c);
  }
}

void VerbsTransport::on_eof(Conn& c) {
  if (c.in_epoll) {
    host_.del_fd(c.sock.get());
    c.in_epoll = false;
  }
  // Messages it sent before closing (a BYE among them) may still be in the
  // completion queue: take them first.
  drain_cq();
  if (c.state != Conn::State::Ready) return;
  if (c.bye_seen) {
    closed_cleanly(c);
    return;
  }
  c.state = Conn::State::Eof;
  c.eof_deadline = Clock::now() + kEofGrace;
  dirty_ = true;
}

// --- failure and teardown ------------------------------------------------------

void VerbsTransport::malformed(Conn& c, const std::string& what) {
  conn_failed(c, fmt::format("it sent a malformed verbs message ({})", what));
}

void VerbsTransport::conn_failed(Conn& c, const std::string& why) {
  if (c.state == Conn::State::Closed) return;
  if (c.peer < 0) {
    retire(c);
    return;
  }
  // The job aborts: every request, this connection's included, fails with
  // the one abort error, which names the peer. (If the job had already
  // aborted, nothing else retires this connection.)
  host_.peer_failed(c.peer, why);
  retire(c);
}

void VerbsTransport::fail_requests_of(Conn& c, const std::exception_ptr& e) {
  for (auto& o : c.pending) {
    if (o.kind == Outgoing::Kind::Data && o.r) {
      o.r->queued = false;
      host_.complete(*o.r, e);
    }
  }
  c.pending.clear();
  for (auto it = rts_out_.begin(); it != rts_out_.end();) {
    if (it->second.conn != c.id) {
      ++it;
      continue;
    }
    if (it->second.r) host_.complete(*it->second.r, e);
    cache_->release(it->second.mr);
    it = rts_out_.erase(it);
  }
  for (auto it = reads_.begin(); it != reads_.end();) {
    if (it->second.conn != c.id) {
      ++it;
      continue;
    }
    if (it->second.r) host_.complete(*it->second.r, e);
    cache_->release(it->second.mr);
    it = reads_.erase(it);
  }
}

void VerbsTransport::closed_cleanly(Conn& c) {
  const int peer = c.peer;
  // Only the peer's own (dialed) connection carries its messages to us.
  if (c.dialed) {
    fail_requests_of(c, std::make_exception_ptr(Error(
        ErrorCode::PeerFailure,
        fmt::format("rank {} left the job (destroy_process_group, or its exit) while a send to it was pending", peer), peer)));
    retire(c);
    return;
  }
  fail_requests_of(c, std::make_exception_ptr(Error(
      ErrorCode::PeerFailure,
      fmt::format("rank {} left the job (destroy_process_group, or its exit) while this op was pending", peer), peer)));
  retire(c);
  host_.peer_left(peer);
}

void VerbsTransport::retire(Conn& c) {
  if (c.state == Conn::State::Closed) return;
  // Stop the HCA first: after this it touches none of the connection's
  // buffers, nor the user buffers of its READs.
  if (c.qp) verbs::qp_to_error(c.qp.get());
  fail_requests_of(c, std::make_exception_ptr(Error(
      ErrorCode::PeerFailure, fmt::format("the verbs connection to rank {} was closed", c.peer), c.peer)));
  c.state = Conn::State::Closed;
  dirty_ = true;  // poll() may have skipped a connection while this one left the list
  if (c.in_epoll) {
    host_.del_fd(c.sock.get());
    c.in_epoll = false;
  }
  c.sock.reset();
  live_.erase(c.id);
  slots_->release_owned_by(c.id);
  if (c.peer >= 0) {
    if (out_[static_cast<std::size_t>(c.peer)] == &c) out_[static_cast<std::size_t>(c.peer)] = nullptr;
    if (in_[static_cast<std::size_t>(c.peer)] == &c) in_[static_cast<std::size_t>(c.peer)] = nullptr;
  }
  for (auto it = conns_.begin(); it != conns_.end(); ++it)
    if (it->get() == &c) {
      retired_.push_back(std::move(*it));
      conns_.erase(it);
      break;
    }
}

void VerbsTransport::drop_peer(int peer) {
  std::vector<Conn*> doomed;
  for (auto& c : conns_)
    if (c->peer == peer) doomed.push_back(c.get());
  for (Conn* c : doomed) retire(*c);
}

// A READ still in flight would write into a buffer its caller gets back
// with the error: stop the QP (its flush then retires it quietly).
void VerbsTransport::stop_reads(Conn& c, const char* why) {
  bool reading = false;
  for (auto& [id, op] : reads_)
    if (op.conn == c.id && op.chunks_posted > op.chunks_done) reading = true;
  if (reading && c.qp) {
    c.stop_reason = why;
    verbs::qp_to_error(c.qp.get());
  }
}

void VerbsTransport::fail_peer(int peer, const std::exception_ptr& e) { break_off(peer, e); }

void VerbsTransport::break_off(int peer, const std::exception_ptr& e) {
  for (auto& c : conns_)
    if (c->peer == peer) {
      stop_reads(*c, "the peer failed while it was being read from");
      fail_requests_of(*c, e);
    }
  drop_peer(peer);
}

void VerbsTransport::fail_all(const std::exception_ptr& e) {
  for (auto& c : conns_) {
    stop_reads(*c, "the job aborted while it was being read from");
    fail_requests_of(*c, e);
  }
}

void VerbsTransport::shutdown() {
  if (shut_) return;
  // Goodbye on every connection, after whatever is queued on it; then wait
  // (bounded) until each BYE is acknowledged, which also means every
  // message before it was delivered. A connection still waiting for its
  // peer's answer takes it first: the peer already counts it as connected.
  std::vector<Conn*> bye_owed;
  const Deadline deadline = Deadline::after(kByeWait);
  for (;;) {
    for (std::size_t i = 0; i < conns_.size(); ++i) {
      Conn& c = *conns_[i];
      if (c.state == Conn::State::AwaitAccept) on_socket(c, EPOLLIN);
      if (c.state == Conn::State::Ready && std::find(bye_owed.begin(), bye_owed.end(), &c) == bye_owed.end()) {
        bye_owed.push_back(&c);
        enqueue(c, Outgoing{Outgoing::Kind::Bye});
      }
    }
    poll();
    // A peer that said goodbye itself may be gone: its ACK need not come.
    bool waiting = false;
    for (auto& c : conns_)
      if (c->state == Conn::State::AwaitAccept || (c->state == Conn::State::Ready && !c->bye_acked && !c->bye_seen))
        waiting = true;
    if (!waiting || deadline.expired()) break;
    if (prepare_sleep()) {
      pollfd p{channel_->fd, POLLIN, 0};
      ::poll(&p, 1, std::min(deadline.poll_ms(), 10));
      on_cq_event();
    }
  }
  shut_ = true;
  while (!conns_.empty()) retire(*conns_.back());
  host_.del_fd(channel_->fd);
  host_.del_fd(listen_fd_.get());
  listen_fd_.reset();
  const auto& s = cache_->stats();
  BRAID_INFO("verbs: registration cache: {} hits, {} misses, {} stale, {} evicted", s.hits, s.misses, s.stale,
             s.evicted);
}

void VerbsTransport::reap() { retired_.clear(); }

}  // namespace braid
