#include "transports/tcp/tcp_transport.hpp"

#include "transports/dial.hpp"
#include "transports/tcp/congestion.hpp"

#include <sys/epoll.h>
#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <optional>

#include "braid/ops.hpp"
#include "src/common/env.hpp"
#include "src/common/errors.hpp"
#include "src/common/log.hpp"
#include "src/common/socket.hpp"

namespace braid {

namespace {
// Sockets a rank dials to each peer it sends to (BRAID_TCP_SOCKETS): one
// carries every frame; where there are more, a large message's DATA is cut
// into parts, one per socket, so that several streams fill a link one
// cannot (several kernel threads work at once on them).
constexpr int kMaxSockets = 16;
int sockets_from_env() {
  return static_cast<int>(
      env_integer("BRAID_TCP_SOCKETS", 1, kMaxSockets, "a socket count from 1 to 16").value_or(1));
}
// Parts of a striped DATA are at least this long: a part costs a frame and
// a wake-up at each end, small next to half a megabyte.
constexpr std::size_t kMinPart = 512 * 1024;

// One socket per pair of ranks (BRAID_TCP_SHARED, default on), where a
// rank has one socket per peer: 0 keeps a socket per direction.
bool shared_from_env(int sockets) {
  return sockets == 1 && env_integer("BRAID_TCP_SHARED", 0, 1, "0 or 1").value_or(1) == 1;
}

std::size_t eager_limit_from_env() {
  // 64 KiB: past it the extra round trip of the rendezvous costs less than
  // copying an unexpected message, and unexpected memory stays bounded.
  return static_cast<std::size_t>(env_integer("BRAID_TCP_EAGER_LIMIT", 0, 4 << 20,
                                              "a byte count up to 4194304").value_or(64 * 1024));
}
}  // namespace

TcpTransport::TcpTransport(TransportHost& host, const TransportConfig& cfg)
    : host_(host), cfg_(cfg), eager_limit_(eager_limit_from_env()), congestion_(tcp::congestion_from_env()), sockets_(sockets_from_env()),
      shared_(shared_from_env(sockets_)), out_(static_cast<std::size_t>(cfg.world_size), nullptr),
      carrier_(new std::atomic<bool>[static_cast<std::size_t>(cfg.world_size)]{}),
      shares_with_(static_cast<std::size_t>(cfg.world_size), 0),
      ending_(static_cast<std::size_t>(cfg.world_size), Ending::None),
      data_ended_(static_cast<std::size_t>(cfg.world_size), 0), switched_(static_cast<std::size_t>(cfg.world_size), 0),
      paused_(static_cast<std::size_t>(cfg.world_size), nullptr),
      listeners_(static_cast<std::size_t>(cfg.world_size)),
      stripes_(static_cast<std::size_t>(cfg.world_size)), turn_(static_cast<std::size_t>(cfg.world_size), 0),
      incoming_(static_cast<std::size_t>(cfg.world_size), 0),
      bye_knew_(static_cast<std::size_t>(cfg.world_size), 0) {
  const std::string here = net::advertised_address(cfg.store_host);
  listen_fd_ = net::listen_on(net::resolve(here, 0));
  tcp::set_congestion(listen_fd_.get(), congestion_);  // the sockets it accepts inherit it
  net::set_nonblocking(listen_fd_.get());
  address_ = net::local_address(listen_fd_.get()).str();
  host_.add_fd(listen_fd_.get(), this, EPOLLIN);
  BRAID_INFO("tcp: listening on {}; {}", address_,
             shared_ ? "one socket per pair of ranks" : fmt::format("{} socket(s) per direction", sockets_));
}

TcpTransport::~TcpTransport() = default;

bool TcpTransport::connected(int peer) const {
  const Connection* c = out_[static_cast<std::size_t>(peer)];
  return c && !c->closed();
}

int TcpTransport::sockets_to(int peer) const {
  if (!connected(peer)) return 0;
  int n = 1;
  for (const Connection* c : stripes_[static_cast<std::size_t>(peer)]) n += c->closed() ? 0 : 1;
  return n;
}

bool TcpTransport::watching(int peer) const {
  // Sharing, the socket we dialed carries the peer's messages too: its end
  // tells as well.
  return incoming_[static_cast<std::size_t>(peer)] > 0 || (shared_ && connected(peer));
}

bool TcpTransport::reaches(const PeerInfo&, std::string*) const { return true; }

namespace {
struct DialedSocket {
  Fd fd;
  wire::FrameHeader hello{};
  auth::Nonce nonce{};  // sent after HELLO where the job has a secret
  bool data_only = false;  // shared: carries this rank's DATA to the peer, nothing else
};
// The sockets dialed to one peer: the first carries every frame, the others
// (stripes) parts of large DATA. The acceptor tells them by nothing: it
// reads every frame the peer's connections bring.
struct DialedSockets final : Dialed {
  std::vector<DialedSocket> sockets;  // sharing, only the one for DATA where the peer's socket carries ours
  std::string listener;               // the peer's listener ("host:port")
};
}  // namespace

ConnectResult TcpTransport::connect(const PeerInfo& peer, Deadline deadline) {
  auto all = std::make_unique<DialedSockets>();
  all->listener = peer.address;
  // Sharing: the socket for messages (none where the peer dialed us first:
  // its socket carries ours too) and one for this rank's DATA. Large
  // messages both ways over one socket serialise on its lock in the kernel
  // (2-rank all_reduce of 1 MiB over loopback: 370-630 us against 245-480
  // with a socket per direction), so each direction's bulk has its own.
  const bool carried = shared_ && carrier_[static_cast<std::size_t>(peer.rank)].load(std::memory_order_acquire);
  const int want = shared_ ? 2 : sockets_;
  const std::string who = fmt::format("rank {}", peer.rank);
  for (int k = carried ? 1 : 0; k < want; ++k) {
    Dialing d = dial_listener(peer, "listener", deadline);
    if (d.failed) {
      if (k == 0) return std::move(*d.failed);
      // Sharing, DATA then goes with the messages.
      if (!shared_) BRAID_WARN("tcp: rank {} took {} of the {} sockets asked for (BRAID_TCP_SOCKETS)", peer.rank, k, sockets_);
      break;
    }
    DialedSocket& s = all->sockets.emplace_back();
    s.fd = std::move(d.fd);
    tcp::set_congestion(s.fd.get(), congestion_);
    s.data_only = shared_ && k == 1;
    const std::uint8_t flags = !shared_ ? 0 : s.data_only ? wire::kHelloDataOnly : wire::kHelloShares;
    s.hello = say_hello(s.fd.get(), deadline, who, &s.nonce, flags);
  }
  return ConnectResult::connected(std::move(all));
}

wire::FrameHeader TcpTransport::say_hello(int fd, Deadline deadline, const std::string& who, auth::Nonce* nonce,
                                          std::uint8_t flags) {
  auto hello = wire::make_header(wire::FrameType::Hello, 0, static_cast<std::int64_t>(cfg_.job_id),
                                 secret_ ? auth::kNonceBytes : 0, static_cast<std::uint64_t>(cfg_.rank),
                                 static_cast<std::uint64_t>(cfg_.world_size));
  hello.reserved = flags;
  net::write_all(fd, &hello, sizeof hello, deadline, who);
  // The answer (AUTH) is read by the connection, not here: the peer may be
  // dialing us at this moment, and neither would make progress to answer.
  if (secret_) {
    *nonce = auth::fresh_nonce();
    net::write_all(fd, nonce->data(), nonce->size(), deadline, who);
  }
  net::set_nonblocking(fd);
  return hello;
}

void TcpTransport::adopt(int peer, std::unique_ptr<Dialed> d) {
  auto& all = static_cast<DialedSockets&>(*d);
  // Where a goodbye on a socket of its own would go (shutdown), though the
  // socket we send over may be one the peer dialed.
  listeners_[static_cast<std::size_t>(peer)] = listener_address(all.listener);
  for (std::size_t k = 0; k < all.sockets.size(); ++k) {
    DialedSocket& s = all.sockets[k];
    auto c = std::make_unique<Connection>(*this, std::move(s.fd), peer, true, next_conn_id_++);
    if (secret_) c->await_auth(s.hello, s.nonce);
    Connection& raw = *c;
    // Nothing of the peer's comes on our DATA socket but its goodbye: it is
    // neither polled nor held back.
    if (s.data_only) c->mark_switched_away();
    const bool messages = !s.data_only && k == 0;
    if (!messages) stripes_[static_cast<std::size_t>(peer)].push_back(c.get());
    else if (!shared_) out_[static_cast<std::size_t>(peer)] = c.get();
    ++conns_changed_;
    conns_.push_back(std::move(c));
    if (messages && shared_) take_carrier(raw);
  }
}

void TcpTransport::take_carrier(Connection& c) {
  const auto p = static_cast<std::size_t>(c.peer());
  Connection*& out = out_[p];
  if (!out || out->closed()) {
    out = &c;
    carrier_[p].store(true, std::memory_order_release);
    return;
  }
  if (out == &c) return;
  // The lower rank's dial wins: both ends pick the same socket whichever
  // order they learn of the two in.
  const bool lower = cfg_.rank < c.peer();
  const bool c_wins = c.dialed() == lower, out_wins = out->dialed() == lower;
  if (c_wins && !out_wins) {
    out->enqueue(nullptr, wire::make_header(wire::FrameType::Switch, 0, 0, 0, 1), 0);
    out = &c;
    c.enqueue(nullptr, wire::make_header(wire::FrameType::Follows, 0, 0, 0), 0);
  } else {
    c.enqueue(nullptr, wire::make_header(wire::FrameType::Switch, 0, 0, 0, 0), 0);
  }
}

void TcpTransport::on_switch(Connection& c, const wire::FrameHeader& h) {
  const auto p = static_cast<std::size_t>(c.peer());
  // Each side moves at most once (to the lower rank's socket): a second
  // SWITCH is a peer out of its protocol.
  if (c.switched_away() || (h.id == 1 && switched_[p]))
    return connection_broken(c, "sent SWITCH twice (one socket per pair)");
  c.mark_switched_away();
  shares_with_[p] = 1;
  ++conns_changed_;  // poll_peer reads it no more
  if (h.id != 1) return;
  if (Connection* y = std::exchange(paused_[p], nullptr)) y->end_wait();
  else switched_[p] = 1;
}

void TcpTransport::on_follows(Connection& c) {
  const auto p = static_cast<std::size_t>(c.peer());
  if (switched_[p]) {  // the old socket is read up to its SWITCH: read on
    switched_[p] = 0;
    return;
  }
  if (paused_[p]) return connection_broken(c, "sent FOLLOWS twice (one socket per pair)");
  // The SWITCH is still on its way on the other socket (perhaps not yet
  // accepted): what follows here waits for it.
  paused_[p] = &c;
  c.wait_for_switch();
  ++switch_waits_;
}

std::string TcpTransport::proof_label(bool acceptor, const wire::FrameHeader& hello) {
  return fmt::format("braid tcp {} job {:#x} rank {} world {}", acceptor ? "acceptor" : "dialer",
                     static_cast<std::uint64_t>(hello.tag), hello.id, hello.id2);
}

bool TcpTransport::probe_gone(const PeerInfo& peer) {
  const auto sa = listener_address(peer.address);
  if (!sa) return false;
  Fd fd = net::connect_once(*sa, Deadline::after(Millis(200)));
  return !fd.valid() && errno == ECONNREFUSED;
}

Connection* TcpTransport::live(std::uint64_t id) const {
  for (auto& c : conns_)
    if (c->id() == id) return c->closed() ? nullptr : c.get();
  return nullptr;
}

void TcpTransport::on_events(std::uint32_t) {
  // The listener: accept everything pending; HELLO identifies the peer later.
  for (;;) {
    int fd = ::accept4(listen_fd_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK)
        BRAID_WARN("tcp: accept failed: {}", errno_text());
      return;
    }
    net::set_nodelay(fd);
    ++conns_changed_;
    conns_.push_back(std::make_unique<Connection>(*this, Fd(fd), -1, false, next_conn_id_++));
  }
}

