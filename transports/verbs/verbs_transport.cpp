// VerbsTransport: construction, completions, incoming messages, and the
// eager send path with its credits (the file layout is in verbs_transport.hpp).
#include "transports/verbs/verbs_transport.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "src/common/env.hpp"
#include "src/common/errors.hpp"
#include "src/common/log.hpp"
#include "src/common/socket.hpp"
#include "transports/verbs/verbs_conn.hpp"

namespace braid {

using verbs::buffer_bytes;
using verbs::kCreditBatch;
using verbs::kCredits;
using verbs::kHeader;
using verbs::kSendWr;
using verbs::kSlots;
using verbs::MsgHeader;
using verbs::MsgType;
using verbs::WrKind;

namespace {
std::size_t eager_limit_from_env() {
  return static_cast<std::size_t>(env_integer("BRAID_IB_EAGER_LIMIT", 0, 256 << 10,
                                              "a byte count up to 262144").value_or(16 * 1024));
}

const char* wr_name(WrKind k) {
  switch (k) {
    case WrKind::Recv: return "RDMA receive";
    case WrKind::Send: return "RDMA send";
    case WrKind::Read: return "RDMA READ";
  }
  return "RDMA operation";
}

std::string completion_error(const ibv_wc& wc) {
  std::string hint;
  switch (wc.status) {
    case IBV_WC_RETRY_EXC_ERR: hint = ": its adapter stopped answering (dead host, link down or wrong GID/route)"; break;
    case IBV_WC_REM_ACCESS_ERR: hint = ": it refused access to its memory"; break;
    case IBV_WC_RNR_RETRY_EXC_ERR: hint = ": it had no receive buffer posted"; break;
    case IBV_WC_WR_FLUSH_ERR: hint = ": the queue pair was flushed"; break;
    default: break;
  }
  return fmt::format("{} failed with '{}' (status {}, vendor error {:#x}){}", wr_name(verbs::wr_kind(wc.wr_id)),
                     ibv_wc_status_str(wc.status), static_cast<int>(wc.status), wc.vendor_err, hint);
}

}  // namespace

class VerbsTransport::CqWatch final : public EventSource {
 public:
  explicit CqWatch(VerbsTransport& t) : t_(t) {}
  void on_events(std::uint32_t) override { t_.on_cq_event(); }

