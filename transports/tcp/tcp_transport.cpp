#include "tcp_transport.hpp"

#include <sys/epoll.h>
#include <sys/socket.h>

#include <cstdlib>
#include <cstring>

#include "braid/ops.hpp"
#include "common/env.hpp"
#include "common/errors.hpp"
#include "common/log.hpp"
#include "common/socket.hpp"

namespace braid {

namespace {
std::size_t eager_limit_from_env() {
  // 64 KiB: past it the extra round trip of the rendezvous costs less than
  // copying an unexpected message, and unexpected memory stays bounded.
  return static_cast<std::size_t>(env_integer("BRAID_TCP_EAGER_LIMIT", 0, 4 << 20,
                                              "a byte count up to 4194304").value_or(64 * 1024));
}
}  // namespace

TcpTransport::TcpTransport(Engine& engine, const EngineConfig& cfg)
    : e_(engine), cfg_(cfg), eager_limit_(eager_limit_from_env()),
      out_(static_cast<std::size_t>(cfg.world_size), nullptr),
      incoming_(static_cast<std::size_t>(cfg.world_size), 0) {
  const std::string host = net::advertised_address(cfg.store_host);
  listen_fd_ = net::listen_on(net::resolve(host, 0));
  net::set_nonblocking(listen_fd_.get());
  address_ = net::local_address(listen_fd_.get()).str();
  e_.add_fd(listen_fd_.get(), this, EPOLLIN);
  BRAID_INFO("tcp: listening on {}", address_);
}

TcpTransport::~TcpTransport() = default;

bool TcpTransport::connected(int peer) const {
  const Connection* c = out_[static_cast<std::size_t>(peer)];
  return c && !c->closed();
}

bool TcpTransport::has_incoming(int peer) const { return incoming_[static_cast<std::size_t>(peer)] > 0; }

Fd TcpTransport::dial(int peer, const std::string& address, Deadline deadline) {
  // address is "host:port" or "[v6]:port"
  const auto colon = address.rfind(':');
  if (colon == std::string::npos) {
    errno = EINVAL;
    return Fd();
  }
  const net::SockAddr sa = net::resolve(address.substr(0, colon), std::atoi(address.c_str() + colon + 1));
  Fd fd = net::connect_once(sa, deadline);
  if (!fd.valid()) return fd;
  const auto hello = wire::make_header(wire::FrameType::Hello, 0, static_cast<std::int64_t>(cfg_.job_id),
                                       0, static_cast<std::uint64_t>(cfg_.rank),
                                       static_cast<std::uint64_t>(cfg_.world_size));
  net::write_all(fd.get(), &hello, sizeof hello, deadline, fmt::format("rank {}", peer));
  net::set_nonblocking(fd.get());
  return fd;
}

void TcpTransport::adopt_dialed(int peer, Fd fd) {
  auto c = std::make_unique<Connection>(*this, std::move(fd), peer, true);
  out_[static_cast<std::size_t>(peer)] = c.get();
  conns_.push_back(std::move(c));
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
    conns_.push_back(std::make_unique<Connection>(*this, Fd(fd), -1, false));
  }
}

void TcpTransport::on_hello(Connection& c, const wire::FrameHeader& h) {
  const auto peer = static_cast<std::int64_t>(h.id);
  if (static_cast<std::uint64_t>(h.tag) != cfg_.job_id ||
      h.id2 != static_cast<std::uint64_t>(cfg_.world_size) || peer < 0 ||
      peer >= cfg_.world_size || peer == cfg_.rank) {
    BRAID_WARN("tcp: dropping a connection with a foreign HELLO (job {:#x}, rank {}, world {})",
               static_cast<std::uint64_t>(h.tag), peer, h.id2);
    retire(c);
    return;
  }
  incoming_[static_cast<std::size_t>(peer)]++;
}

void TcpTransport::send(Request& r) {
  Connection* c = out_[static_cast<std::size_t>(r.peer)];
  if (r.bytes <= eager_limit_) {
    r.frame = wire::make_header(wire::FrameType::Eager, r.env.ctx, r.env.tag, r.bytes);
    r.frame.reserved = r.env.dtype;
    r.frame_payload = r.bytes;
  } else {
    r.token = next_token_++;
    rts_out_[r.token] = &r;
    r.frame = wire::make_header(wire::FrameType::Rts, r.env.ctx, r.env.tag, r.bytes, r.token);
    r.frame.reserved = r.env.dtype;
    r.frame_payload = 0;
  }
  c->enqueue(r);
}