bool TcpTransport::hello_valid(Connection& c, const wire::FrameHeader& h) {
  const auto peer = static_cast<std::int64_t>(h.id);
  if (static_cast<std::uint64_t>(h.tag) != cfg_.job_id ||
      h.id2 != static_cast<std::uint64_t>(cfg_.world_size) || peer < 0 ||
      peer >= cfg_.world_size || peer == cfg_.rank) {
    BRAID_WARN("tcp: dropping a connection with a foreign HELLO (job {:#x}, rank {}, world {})",
               static_cast<std::uint64_t>(h.tag), peer, h.id2);
    retire(c);
    return false;
  }
  // Both ends must agree on authenticating: a HELLO without a nonce where
  // this job has a secret is a stranger's; one with a nonce where it has
  // none is another job's.
  if ((h.bytes == auth::kNonceBytes) != (secret_ != nullptr) || (h.bytes != 0 && h.bytes != auth::kNonceBytes)) {
    BRAID_WARN("tcp: refusing a connection that claims rank {}: {} ({})", peer,
               secret_ ? "it did not authenticate" : "it authenticates, and this process has no secret", auth::kHint);
    retire(c);
    return false;
  }
  return true;
}

bool TcpTransport::hold_back(int peer) {
  if (!host_.hold_back(peer)) return false;  // the common case, checked first: it is every frame's
  for (const auto& [token, r] : rdv_in_)
    if (r->source == peer) return false;  // its DATA must come in
  // Sharing, the CTS for a send of ours comes on the socket held back.
  if (shared_)
    for (const auto& [token, r] : rts_out_)
      if (r->peer == peer) return false;
  return true;
}