 private:
  VerbsTransport& t_;
};

// --- set-up -------------------------------------------------------------------

VerbsTransport::VerbsTransport(TransportHost& host, const TransportConfig& cfg)
    : host_(host), cfg_(cfg), eager_limit_(eager_limit_from_env()),
      out_(static_cast<std::size_t>(cfg.world_size), nullptr),
      in_(static_cast<std::size_t>(cfg.world_size), nullptr) {
  std::string why;
  dev_ = verbs::open_device(&why);
  if (!dev_) throw Error(ErrorCode::NotSupported, fmt::format("backend 'verbs': {}", why));
  pd_.reset(ibv_alloc_pd(dev_->ctx.get()));
  if (!pd_) fail(ErrorCode::Transport, "verbs: ibv_alloc_pd on {} failed: {}", dev_->name, errno_text());
  channel_.reset(ibv_create_comp_channel(dev_->ctx.get()));
  if (!channel_) fail(ErrorCode::Transport, "verbs: ibv_create_comp_channel failed: {}", errno_text());
  ::fcntl(channel_->fd, F_SETFL, ::fcntl(channel_->fd, F_GETFL) | O_NONBLOCK);
  // One CQ for every QP: at most one connection each way per peer.
  const std::size_t per_conn = kSendWr + verbs::receive_depth(kCredits, kCreditBatch);
  const std::size_t want = std::max<std::size_t>(256, 2 * static_cast<std::size_t>(cfg.world_size - 1) * per_conn + 64);
  const int cqe = static_cast<int>(std::min<std::size_t>(want, static_cast<std::size_t>(dev_->attr.max_cqe)));
  if (static_cast<std::size_t>(cqe) < want)
    BRAID_WARN("verbs: {} allows {} completion entries, fewer than {} for {} ranks: keep traffic to fewer peers",
               dev_->name, cqe, want, cfg.world_size);
  cq_.reset(ibv_create_cq(dev_->ctx.get(), cqe, nullptr, channel_.get(), 0));
  if (!cq_) fail(ErrorCode::Transport, "verbs: ibv_create_cq({}) failed: {}", cqe, errno_text());
  slots_ = std::make_unique<verbs::SendSlots>(pd_.get(), kSlots, buffer_bytes(eager_limit_));
  cache_ = std::make_unique<verbs::RegCache>(pd_.get());
  read_chunk_ = static_cast<std::uint32_t>(std::min<std::uint64_t>(dev_->port_attr.max_msg_sz, 4u << 20));
  if (read_chunk_ == 0) read_chunk_ = 1u << 20;

  listen_fd_ = net::listen_on(net::resolve(net::advertised_address(cfg.store_host), 0));
  net::set_nonblocking(listen_fd_.get());
  address_ = net::local_address(listen_fd_.get()).str();
  host_.add_fd(listen_fd_.get(), this, EPOLLIN);
  cq_watch_ = std::make_unique<CqWatch>(*this);
  host_.add_fd(channel_->fd, cq_watch_.get(), EPOLLIN);
  BRAID_INFO("verbs: {} port {}, handshakes on {}, eager limit {} bytes", dev_->name, dev_->port, address_,
             eager_limit_);
}

std::unique_ptr<VerbsTransport> VerbsTransport::try_create(TransportHost& host, const TransportConfig& cfg) {
  try {
    return std::make_unique<VerbsTransport>(host, cfg);
  } catch (const Error& e) {
    if (e.code() == ErrorCode::InvalidArgument) throw;  // a malformed BRAID_IB_* variable
    BRAID_INFO("verbs: not used: {}", e.what());
    return nullptr;
  }
}

VerbsTransport::~VerbsTransport() {
  // QPs must go before the CQ they complete on.
  conns_.clear();
  retired_.clear();
}

// --- completions ---------------------------------------------------------------

void VerbsTransport::on_cq_event() {
  ibv_cq* cq = nullptr;
  void* ctx = nullptr;
  while (ibv_get_cq_event(channel_.get(), &cq, &ctx) == 0) {
    ibv_ack_cq_events(cq, 1);
    armed_ = false;
  }
  // The host calls poll() after dispatching events.
}

bool VerbsTransport::drain_cq() {
  bool any = false;
  ibv_wc wc[32];
  for (int round = 0; round < 64; ++round) {
    const int n = ibv_poll_cq(cq_.get(), 32, wc);
    if (n < 0) {
      BRAID_WARN("verbs: ibv_poll_cq failed ({})", n);
      break;
    }
    for (int i = 0; i < n; ++i) handle_completion(wc[i]);
    if (n > 0) any = dirty_ = true;
    if (n < 32) break;
  }
  return any;
}

void VerbsTransport::handle_completion(const ibv_wc& wc) {
  const WrKind kind = verbs::wr_kind(wc.wr_id);
  const std::uint32_t index = verbs::wr_index(wc.wr_id);
  Conn* c = live(verbs::wr_conn(wc.wr_id));
  // A retired connection's slots went back when it was retired; anything
  // still completing for it (flushes) is ignored.
  if (!c) return;
  if (kind == WrKind::Send) {
    slots_->release(index);
    ++c->sq_free;
    if (index == c->bye_slot && wc.status == IBV_WC_SUCCESS) c->bye_acked = true;
  } else if (kind == WrKind::Read) {
    ++c->sq_free;
    --c->reads_out;
  }
  if (wc.status != IBV_WC_SUCCESS) {
    conn_failed(*c, c->stop_reason.empty() ? completion_error(wc) : c->stop_reason);
    return;
  }
  switch (kind) {
    case WrKind::Recv: on_message(*c, index, wc.byte_len); break;
    case WrKind::Read: on_read_done(*c, index); break;
    case WrKind::Send: break;
  }
}

void VerbsTransport::on_message(Conn& c, std::uint32_t index, std::uint32_t len) {
  if (index >= c.rx->count() || len < kHeader || len > c.rx->bytes()) {
    malformed(c, fmt::format("a message of {} bytes", len));
    return;
  }
  const std::uint8_t* buf = c.rx->buffer(index);
  MsgHeader h;
  std::memcpy(&h, buf, kHeader);
  if (!c.credits.give_back(h.credits)) {
    malformed(c, fmt::format("{} credits returned that were never lent", h.credits));
    return;
  }
  const auto type = static_cast<MsgType>(h.type);
  // Data flows only from the dialer; FIN only back to it.
  switch (type) {
    case MsgType::Eager:
      if (c.dialed) return malformed(c, "data on the connection we dialed");
      if (h.bytes != len - kHeader) return malformed(c, fmt::format("an eager header of {} bytes in {}", h.bytes, len));
      deliver_eager(c, h, buf + kHeader);
      break;
    case MsgType::Rts:
      if (c.dialed) return malformed(c, "an announcement on the connection we dialed");
      on_rts(c, h);
      break;
    case MsgType::Fin:
      if (!c.dialed) return malformed(c, "a FIN on the connection it dialed");
      on_fin(c, h);
      break;
    case MsgType::Credit:
      break;
    case MsgType::Bye:
      c.bye_seen = true;
      break;
    default:
      return malformed(c, fmt::format("a message of unknown type {}", h.type));
  }
  if (c.state == Conn::State::Closed) return;
  // Copied out: the buffer goes back to the HCA, the credit to the peer.
  if (int err = c.rx->post(c.qp.get(), index, verbs::wr_id(WrKind::Recv, c.id, index))) {
    conn_failed(c, fmt::format("cannot re-post a receive buffer: {}", errno_text(err)));
    return;
  }
  if (verbs::needs_credit(type) && !c.credits.consumed_one()) malformed(c, "more messages than it had credits for");
}

void VerbsTransport::deliver_eager(Conn& c, const MsgHeader& h, const std::uint8_t* payload) {
  host_.deliver_arrived(c.peer, verbs::envelope_of(h), payload, static_cast<std::size_t>(h.bytes), this);
}

// --- sending -----------------------------------------------------------------

void VerbsTransport::send(Request& r) {
  Conn* c = out_[static_cast<std::size_t>(r.peer)];
  if (!c || !c->usable()) {
    host_.complete(r, std::make_exception_ptr(Error(
        ErrorCode::PeerFailure, fmt::format("the verbs connection to rank {} was lost", r.peer), r.peer)));
    return;
  }
  r.queued = true;
  enqueue(*c, Outgoing{Outgoing::Kind::Data, &r});
}

void VerbsTransport::enqueue(Conn& c, Outgoing o) {
  c.pending.push_back(o);
  dirty_ = true;
  if (c.pending.size() == 1) flush(c);
}

bool VerbsTransport::post_message(Conn& c, MsgHeader h, const void* payload, std::size_t n) {
  const std::uint32_t slot = slots_->take(c.id);
  if (slot == verbs::SendSlots::kNone) return false;
  h.credits = c.credits.take_owed();
  std::uint8_t* buf = slots_->buffer(slot);
  std::memcpy(buf, &h, kHeader);
  if (n) std::memcpy(buf + kHeader, payload, n);
  ibv_sge sge{};
  sge.addr = reinterpret_cast<std::uintptr_t>(buf);
  sge.length = static_cast<std::uint32_t>(kHeader + n);
  sge.lkey = slots_->lkey();
  ibv_send_wr wr{};
  wr.wr_id = verbs::wr_id(WrKind::Send, c.id, slot);
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_SEND;
  wr.send_flags = IBV_SEND_SIGNALED;
  ibv_send_wr* bad = nullptr;
  if (int err = ibv_post_send(c.qp.get(), &wr, &bad)) {
    slots_->release(slot);
    conn_failed(c, fmt::format("ibv_post_send failed: {}", errno_text(err)));
    return false;
  }
  --c.sq_free;
  if (verbs::needs_credit(static_cast<MsgType>(h.type))) c.credits.spend();
  if (static_cast<MsgType>(h.type) == MsgType::Bye) c.bye_slot = slot;
  return true;
}

bool VerbsTransport::post_data(Conn& c, Request& r) {
  MsgHeader h{};
  verbs::put_envelope(h, r.env);
  h.bytes = r.bytes;
  if (r.bytes <= c.eager_limit) {
    h.type = static_cast<std::uint8_t>(MsgType::Eager);
    if (!post_message(c, h, r.buf, r.bytes)) return false;
    r.queued = false;
    host_.complete(r);  // copied: the caller's buffer is free
    return true;
  }
  verbs::RegCache::Entry* mr = nullptr;
  try {
    mr = cache_->acquire(r.buf, r.bytes, IBV_ACCESS_REMOTE_READ);
  } catch (const Error&) {
    r.queued = false;
    host_.complete(r, std::current_exception());
    return true;  // consumed (failed), nothing posted
  }
  h.type = static_cast<std::uint8_t>(MsgType::Rts);
  h.token = next_token_++;
  h.addr = reinterpret_cast<std::uintptr_t>(r.buf);
  h.rkey = mr->rkey();
  if (!post_message(c, h, nullptr, 0)) {
    cache_->release(mr);
    return false;
  }
  r.queued = false;
  r.token = h.token;
  rts_out_[h.token] = RtsOut{&r, mr, c.id};
  return true;
}

bool VerbsTransport::flush(Conn& c) {
  bool any = false;
  while (c.state == Conn::State::Ready && !c.pending.empty()) {
    Outgoing& o = c.pending.front();
    if (o.kind == Outgoing::Kind::Read) {
      if (!post_reads(c, o.read_id)) break;
      c.pending.pop_front();
      any = true;
      continue;
    }
    const bool counted = o.kind != Outgoing::Kind::Bye;
    if ((counted && !c.credits.can_send()) || c.sq_free == 0 || !slots_->any_free()) break;
    bool posted = false;
    switch (o.kind) {
      case Outgoing::Kind::Data:
        posted = post_data(c, *o.r);
        break;
      case Outgoing::Kind::Fin: {
        MsgHeader h{};
        h.type = static_cast<std::uint8_t>(MsgType::Fin);
        h.status = o.status;
        h.token = o.token;
        h.bytes = o.refused.bytes;     // a refusing receive's size, dtype and
        h.reserved = o.refused.dtype;  // call fingerprint (kFinRejected)
        h.ctx = o.refused.shape;
        posted = post_message(c, h, nullptr, 0);
        break;
      }
      case Outgoing::Kind::Bye: {
        MsgHeader h{};
        h.type = static_cast<std::uint8_t>(MsgType::Bye);
        posted = post_message(c, h, nullptr, 0);
        break;
      }
      case Outgoing::Kind::Read:
        break;
    }
    if (!posted) break;
    c.pending.pop_front();
    any = true;
  }
  return any;
}

bool VerbsTransport::send_credits(Conn& c) {
  // Owed credits that found no message to ride on go alone.
  if (c.state != Conn::State::Ready || !c.credits.should_return() || c.sq_free == 0 || !slots_->any_free())
    return false;
  MsgHeader h{};
  h.type = static_cast<std::uint8_t>(MsgType::Credit);
  return post_message(c, h, nullptr, 0);
}

bool VerbsTransport::poll() {
  if (shut_) return false;
  bool any = drain_cq();
  if (!dirty_) return any;
  dirty_ = false;
  const auto now = Clock::now();
  // Index loop: a failure may retire connections (never erase from conns_
  // before reap, but retire() moves them; re-check the bound each time).
  for (std::size_t i = 0; i < conns_.size(); ++i) {
    Conn& c = *conns_[i];
    if (c.state == Conn::State::Ready) {
      any |= flush(c);
      any |= send_credits(c);
      if (!c.pending.empty() || c.credits.should_return()) dirty_ = true;  // blocked: try again
    } else if (c.state == Conn::State::Eof) {
      if (c.bye_seen) {
        closed_cleanly(c);
        any = true;
      } else if (now >= c.eof_deadline) {
        conn_failed(c, "its verbs connection socket closed without goodbye (the process exited or was killed)");
        any = true;
      } else {
        dirty_ = true;
      }
    }
  }
  return any;
}

bool VerbsTransport::prepare_sleep() {
  if (shut_) return true;
  if (!armed_) {
    if (ibv_req_notify_cq(cq_.get(), 0) != 0) return false;  // cannot sleep on it: keep polling
    armed_ = true;
  }
  // A completion that arrived before arming raised no event: look again.
  // Work blocked on credits, slots or send-queue space needs no wake-up of
  // its own: what unblocks it arrives through the CQ. A connection in Eof is
  // settled on the host's next progress round (it wakes at least every slice).
  return !drain_cq();
}

}  // namespace braid