void TcpTransport::send_cts(Connection& c, Request* r, std::uint64_t send_token, std::size_t bytes) {
  if (r) {
    r->token = next_token_++;
    rdv_in_[r->token] = r;
    r->source = c.peer();
    r->received = bytes;
    r->frame = wire::make_header(wire::FrameType::Cts, 0, 0, 0, send_token, r->token);
    r->frame_payload = 0;
    c.enqueue(*r);
    return;
  }
  // Dropped (the receive was too small): tell the sender not to send it.
  auto ctl = std::make_unique<Request>();
  ctl->transport_owned = true;
  ctl->frame = wire::make_header(wire::FrameType::Cts, 0, 0, 0, send_token, 0);
  c.enqueue(*ctl);
  // Keep it until reap(): it may still sit in the queue.
  control_.push_back(std::move(ctl));
}

void TcpTransport::on_rts(Connection& c, const wire::FrameHeader& h) {
  const Envelope env{h.ctx, h.tag, h.reserved};
  const auto bytes = static_cast<std::size_t>(h.bytes);
  Request* r = e_.matcher().take_posted(c.peer(), env);
  if (!r) {
    auto u = std::make_unique<Unexpected>();
    u->kind = Unexpected::Kind::Rendezvous;
    u->src = c.peer();
    u->env = env;
    u->bytes = bytes;
    u->transport = this;
    u->conn = &c;
    u->send_token = h.id;
    e_.matcher().add_unexpected(std::move(u));
    return;
  }
  if (auto err = receive_error(*r, c.peer(), env, bytes)) {
    r->source = c.peer();
    e_.complete(*r, err);
    r = nullptr;
  }
  send_cts(c, r, h.id, bytes);
}

void TcpTransport::claim(std::unique_ptr<Unexpected> u, Request* r) {
  if (u->kind == Unexpected::Kind::Eager) {
    // Still arriving: the connection finishes it and hands it to r.
    Connection* c = u->conn;
    u->waiter = r;
    if (c && !c->closed()) c->adopt_partial(std::move(u));
    else if (r) e_.complete(*r, std::make_exception_ptr(Error(
                 ErrorCode::PeerFailure,
                 fmt::format("rank {} failed while its message was arriving", u->src), u->src)));
    return;
  }
  Connection* c = u->conn;
  if (!c || c->closed()) {
    if (r)
      e_.complete(*r, std::make_exception_ptr(Error(
          ErrorCode::PeerFailure,
          fmt::format("rank {} disconnected before its announced message could be fetched", u->src),
          u->src)));
    return;
  }
  send_cts(*c, r, u->send_token, u->bytes);
}

void TcpTransport::on_cts(Connection& c, const wire::FrameHeader& h) {
  auto it = rts_out_.find(h.id);
  if (it == rts_out_.end()) return;  // the send was withdrawn (timeout)
  Request& r = *it->second;
  rts_out_.erase(it);
  if (h.id2 == 0) {  // the receiver dropped it: the error is theirs to report
    e_.complete(r);
    return;
  }
  r.frame = wire::make_header(wire::FrameType::Data, r.env.ctx, r.env.tag, r.bytes, r.token, h.id2);
  r.frame_payload = r.bytes;
  Connection* out = out_[static_cast<std::size_t>(r.peer)];
  (out && !out->closed() ? *out : c).enqueue(r);
}

Request* TcpTransport::on_data(const wire::FrameHeader& h) {
  auto it = rdv_in_.find(h.id2);
  if (it == rdv_in_.end()) return nullptr;  // withdrawn: drain it
  Request* r = it->second;
  rdv_in_.erase(it);
  if (h.bytes != r->received) {
    e_.complete(*r, std::make_exception_ptr(Error(
        ErrorCode::Transport,
        fmt::format("rank {} sent {} bytes of data for a message announced as {} bytes", r->source,
                    h.bytes, r->received),
        r->source)));
    return nullptr;
  }
  return r;
}