void TcpTransport::resume() {
  // resume() may retire a connection (which moves it out of conns_, freed
  // only by reap()): walk a copy.
  std::vector<Connection*> live;
  for (auto& c : conns_) live.push_back(c.get());
  for (Connection* c : live) c->resume();
}

void TcpTransport::accept_peer(Connection& c, int peer) {
  incoming_[static_cast<std::size_t>(peer)]++;
  ++conns_changed_;  // poll_peer's list of this peer's connections
  const std::uint8_t flags = c.hello_flags();
  // A goodbye's socket needs no polling; DATA's is polled while a
  // rendezvous waits (poll_peer). Neither carries messages.
  // Only a peer that shares dials a socket for DATA alone.
  if (flags & (wire::kHelloShares | wire::kHelloDataOnly)) shares_with_[static_cast<std::size_t>(peer)] = 1;
  if (flags & (wire::kHelloByeOnly | wire::kHelloDataOnly)) c.mark_switched_away();
  else if (shared_ && (flags & wire::kHelloShares)) take_carrier(c);
}

int TcpTransport::poll_peer(int peer) {
  if (polled_.peer != peer || polled_.seen != conns_changed_) {
    polled_.conns.clear();
    polled_.data.clear();
    // The connections the peer writes its messages on: sharing, those it
    // has not switched away from; else those it dialed (what comes back on
    // ours, a CTS, waits for the epoll round that comes every few spins).
    // Sharing, its DATA comes on a socket of its own.
    for (auto& c : conns_) {
      if (c->peer() != peer) continue;
      if (shared_ ? !c->switched_away() : !c->dialed()) polled_.conns.push_back(c.get());
      else if (shared_ && (c->hello_flags() & wire::kHelloDataOnly)) polled_.data.push_back(c.get());
    }
    polled_.peer = peer;
    polled_.seen = conns_changed_;
  }
  if (polled_.conns.empty()) return -1;
  bool got = false;
  // A connection that reading retires changes conns_ (and so the list): stop there.
  for (std::size_t i = 0; i < polled_.conns.size() && polled_.seen == conns_changed_; ++i)
    got |= polled_.conns[i]->poll_read();
  // A DATA socket only while some rendezvous awaits its data: a read that
  // finds nothing is a system call on every poll of a small message.
  if (!rdv_in_.empty())
    for (std::size_t i = 0; i < polled_.data.size() && polled_.seen == conns_changed_; ++i)
      got |= polled_.data[i]->poll_read();
  return got ? 1 : 0;
}

