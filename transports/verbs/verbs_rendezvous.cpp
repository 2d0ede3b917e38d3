// The zero-copy path of VerbsTransport: large messages by RDMA READ.
//
//   sender                                   receiver
//   register buf (REMOTE_READ), RTS ------->  matched now, or kept as an
//     {bytes, addr, rkey, token}              Unexpected::Rendezvous until a
//                                             receive claims it
//                                             register its buffer (LOCAL_WRITE)
//                           <== RDMA READ ==  in chunks, at most read_limit
//                                             in flight
//   complete the send  <------------- FIN    complete the receive
//
// What is visible when: the receive completes only after every READ chunk
// completed, i.e. the bytes are in its buffer; the send completes only on
// FIN, i.e. after the receiver stopped reading its buffer. A receive too
// small for the message fails on the receiver, which answers FIN(dropped)
// so the sender completes without error (as the TCP and shm transports do).
#include <cstring>

#include "src/common/errors.hpp"
#include "src/common/log.hpp"
#include "transports/verbs/verbs_conn.hpp"
#include "transports/verbs/verbs_transport.hpp"

namespace braid {

using verbs::MsgHeader;
using verbs::WrKind;

void VerbsTransport::on_rts(Conn& c, const MsgHeader& h) {
  const Envelope env = verbs::envelope_of(h);
  const auto bytes = static_cast<std::size_t>(h.bytes);
  Request* r = host_.take_posted(c.peer, env);
  if (!r) {
    auto u = std::make_unique<Unexpected>();
    u->kind = Unexpected::Kind::Rendezvous;
    u->src = c.peer;
    u->env = env;
    u->bytes = bytes;
    u->transport = this;
    u->send_token = h.token;
    u->remote_addr = h.addr;
    u->remote_key = h.rkey;
    host_.add_unexpected(std::move(u));
    return;
  }
  r->source = c.peer;
  if (auto err = receive_error(*r, c.peer, env, bytes)) {
    host_.complete(*r, err);
    send_fin(c, h.token, verbs::kFinRejected, refusal_of(*r));
    return;
  }
  r->received = bytes;
  start_read(c, *r, h.addr, h.rkey, h.token);
}

void VerbsTransport::claim(std::unique_ptr<Unexpected> u, Request* r) {
  if (u->kind == Unexpected::Kind::Eager) {  // arrives whole: the host copies it itself
    if (r) {
      if (u->bytes) std::memcpy(r->buf, u->data.get(), u->bytes);
      host_.complete(*r);
    }
    return;
  }
  Conn* c = in_[static_cast<std::size_t>(u->src)];
  if (!c || c->state != Conn::State::Ready) {
    if (r)
      host_.complete(*r, std::make_exception_ptr(Error(
          ErrorCode::PeerFailure,
          fmt::format("rank {} disconnected before its announced message could be fetched", u->src), u->src)));
    return;
  }
  if (!r) {  // nobody wants it (a poisoned group's): the sender may let go
    send_fin(*c, u->send_token, verbs::kFinDropped);
    return;
  }
  r->received = u->bytes;
  start_read(*c, *r, u->remote_addr, u->remote_key, u->send_token);
}

void VerbsTransport::start_read(Conn& c, Request& r, std::uint64_t addr, std::uint32_t rkey, std::uint64_t token) {
  if (r.received == 0) {  // nothing to read (an eager limit of 0)
    host_.complete(r);
    send_fin(c, token, verbs::kFinRead);
    return;
  }
  verbs::RegCache::Entry* mr = nullptr;
  try {
    mr = cache_->acquire(r.buf, r.received, IBV_ACCESS_LOCAL_WRITE);
  } catch (const Error&) {
    host_.complete(r, std::current_exception());
    send_fin(c, token, verbs::kFinDropped);
    return;
  }
  std::uint32_t id = next_read_++;
  if (id == 0) id = next_read_++;
  ReadOp op;
  op.conn = c.id;
  op.r = &r;
  op.mr = mr;
  op.send_token = token;
  op.remote_addr = addr;
  op.rkey = rkey;
  op.bytes = r.received;
  reads_[id] = op;
  r.token = id;
  enqueue(c, Outgoing{Outgoing::Kind::Read, nullptr, 0, 0, id});
}

bool VerbsTransport::post_reads(Conn& c, std::uint32_t read_id) {
  auto it = reads_.find(read_id);
  if (it == reads_.end()) return true;  // withdrawn before it started
  ReadOp& op = it->second;
  if (!op.r) return true;  // withdrawn mid-way: its QP is stopped
  while (op.posted < op.bytes) {
    if (c.sq_free == 0 || c.reads_out >= c.read_limit) return false;
    const std::size_t n = std::min<std::size_t>(read_chunk_, op.bytes - op.posted);
    ibv_sge sge{};
    sge.addr = reinterpret_cast<std::uintptr_t>(op.r->buf) + op.posted;
    sge.length = static_cast<std::uint32_t>(n);
    sge.lkey = op.mr->lkey();
    ibv_send_wr wr{};
    wr.wr_id = verbs::wr_id(WrKind::Read, c.id, read_id);
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_RDMA_READ;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.wr.rdma.remote_addr = op.remote_addr + op.posted;
    wr.wr.rdma.rkey = op.rkey;
    ibv_send_wr* bad = nullptr;
    if (int err = ibv_post_send(c.qp.get(), &wr, &bad)) {
      conn_failed(c, fmt::format("cannot post an RDMA READ: {}", errno_text(err)));
      return false;
    }
    --c.sq_free;
    ++c.reads_out;
    op.posted += n;
    ++op.chunks_posted;
  }
  return true;
}

void VerbsTransport::on_read_done(Conn& c, std::uint32_t read_id) {
  auto it = reads_.find(read_id);
  if (it == reads_.end()) return;
  ReadOp& op = it->second;
  ++op.chunks_done;
  if (op.posted < op.bytes || op.chunks_done < op.chunks_posted) return;
  Request* r = op.r;
  const std::uint64_t token = op.send_token;
  cache_->release(op.mr);
  reads_.erase(it);
  if (r) host_.complete(*r);
  send_fin(c, token, verbs::kFinRead);
}

void VerbsTransport::send_fin(Conn& c, std::uint64_t token, std::uint8_t status, const Refusal& refused) {
  Outgoing o;
  o.kind = Outgoing::Kind::Fin;
  o.token = token;
  o.status = status;
  o.refused = refused;
  enqueue(c, o);
}

void VerbsTransport::on_fin(Conn& c, const MsgHeader& h) {
  auto it = rts_out_.find(h.token);
  if (it == rts_out_.end() || it->second.conn != c.id) {
    malformed(c, fmt::format("a FIN for announcement {} it never got", h.token));
    return;
  }
  Request* r = it->second.r;
  cache_->release(it->second.mr);
  rts_out_.erase(it);
  // Read or dropped, the sender is done; refused by its receive, it fails.
  if (r)
    host_.complete(*r, h.status == verbs::kFinRejected
                           ? rejected_send(*r, Refusal{static_cast<std::uint8_t>(h.reserved), h.bytes, h.ctx})
                           : nullptr);
}

void VerbsTransport::reject(std::unique_ptr<Unexpected> u, const Refusal& by) {
  Conn* c = in_[static_cast<std::size_t>(u->src)];
  if (u->kind == Unexpected::Kind::Rendezvous && c && c->state == Conn::State::Ready)
    return send_fin(*c, u->send_token, verbs::kFinRejected, by);
  claim(std::move(u), nullptr);
}

bool VerbsTransport::cancel(Request& r) {
  if (r.kind == Request::Kind::Send) {
    if (Conn* c = out_[static_cast<std::size_t>(r.peer)]) {
      for (auto it = c->pending.begin(); it != c->pending.end(); ++it)
        if (it->kind == Outgoing::Kind::Data && it->r == &r) {
          c->pending.erase(it);
          r.queued = false;
          return true;
        }
    }
    auto it = rts_out_.find(r.token);
    if (it != rts_out_.end() && it->second.r == &r) {
      // Announced: the receiver may be reading the buffer right now. Keep
      // the registration until its FIN; the host aborts the job.
      it->second.r = nullptr;
      return false;
    }
    return true;  // eager sends complete when posted: nothing holds it
  }
  auto it = reads_.find(static_cast<std::uint32_t>(r.token));
  if (it == reads_.end() || it->second.r != &r) return true;  // not matched by this transport
  ReadOp& op = it->second;
  Conn* c = live(op.conn);
  if (op.chunks_posted == 0) {
    // Not started: forget it, and let the sender go.
    if (c) {
      for (auto p = c->pending.begin(); p != c->pending.end(); ++p)
        if (p->kind == Outgoing::Kind::Read && p->read_id == it->first) {
          c->pending.erase(p);
          break;
        }
    }
    const std::uint64_t token = op.send_token;
    cache_->release(op.mr);
    reads_.erase(it);
    if (c) send_fin(*c, token, verbs::kFinDropped);
    return true;
  }
  // READs are in flight into the caller's buffer, which it gets back now:
  // stop the QP so the HCA writes no more. The connection is lost with it;
  // its flush reports the peer failed (after this op's own timeout error).
  op.r = nullptr;
  if (c) {
    c->stop_reason = fmt::format("a receive from it timed out while its data was being read; the connection was stopped");
    verbs::qp_to_error(c->qp.get());
  }
  return false;
}

}  // namespace braid