bool TcpTransport::cancel(Request& r) {
  if (r.kind == Request::Kind::Send) {
    if (r.queued) {
      if (r.conn && r.conn->unqueue(r)) {
        rts_out_.erase(r.token);
        return true;
      }
      return false;  // partly written: the stream is no longer in step
    }
    rts_out_.erase(r.token);  // waiting for a CTS that never came
    return true;
  }
  // A receive: waiting for DATA, queued CTS, or payload streaming in.
  rdv_in_.erase(r.token);
  if (r.queued && r.conn) r.conn->unqueue(r);
  for (auto& c : conns_) c->divert(r);
  return true;
}

void TcpTransport::fail_requests_of(Connection& c, const std::exception_ptr& e) {
  c.for_each_queued([&](Request& r) {
    r.queued = false;
    if (!r.transport_owned) e_.complete(r, e);
  });
  c.clear_queue();
  if (Request* r = c.reading_request()) {
    c.divert(*r);
    e_.complete(*r, e);
  }
}

void TcpTransport::retire(Connection& c) {
  if (c.closed()) return;
  if (c.peer() >= 0 && !c.dialed()) incoming_[static_cast<std::size_t>(c.peer())]--;
  if (c.peer() >= 0 && out_[static_cast<std::size_t>(c.peer())] == &c)
    out_[static_cast<std::size_t>(c.peer())] = nullptr;
  // Announced messages from it can no longer be fetched.
  for (auto& u : e_.matcher().unexpected())
    if (u->conn == &c) u->conn = nullptr;
  c.close();
  for (auto it = conns_.begin(); it != conns_.end(); ++it)
    if (it->get() == &c) {
      retired_.push_back(std::move(*it));
      conns_.erase(it);
      break;
    }
}

void TcpTransport::connection_broken(Connection& c, const std::string& why) {
  // The job aborts: every request, this connection's included, fails with the
  // one abort error (which names the root cause once it is known).
  const int peer = c.peer();
  e_.peer_failed(peer, why);
  retire(c);
}

void TcpTransport::connection_closed_cleanly(Connection& c) {
  const int peer = c.peer();
  // Only the peer's own (dialed) connection carries its messages to us; the
  // goodbye on ours can overtake data still arriving on theirs.
  if (c.dialed()) {
    fail_requests_of(c, std::make_exception_ptr(Error(
        ErrorCode::PeerFailure,
        fmt::format("rank {} left the job (destroy_process_group) while a send to it was pending", peer),
        peer)));
    retire(c);
    return;
  }
  auto e = std::make_exception_ptr(Error(
      ErrorCode::PeerFailure,
      fmt::format("rank {} left the job (destroy_process_group) while this op was pending", peer), peer));
  fail_requests_of(c, e);
  retire(c);
  e_.peer_left(peer);
}

void TcpTransport::drop_peer(int peer) {
  std::vector<Connection*> doomed;
  for (auto& c : conns_)
    if (c->peer() == peer) doomed.push_back(c.get());
  for (Connection* c : doomed) retire(*c);
}

void TcpTransport::fail_all(const std::exception_ptr& e) {
  for (auto& c : conns_) fail_requests_of(*c, e);
  for (auto& [tok, r] : rts_out_) e_.complete(*r, e);
  rts_out_.clear();
  for (auto& [tok, r] : rdv_in_) e_.complete(*r, e);
  rdv_in_.clear();
}

void TcpTransport::shutdown() {
  // Goodbye on every socket whose queue is empty, so peers can tell a clean
  // exit from a crash. Best effort, bounded: a dead peer must not stall us.
  const auto bye = wire::make_header(wire::FrameType::Bye, 0, 0, 0);
  const Deadline d = Deadline::after(Millis(1000));
  for (auto& c : conns_) {
    if (c->closed() || c->peer() < 0) continue;
    bool idle = true;
    c->for_each_queued([&](Request&) { idle = false; });
    if (!idle) continue;
    try {
      net::write_all(c->fd(), &bye, sizeof bye, d, "peer");
    } catch (const Error&) {
    }
  }
  while (!conns_.empty()) retire(*conns_.back());
  e_.del_fd(listen_fd_.get());
  listen_fd_.reset();
}

void TcpTransport::reap() {
  retired_.clear();
  std::erase_if(control_, [](const std::unique_ptr<Request>& r) { return !r->queued; });
}

}  // namespace braid