void TcpTransport::send(Request& r) {
  Connection* c = out_[static_cast<std::size_t>(r.peer)];
  if (r.bytes <= eager_limit_) {
    auto h = wire::make_header(wire::FrameType::Eager, r.env.ctx, r.env.tag, r.bytes);
    h.reserved = r.env.dtype;
    h.reserved2 = r.env.shape;
    c->enqueue(&r, h, r.bytes);
    return;
  }
  r.token = next_token_++;
  rts_out_[r.token] = &r;
  // Sharing, its CTS comes on a socket that may be held back (the bound on
  // unexpected bytes): hold_back() now lets it read, once it reads again.
  if (shared_) {
    std::vector<Connection*> theirs;  // (reading may retire one: conns_ changes)
    for (auto& o : conns_)
      if (o->peer() == r.peer) theirs.push_back(o.get());
    for (Connection* o : theirs) o->resume();
  }
  auto h = wire::make_header(wire::FrameType::Rts, r.env.ctx, r.env.tag, r.bytes, r.token);
  h.reserved = r.env.dtype;
  h.reserved2 = r.env.shape;
  c->enqueue(&r, h, 0);
}

void TcpTransport::send_cts(Connection& at, Request* r, std::uint64_t send_token, std::size_t bytes,
                            const Refusal* refused) {
  // Sharing, over the socket the peer reads (its RTS may have come on one
  // it has since switched away from).
  Connection* out = shared_ ? out_[static_cast<std::size_t>(at.peer())] : nullptr;
  Connection& c = out && !out->closed() ? *out : at;
  if (r) {
    r->token = next_token_++;
    rdv_in_[r->token] = r;
    r->source = c.peer();
    r->received = bytes;
    c.enqueue(r, wire::make_header(wire::FrameType::Cts, 0, 0, 0, send_token, r->token), 0);
    return;
  }
  // Dropped: tell the sender not to send it, and whether a receive refused
  // it (its send then fails too: the receive's dtype in the tag, its size
  // in bytes) or nobody wanted it (a poisoned group's).
  auto h = wire::make_header(wire::FrameType::Cts, refused ? refused->shape : 0, refused ? refused->dtype : 0,
                             refused ? refused->bytes : 0, send_token, 0);
  h.reserved = refused ? 1 : 0;
  c.enqueue(nullptr, h, 0);
}

