// TcpTransport's endings: a peer that fails or leaves (a socket broken, or
// closed after its goodbye), an op given up mid-transfer (break_off), the
// job's abort, and this rank's own goodbyes and shutdown.
#include "transports/tcp/tcp_transport.hpp"

#include <poll.h>
#include <sys/epoll.h>

#include <algorithm>
#include <utility>

#include "src/common/errors.hpp"
#include "src/common/log.hpp"
#include "src/common/socket.hpp"

namespace braid {

void TcpTransport::fail_requests_of(Connection& c, const std::exception_ptr& e) {
  c.drain_queue([&](Request& r) { host_.complete(r, e); });
  if (Request* r = c.reading_request()) {
    // Other parts of it may be arriving on the peer's other sockets.
    rdv_in_.erase(r->token);
    divert_everywhere(*r);
    host_.complete(*r, e);
  }
}

void TcpTransport::retire(Connection& c, bool park) {
  if (c.closed()) return;
  if (c.peer() >= 0 && !c.dialed()) incoming_[static_cast<std::size_t>(c.peer())]--;
  if (c.peer() >= 0 && out_[static_cast<std::size_t>(c.peer())] == &c) {
    out_[static_cast<std::size_t>(c.peer())] = nullptr;
    carrier_[static_cast<std::size_t>(c.peer())].store(false, std::memory_order_release);
  }
  if (c.peer() >= 0 && paused_[static_cast<std::size_t>(c.peer())] == &c) paused_[static_cast<std::size_t>(c.peer())] = nullptr;
  if (c.peer() >= 0 && c.dialed()) std::erase(stripes_[static_cast<std::size_t>(c.peer())], &c);
  // Announced messages from it can no longer be fetched: claim() finds no
  // live connection under their channel id.
  if (park) {
    auto listener = c.dialed() ? c.far_end() : std::nullopt;
    parked_.push_back({c.peer(), std::move(listener), c.park()});
  } else {
    c.close();
  }
  for (auto it = conns_.begin(); it != conns_.end(); ++it)
    if (it->get() == &c) {
      retired_.push_back(std::move(*it));
      conns_.erase(it);
      ++conns_changed_;
      break;
    }
}

void TcpTransport::connection_broken(Connection& c, const std::string& why) {
  const int peer = c.peer();
  // An extra socket we dialed (BRAID_TCP_SOCKETS) with nothing queued says
  // nothing of the peer: one that finished its work and exited before it
  // read the socket's HELLO resets it. Only the first socket's end is news.
  if (c.dialed() && peer >= 0 && out_[static_cast<std::size_t>(peer)] != &c && c.idle()) {
    BRAID_INFO("tcp: an extra socket to rank {} ended ({}); the first one carries on", peer, why);
    retire(c);
    return;
  }
  // A send that failed (the peer exited with our data unread, so its kernel
  // reset the connection) can come before we have read what the peer sent
  // last: its goodbye, which says the failure it learned of first, and
  // which is why it left. The kernel still hands out what arrived before
  // the reset: read it first, from every socket of the peer, and name that
  // failure first. A socket it dialed just before it went may hold the
  // goodbye (goodbye_afresh(): its others were mid-frame): accept it, and
  // read connections not yet identified too. Another of its sockets ending
  // meanwhile waits until all are read.
  if (draining_) {
    broken_while_draining_.emplace_back(&c, why);
    return;
  }
  if (peer >= 0) {
    draining_ = true;
    if (listen_fd_.valid()) on_events(0);
    std::vector<Connection*> theirs;
    for (auto& o : conns_)
      if (o->peer() == peer || o->peer() < 0) theirs.push_back(o.get());
    for (Connection* o : theirs)
      if (!o->closed()) o->read_now();
    draining_ = false;
  }
  note_why_it_left(peer);
  // The job aborts: every request, this connection's included, fails with the
  // one abort error (which names the root cause once it is known).
  host_.peer_failed(peer, why);
  retire(c);
  for (auto& [o, o_why] : std::exchange(broken_while_draining_, {}))
    if (!o->closed()) connection_broken(*o, o_why);
}

void TcpTransport::connection_closed_cleanly(Connection& c) {
  const int peer = c.peer();
  note_why_it_left(peer);
  if (shared_) {
    // The peer has left once the socket its messages came over has ended
    // (its goodbye there says so), and the socket its DATA came over, if it
    // had one (that goodbye says that too). Its other sockets may end first,
    // and those two may still wait in our listener's queue. A peer that
    // does not share (no HELLO or SWITCH of its said it does) has left with
    // its last socket.
    const auto p = static_cast<std::size_t>(peer);
    const auto e = std::make_exception_ptr(Error(
        ErrorCode::PeerFailure,
        fmt::format("rank {} left the job (destroy_process_group, or its exit) while this op was pending", peer), peer));
    fail_requests_of(c, e);
    retire(c);
    if (ending_[p] == Ending::Left) return;
    if (c.hello_flags() & wire::kHelloDataOnly) data_ended_[p] = 1;
    if (c.bye_carried()) {
      // The CTS for our announced sends would have come on it.
      complete_if(rts_out_, e, [&](const Request& r) { return r.peer == peer; });
      ending_[p] = c.bye_has_data() ? Ending::DataOwed : Ending::Left;
    }
    if (ending_[p] == Ending::DataOwed && data_ended_[p]) ending_[p] = Ending::Left;
    // (Sockets not yet identified may be its own.)
    if (ending_[p] == Ending::None && !shares_with_[p]) {
      for (auto& o : conns_)
        if (o->peer() == peer || o->peer() < 0) return;
      ending_[p] = Ending::Left;
    }
    if (ending_[p] != Ending::Left) return;
    complete_if(rts_out_, e, [&](const Request& r) { return r.peer == peer; });
    complete_if(rdv_in_, e, [&](const Request& r) { return r.source == peer; });
    host_.peer_left(peer);
    return;
  }
  // Only the peer's own (dialed) connection carries its messages to us; the
  // goodbye on ours can overtake data still arriving on theirs.
  if (c.dialed()) {
    // With it go the other sockets we dialed to it: a striped send has
    // parts queued on them too, and fails whole.
    const auto e = std::make_exception_ptr(Error(
        ErrorCode::PeerFailure,
        fmt::format("rank {} left the job (destroy_process_group, or its exit) while a send to it was pending", peer), peer));
    std::vector<Connection*> ours;
    for (auto& o : conns_)
      if (o->dialed() && o->peer() == peer) ours.push_back(o.get());
    for (Connection* o : ours) fail_requests_of(*o, e);
    for (Connection* o : ours) retire(*o);
    // Announced sends wait for a CTS it will not send: it left after its
    // last op, so it never posted their receives.
    complete_if(rts_out_, e, [&](const Request& r) { return r.peer == peer; });
    return;
  }
  auto e = std::make_exception_ptr(Error(
      ErrorCode::PeerFailure,
      fmt::format("rank {} left the job (destroy_process_group, or its exit) while this op was pending", peer), peer));
  fail_requests_of(c, e);
  retire(c);
  // With several sockets from the peer (BRAID_TCP_SOCKETS) one may end
  // before another has brought in all it carried: the peer has left once
  // the last one has.
  if (incoming_[static_cast<std::size_t>(peer)] == 0) {
    // Receives it was told to send (CTS) get no DATA now.
    complete_if(rdv_in_, e, [&](const Request& r) { return r.source == peer; });
    host_.peer_left(peer);
  }
}

void TcpTransport::note_why_it_left(int peer) {
  if (const int q = peer >= 0 ? knew_failed(peer) : -1; q >= 0)
    host_.peer_failed(q, fmt::format("reported by rank {} as it left", peer));
}

void TcpTransport::complete_if(std::unordered_map<std::uint64_t, Request*>& tokens, const std::exception_ptr& e,
                               const std::function<bool(const Request&)>& belongs) {
  for (auto it = tokens.begin(); it != tokens.end();) {
    if (belongs(*it->second)) {
      host_.complete(*it->second, e);
      it = tokens.erase(it);
    } else {
      ++it;
    }
  }
}

void TcpTransport::drop_peer(int peer) {
  switched_[static_cast<std::size_t>(peer)] = 0;
  std::vector<Connection*> doomed;
  for (auto& c : conns_)
    if (c->peer() == peer) doomed.push_back(c.get());
  for (Connection* c : doomed) retire(*c);
}

void TcpTransport::heard_goodbye(int peer, std::uint64_t word) {
  if (peer < 0 || peer >= cfg_.world_size) return;
  if (word == 0) BRAID_INFO("tcp: rank {} said goodbye (it knew of no failure)", peer);
  else BRAID_INFO("tcp: rank {} said goodbye (it knew of a failure of rank {})", peer, word - 1);  // unchecked: a log
  bye_knew_[static_cast<std::size_t>(peer)] = word;
  host_.peer_said_goodbye(peer);
}

int TcpTransport::knew_failed(int peer) const {
  const std::uint64_t w = bye_knew_[static_cast<std::size_t>(peer)];  // the peer's word: checked
  const auto q = static_cast<int>(w) - 1;
  return w > 0 && w <= static_cast<std::uint64_t>(cfg_.world_size) && q != peer && q != cfg_.rank ? q : -1;
}

void TcpTransport::leaving_because_of(int rank) {
  if (!first_failed_ && rank >= 0 && rank != cfg_.rank) first_failed_ = static_cast<std::uint32_t>(rank) + 1;
}

void TcpTransport::fail_peer(int peer, const std::exception_ptr& e) {
  if (!first_failed_ && peer != cfg_.rank) first_failed_ = static_cast<std::uint32_t>(peer) + 1;
  fail_requests_with(peer, e);
  drop_peer(peer);
}

void TcpTransport::break_off(int peer, const std::exception_ptr& e) {
  fail_requests_with(peer, e);
  // Parked, not closed: a stream that ends mid-frame tells the peer this
  // rank died, and it would log a live rank as the job's failure. The
  // sockets stay open, unread and unwritten, until this transport goes.
  switched_[static_cast<std::size_t>(peer)] = 0;
  std::vector<Connection*> ours;
  for (auto& c : conns_)
    if (c->peer() == peer) ours.push_back(c.get());
  for (Connection* c : ours) retire(*c, /*park=*/true);
}

void TcpTransport::fail_requests_with(int peer, const std::exception_ptr& e) {
  for (auto& c : conns_)
    if (c->peer() == peer) fail_requests_of(*c, e);
  complete_if(rts_out_, e, [&](const Request& r) { return r.peer == peer; });
  complete_if(rdv_in_, e, [&](const Request& r) { return r.source == peer; });
}

void TcpTransport::fail_all(const std::exception_ptr& e) {
  for (auto& c : conns_) fail_requests_of(*c, e);
  for (auto& [tok, r] : rts_out_) host_.complete(*r, e);
  rts_out_.clear();
  for (auto& [tok, r] : rdv_in_) host_.complete(*r, e);
  rdv_in_.clear();
}

void TcpTransport::shutdown() {
  // Goodbye on every socket whose queue is empty, so peers can tell a clean
  // exit from a crash. Best effort, bounded: a dead peer must not stall us.
  // It says which failure we learned of first: we may leave because of it.
  const auto bye = wire::make_header(wire::FrameType::Bye, 0, 0, 0, first_failed_);
  auto carried = bye;  // on the socket our messages went over (shared)
  const Deadline d = Deadline::after(Millis(1000));
  const auto world = static_cast<std::size_t>(cfg_.world_size);
  std::vector<char> told(world, 0), owed(world, 0);
  std::vector<std::optional<net::SockAddr>> listener(world);
  for (auto& c : conns_) {
    if (c->closed() || c->peer() < 0) continue;
    const auto p = static_cast<std::size_t>(c->peer());
    if (c->dialed() && !listener[p]) listener[p] = c->far_end();
    if (!listener[p]) listener[p] = listeners_[p];
    // A socket still proving the secret would fail the proof on a BYE
    // (the peer drops it, unidentified): it is left to end.
    if (!c->authenticated()) continue;
    if (!c->idle() || !c->in_step()) {
      owed[p] = 1;
      continue;
    }
    try {
      const bool carries = shared_ && out_[p] == c.get();
      if (carries) {
        // Bit 1 only where that socket can say goodbye too.
        const bool data = std::any_of(stripes_[p].begin(), stripes_[p].end(),
                                      [](const Connection* s) { return s->authenticated() && !s->closed(); });
        carried.id2 = 1 | (data ? 2 : 0);
      }
      net::write_all(c->fd(), carries ? &carried : &bye, sizeof bye, d, "peer");
      told[p] = 1;
    } catch (const Error&) {
    }
  }
  for (const Parked& k : parked_) {
    const auto p = static_cast<std::size_t>(k.peer);
    owed[p] = 1;
    if (!listener[p]) listener[p] = k.listener ? k.listener : listeners_[p];
  }
  // A peer none of whose sockets can carry the goodbye (each mid-frame, or
  // busy) would read the stream's end as this rank's death, and name it,
  // though it may leave on another rank's failure: tell it on a new socket.
  for (std::size_t p = 0; p < world; ++p)
    if (owed[p] && !told[p] && listener[p]) goodbye_afresh(static_cast<int>(p), *listener[p], bye, d);
  while (!conns_.empty()) retire(*conns_.back());
  host_.del_fd(listen_fd_.get());
  listen_fd_.reset();
}

void TcpTransport::goodbye_afresh(int peer, const net::SockAddr& at, const wire::FrameHeader& bye, Deadline d) {
  Fd fd = net::connect_once(at, d);
  if (!fd.valid()) return;  // gone, or not answering: nothing more to tell it
  auth::Nonce nonce{};
  wire::FrameHeader hello;
  try {
    hello = say_hello(fd.get(), d, fmt::format("rank {}", peer), &nonce, wire::kHelloByeOnly);
  } catch (const Error&) {
    return;
  }
  auto c = std::make_unique<Connection>(*this, std::move(fd), peer, true, next_conn_id_++);
  if (secret_) c->await_auth(hello, nonce);  // the goodbye waits for the peer's proof
  c->enqueue(nullptr, bye, 0);
  Connection* raw = c.get();
  ++conns_changed_;
  conns_.push_back(std::move(c));
  while (!raw->closed() && !raw->idle() && !d.expired()) {
    pollfd pfd{raw->fd(), POLLIN, 0};
    const int n = ::poll(&pfd, 1, d.poll_ms(10));
    raw->on_events(EPOLLOUT | (n > 0 ? EPOLLIN : 0u) | (n > 0 && (pfd.revents & (POLLHUP | POLLERR)) ? EPOLLHUP : 0u));
  }
}

void TcpTransport::reap() { retired_.clear(); }

}  // namespace braid
