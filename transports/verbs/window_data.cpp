// verbs::Window's data path: describing buffers, READ and WRITE, signals,
// ledger updates, completions and liveness (window.hpp).
#include <sched.h>

#include <algorithm>
#include <cstring>

#include "src/common/errors.hpp"
#include "transports/verbs/window.hpp"
#include "transports/verbs/window_layout.hpp"

namespace braid::verbs {

namespace {

// wr_id: the peer in the high half, then what completed.
enum Kind : std::uint64_t { kSlotWrite = 1, kData = 2, kProbe = 3 };
std::uint64_t tag(int peer, Kind kind, int slot = 0) {
  return std::uint64_t(static_cast<std::uint32_t>(peer)) << 32 | std::uint64_t{kind} << 24 |
         static_cast<std::uint32_t>(slot);
}

}  // namespace

std::atomic<std::uint32_t>& Window::line(int writer) const {
  return *reinterpret_cast<std::atomic<std::uint32_t>*>(block_.get() + Layout(size()).line(writer));
}

// --- completions -------------------------------------------------------------------

void Window::poll() {
  ibv_wc wc[16];
  int got;
  while ((got = ibv_poll_cq(cq_.get(), 16, wc)) > 0) {
    for (int i = 0; i < got; ++i) {
      const auto peer = static_cast<std::size_t>(wc[i].wr_id >> 32);
      const auto kind = (wc[i].wr_id >> 24) & 0xff;
      const auto slot = static_cast<std::size_t>(wc[i].wr_id & 0xffffff);
      if (peer >= peers_.size()) continue;
      Peer& p = peers_[peer];
      if (p.posted) --p.posted;
      if (kind == kSlotWrite && slot < slot_busy_.size()) slot_busy_[slot] = false;
      if (kind == kProbe) p.probing = false;
      if (wc[i].status != IBV_WC_SUCCESS && p.error.empty())
        p.error = fmt::format("{} (status {})", ibv_wc_status_str(wc[i].status), static_cast<int>(wc[i].status));
    }
  }
}

void Window::peer_failed(int peer, const char* what) const {
  const int rank = world_rank(peer);
  throw Error(ErrorCode::PeerFailure,
              fmt::format("RDMA window: rank {} is gone or unreachable ({} failed: {})", rank, what,
                          peers_[static_cast<std::size_t>(peer)].error),
              rank);
}

void Window::drain(int peer, const char* what, bool ask_host) {
  Peer& p = peers_[static_cast<std::size_t>(peer)];
  const auto end = Clock::now() + kOpTimeout;
  for (unsigned k = 0; p.posted > 0; ++k) {
    poll();
    if (!p.error.empty()) peer_failed(peer, what);
    if (p.posted == 0) break;
    if (k > 64) {
      // A peer that died with our WRITE in flight: on Soft-RoCE the WRITE
      // never fails, so ask the host (window.hpp, "Liveness").
      if (ask_host) ask_host_now_and_then(peer);
      if (Clock::now() >= end)
        fail_peer(ErrorCode::Timeout, world_rank(peer), "RDMA window: {} at rank {} did not complete in {} s", what,
                  world_rank(peer), std::chrono::duration_cast<std::chrono::seconds>(kOpTimeout).count());
      sched_yield();
    }
  }
  if (!p.error.empty()) peer_failed(peer, what);
}

void Window::drain_all() {
  for (int q = 0; q < size(); ++q)
    if (q != me_ && peers_[static_cast<std::size_t>(q)].error.empty()) try {
        drain(q, "finishing", false);
      } catch (const Error&) {
        // Failed or timed out: its QP is torn down with the window anyway.
      }
}

void Window::post(int peer, ibv_wr_opcode op, std::uint64_t local_addr, std::uint32_t lkey, std::uint64_t remote,
                  std::uint32_t rkey, std::size_t bytes, std::uint64_t id) {
  Peer& p = peers_[static_cast<std::size_t>(peer)];
  // Room in the send queue: completions free it.
  const auto end = Clock::now() + kOpTimeout;
  while (p.posted + 1 >= kSendWr) {
    poll();
    if (!p.error.empty()) peer_failed(peer, "an RDMA operation");
    if (Clock::now() >= end)
      fail_peer(ErrorCode::Timeout, world_rank(peer), "RDMA window: the send queue to rank {} stays full",
                world_rank(peer));
    sched_yield();
  }
  ibv_sge sge{};
  sge.addr = local_addr;
  sge.length = static_cast<std::uint32_t>(bytes);
  sge.lkey = lkey;
  ibv_send_wr wr{};
  wr.wr_id = id;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = op;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.rdma.remote_addr = remote;
  wr.wr.rdma.rkey = rkey;
  ibv_send_wr* bad = nullptr;
  if (int err = ibv_post_send(p.qp.get(), &wr, &bad))
    fail_peer(ErrorCode::Transport, world_rank(peer), "RDMA window: posting to rank {} failed: {}", world_rank(peer),
              errno_text(err));
  ++p.posted;
}

int Window::take_slot() {
  const auto end = Clock::now() + kOpTimeout;
  for (;;) {
    for (int k = 0; k < kStagingSlots; ++k) {
      const int s = (next_slot_ + k) % kStagingSlots;
      if (!slot_busy_[static_cast<std::size_t>(s)]) {
        slot_busy_[static_cast<std::size_t>(s)] = true;
        next_slot_ = (s + 1) % kStagingSlots;
        return s;
      }
    }
    poll();
    if (Clock::now() >= end) fail(ErrorCode::Timeout, "RDMA window: no staging slot came free in time");
    sched_yield();
  }
}

// --- the ledger's mirror --------------------------------------------------------

void Window::push(const void* field, std::size_t bytes, bool ordered) {
  const Layout lay(size());
  const auto* mine = block_.get() + lay.ledger(me_);
  const std::size_t off = lay.ledger(me_) + static_cast<std::size_t>(static_cast<const std::uint8_t*>(field) - mine);
  for (int q = 0; q < size(); ++q) {
    Peer& p = peers_[static_cast<std::size_t>(q)];
    if (q == me_ || !p.error.empty()) continue;
    // Never throws: an update that cannot reach a peer is that peer's
    // problem, seen by whoever waits on it.
    try {
      if (ordered) drain(q, "a ledger update");
      const int s = take_slot();
      std::memcpy(block_.get() + lay.slot(s), field, bytes);
      post(q, IBV_WR_RDMA_WRITE, local(lay.slot(s)), block_mr_->lkey, p.block + off, p.rkey, bytes,
           tag(q, kSlotWrite, s));
    } catch (const Error& e) {
      if (p.error.empty()) p.error = e.what();
    }
  }
}

// --- signals ------------------------------------------------------------------------

void Window::signal(int peer) {
  const auto i = static_cast<std::size_t>(peer);
  // Everything before it (puts, ledger updates) is placed in the peer's
  // memory first: see "Ordering" in window.hpp.
  drain(peer, "signalling");
  const Layout lay(size());
  const int s = take_slot();
  const std::uint32_t count = ++sent_[i];
  std::memcpy(block_.get() + lay.slot(s), &count, sizeof count);
  post(peer, IBV_WR_RDMA_WRITE, local(lay.slot(s)), block_mr_->lkey, peers_[i].block + lay.line(me_),
       peers_[i].rkey, sizeof count, tag(peer, kSlotWrite, s));
}

// --- memory ---------------------------------------------------------------------------

onesided::BufDesc Window::describe(const void* p, std::size_t bytes) {
  onesided::BufDesc d;
  d.addr = reinterpret_cast<std::uint64_t>(p);
  d.bytes = bytes;
  if (!p || !bytes) return d;
  RegCache::Entry* e = reg_->acquire(p, bytes, kAccess);
  held_[parity_].push_back(e);
  d.base = e->start;
  d.size = e->end - e->start;
  d.rkey = e->rkey();
  return d;
}

char* Window::scratch(int parity, std::size_t bytes, std::uint64_t ticket, onesided::BufDesc* desc) {
  // What the call two before this one described: every peer has completed
  // it (the caller waited for writable_after), so nobody reads it now.
  parity_ = parity;
  for (RegCache::Entry* e : held_[parity]) reg_->release(e);
  held_[parity].clear();
  std::erase_if(retired_, [&](const Retired& r) { return ledger_.all_completed(r.until); });
  *desc = onesided::BufDesc{};
  if (bytes == 0) return nullptr;
  char* p = nullptr;
  if (onesided::line_round(bytes) <= kBlockScratchBytes) {
    p = reinterpret_cast<char*>(block_.get() + Layout(size()).scratch(parity));
    desc->base = local(0);
    desc->size = block_bytes_;
    desc->rkey = block_mr_->rkey;
  } else {
    if (const std::size_t grow = onesided::Ledger::region_to_grow(bytes, scratch_.bytes)) {
      // Peers may still read the old region (the call before this one).
      if (scratch_.bytes) retired_.push_back({std::move(scratch_), ticket});
      Region r;
      r.bytes = grow;
      r.mem = allocate_aligned(r.bytes);
      r.mr.reset(ibv_reg_mr(pd_.get(), r.mem.get(), r.bytes, kAccess));
      if (!r.mr) fail(ErrorCode::Transport, "RDMA window: cannot register {} bytes of Scratch: {}", r.bytes, errno_text());
      scratch_ = std::move(r);
    }
    p = reinterpret_cast<char*>(scratch_.mem.get()) + onesided::Ledger::half_offset(bytes, parity, scratch_.bytes);
    desc->base = reinterpret_cast<std::uint64_t>(scratch_.mem.get());
    desc->size = scratch_.bytes;
    desc->rkey = scratch_.mr->rkey;
  }
  desc->addr = reinterpret_cast<std::uint64_t>(p);
  desc->bytes = bytes;
  return p;
}

void Window::check_remote(int peer, const onesided::BufDesc& d, std::uint64_t addr, std::size_t bytes) const {
  // A peer's descriptor came over the wire: never hand the adapter a range
  // outside what it registered.
  if (d.rkey == 0 || !onesided::span_inside(d.base, d.size, addr, bytes))
    fail_peer(ErrorCode::Transport, world_rank(peer),
              "RDMA window: rank {} described a buffer outside its registered memory", world_rank(peer));
}

void Window::transfer(int peer, ibv_wr_opcode op, const onesided::BufDesc& d, std::uint64_t addr, const void* local,
                      std::size_t bytes) {
  if (bytes == 0) return;
  check_remote(peer, d, addr, bytes);
  RegCache::Entry* e = reg_->acquire(local, bytes, kAccess);
  try {
    const std::size_t chunk = std::min<std::size_t>(dev_->port_attr.max_msg_sz, std::size_t{1} << 30);
    for (std::size_t off = 0; off < bytes; off += chunk)
      post(peer, op, reinterpret_cast<std::uint64_t>(local) + off, e->lkey(), addr + off, d.rkey,
           std::min(chunk, bytes - off), tag(peer, kData));
    // Complete before returning: a READ's bytes are then here, and a
    // WRITE's source may be overwritten next.
    drain(peer, op == IBV_WR_RDMA_READ ? "reading its memory" : "writing its memory");
  } catch (...) {
    reg_->release(e);
    throw;
  }
  reg_->release(e);
}

void Window::get(int peer, const onesided::BufDesc& d, std::uint64_t addr, void* dst, std::size_t bytes) {
  transfer(peer, IBV_WR_RDMA_READ, d, addr, dst, bytes);
}

void Window::put(int peer, const onesided::BufDesc& d, std::uint64_t addr, const void* src, std::size_t bytes) {
  transfer(peer, IBV_WR_RDMA_WRITE, d, addr, src, bytes);
}

// --- liveness ---------------------------------------------------------------------

void Window::ask_host_now_and_then(int peer) {
  Peer& p = peers_[static_cast<std::size_t>(peer)];
  const auto now = Clock::now();
  if (now - p.last_check < kProbeInterval) return;
  p.last_check = now;
  check_alive_(world_rank(peer));  // throws, naming the peer, if the host knows it is gone
}

bool Window::peer_gone(int peer) {
  poll();
  Peer& p = peers_[static_cast<std::size_t>(peer)];
  if (!p.error.empty()) return true;
  ask_host_now_and_then(peer);
  const auto now = Clock::now();
  if (!p.probing && now - p.last_probe >= kProbeInterval) {
    // A READ of its line for us: it fails once the peer's QP is gone.
    const Layout lay(size());
    try {
      post(peer, IBV_WR_RDMA_READ, local(lay.probe()), block_mr_->lkey, p.block + lay.line(me_), p.rkey, 8,
           tag(peer, kProbe));
      p.probing = true;
      p.last_probe = now;
    } catch (const Error& e) {
      if (p.error.empty()) p.error = e.what();
    }
  }
  return !p.error.empty();
}

}  // namespace braid::verbs