void TcpTransport::on_rts(Connection& c, const wire::FrameHeader& h) {
  const Envelope env{h.ctx, h.tag, h.reserved, h.reserved2};
  const auto bytes = static_cast<std::size_t>(h.bytes);
  Request* r = host_.take_posted(c.peer(), env);
  if (!r) {
    auto u = std::make_unique<Unexpected>();
    u->kind = Unexpected::Kind::Rendezvous;
    u->src = c.peer();
    u->env = env;
    u->bytes = bytes;
    u->transport = this;
    u->channel = c.id();
    u->send_token = h.id;
    host_.add_unexpected(std::move(u));
    return;
  }
  if (auto err = receive_error(*r, c.peer(), env, bytes)) {
    r->source = c.peer();
    host_.complete(*r, err);
    const Refusal by = refusal_of(*r);
    send_cts(c, nullptr, h.id, bytes, &by);
    return;
  }
  send_cts(c, r, h.id, bytes);
}

void TcpTransport::claim(std::unique_ptr<Unexpected> u, Request* r) {
  if (u->kind == Unexpected::Kind::Eager) {
    // Still arriving: the connection finishes it and hands it to r.
    Connection* c = live(u->channel);
    u->waiter = r;
    if (c) c->adopt_partial(std::move(u));
    else if (r) host_.complete(*r, std::make_exception_ptr(Error(
                 ErrorCode::PeerFailure,
                 fmt::format("rank {} failed while its message was arriving", u->src), u->src)));
    return;
  }
  Connection* c = live(u->channel);
  if (!c) {
    if (r)
      host_.complete(*r, std::make_exception_ptr(Error(
          ErrorCode::PeerFailure,
          fmt::format("rank {} disconnected before its announced message could be fetched", u->src),
          u->src)));
    return;
  }
  send_cts(*c, r, u->send_token, u->bytes);
}

void TcpTransport::reject(std::unique_ptr<Unexpected> u, const Refusal& by) {
  if (u->kind == Unexpected::Kind::Rendezvous)
    if (Connection* c = live(u->channel)) return send_cts(*c, nullptr, u->send_token, u->bytes, &by);
  claim(std::move(u), nullptr);
}

void TcpTransport::on_cts(Connection& c, const wire::FrameHeader& h) {
  auto it = rts_out_.find(h.id);
  if (it == rts_out_.end()) return;  // the send was withdrawn (timeout)
  Request& r = *it->second;
  rts_out_.erase(it);
  if (h.id2 == 0) {  // the receiver dropped it: refused by its receive, or not wanted
    host_.complete(r, h.reserved == 1 ? rejected_send(r, Refusal{static_cast<std::uint8_t>(h.tag), h.bytes, h.ctx}) : nullptr);
    return;
  }
  const auto peer = static_cast<std::size_t>(r.peer);
  Connection* out = out_[peer];
  // The sockets to send the data over: the first, and its stripes (only
  // open ones: retire() takes a socket out of stripes_ as it closes it). A
  // message of at least two parts' worth is cut into parts (as many as there
  // are sockets); messages take turns at the sockets they start on, so a
  // stream of single-part messages (the plans' ~512 KiB chunks) spreads over
  // them as well. Only DATA moves: every message is matched by its RTS on the
  // first socket, in order. With one socket (the default) this is the whole
  // message on it.
  // A copy of the list, not a reference into stripes_: a socket that breaks
  // while a part is written is retired (stripes_ changes) but stays
  // allocated until reap().
  std::array<Connection*, kMaxSockets> way{};
  std::size_t ways = 0;
  // Sharing, the one stripe is the socket for this rank's DATA (connect()).
  if (!shared_ || stripes_[peer].empty()) way[ways++] = out && !out->closed() ? out : &c;
  for (Connection* st : stripes_[peer]) way[ways++] = st;
  const std::size_t parts = std::clamp<std::size_t>(r.bytes / kMinPart, 1, ways);
  const std::size_t first = ways == 1 ? 0 : turn_[peer]++ % ways;
  const std::size_t base = r.bytes / parts, extra = r.bytes % parts;
  r.left = parts;
  parts_sent_ += parts;
  for (std::size_t k = 0; k < parts; ++k) {
    const std::size_t offset = k * base + std::min(k, extra), count = base + (k < extra ? 1 : 0);
    way[(first + k) % ways]->enqueue(
        &r, wire::make_header(wire::FrameType::Data, r.env.ctx, static_cast<std::int64_t>(offset), count, r.token, h.id2),
        count, offset);
  }
}

Request* TcpTransport::on_data(const wire::FrameHeader& h) {
  auto it = rdv_in_.find(h.id2);
  if (it == rdv_in_.end()) return nullptr;  // withdrawn: drain it
  Request* r = it->second;
  const auto offset = static_cast<std::uint64_t>(h.tag);
  if (h.bytes == 0 || offset > r->received || h.bytes > r->received - offset ||
      (r->left > 0 && h.bytes > r->left)) {
    rdv_in_.erase(it);
    divert_everywhere(*r);
    host_.complete(*r, std::make_exception_ptr(Error(
        ErrorCode::Transport,
        fmt::format("rank {} sent {} bytes of data at offset {} for a message announced as {} bytes", r->source,
                    h.bytes, offset, r->received),
        r->source)));
    return nullptr;
  }
  if (r->left == 0) r->left = r->received;  // its first part
  return r;
}

void TcpTransport::data_arrived(Request& r, std::size_t bytes) {
  r.left -= std::min(r.left, bytes);
  if (r.left > 0) return;  // more parts on other sockets
  rdv_in_.erase(r.token);
  host_.complete(r);
}

void TcpTransport::divert_everywhere(Request& r) {
  for (auto& c : conns_) c->divert(r);
}

bool TcpTransport::cancel(Request& r) {
  if (r.kind == Request::Kind::Send) {
    if (r.queued) {
      // Its frames may wait on several sockets (a striped DATA): none may
      // be partly written, then all go.
      for (auto& c : conns_)
        if (c->writing(r)) return false;  // partly written: the stream is no longer in step
      for (auto& c : conns_) c->unqueue(r);
    }
    rts_out_.erase(r.token);  // (or it waited for a CTS that never came)
    return true;
  }
  // A receive: waiting for DATA, queued CTS, or payload streaming in.
  rdv_in_.erase(r.token);
  for (auto& c : conns_) {
    if (r.queued) c->unqueue(r);
    c->divert(r);
  }
  return true;
}

}  // namespace braid
