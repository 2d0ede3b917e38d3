// ShmTransport (shm_transport.hpp says how it works).
//
// Why one file of ~570 lines: the rings, the announced copies and the
// peers' lives (attach, goodbye, exit, withdrawal) all move the same
// per-peer state and the ring's records in step; the segment and ring
// layouts are in segment.hpp and ring.hpp.
#include "transports/shm/shm_transport.hpp"

#include "transports/record_text.hpp"

#include <sys/epoll.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include "src/common/env.hpp"
#include "src/common/errors.hpp"
#include "src/common/log.hpp"
#include "src/common/pidfd.hpp"

namespace braid {

namespace {

std::size_t eager_limit_from_env() {
  // Up to 16 KiB two copies through the ring beat a system call plus page
  // pinning (process_vm_readv); above it one copy wins.
  static_assert(shm::kRingBytes / 4 == 65536, "keep the message's limit in step");
  return static_cast<std::size_t>(env_integer("BRAID_SHM_EAGER_LIMIT", 0, shm::kRingBytes / 4,
                                              "a byte count up to 65536").value_or(16 * 1024));
}

class Doorbell final : public EventSource {
 public:
  explicit Doorbell(int fd) : fd_(fd) {}
  void on_events(std::uint32_t) override {
    std::uint64_t v;
    [[maybe_unused]] auto n = ::read(fd_, &v, sizeof v);  // the engine polls the rings next
  }

 private:
  int fd_;
};

}  // namespace

class PeerWatch final : public EventSource {
 public:
  PeerWatch(ShmTransport& t, int peer) : t_(t), peer_(peer) {}
  void on_events(std::uint32_t) override { t_.on_peer_exit(peer_); }

 private:
  ShmTransport& t_;
  int peer_;
};

struct ShmTransport::Peer {
  pid_t pid = 0;
  Fd pidfd;
  std::unique_ptr<PeerWatch> watch;
  shm::Mapping seg;      // their segment, once we write to them
  shm::RingWriter out;   // our ring inside it
  Fd doorbell;           // their eventfd
  struct Pending {
    shm::RecordHeader h;
    Request* r;          // Eager: completes when pushed; null for Fin
  };
  std::deque<Pending> pending;
  bool bye = false;
  std::uint64_t bye_knew = 0;  // its goodbye's word of a failure (knew_failed)
  bool gone = false;
};

ShmTransport::ShmTransport(TransportHost& host, const TransportConfig& cfg)
    : host_(host), cfg_(cfg), own_(shm::create_segment(cfg.job_id, cfg.rank, cfg.world_size, shm::kRingBytes)),
      tails_(static_cast<std::size_t>(cfg.world_size), 0), eager_limit_(eager_limit_from_env()) {
  doorbell_ = Fd(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!doorbell_.valid()) fail(ErrorCode::Transport, "eventfd failed: {}", errno_text());
  doorbell_src_ = std::make_unique<Doorbell>(doorbell_.get());
  host_.add_fd(doorbell_.get(), doorbell_src_.get(), EPOLLIN);
  for (int i = 0; i < cfg.world_size; ++i) peers_.push_back(std::make_unique<Peer>());
}

ShmTransport::~ShmTransport() = default;

std::string ShmTransport::address() const {
  return fmt::format("{} {} {}", ::getpid(), own_.fd(), doorbell_.get());
}

bool ShmTransport::connected(int p) const {
  const Peer& x = *peers_[static_cast<std::size_t>(p)];
  return x.out.valid() && !x.gone;
}

bool ShmTransport::watching(int p) const { return peers_[static_cast<std::size_t>(p)]->watch != nullptr; }

bool ShmTransport::reaches(const PeerInfo& peer, std::string* why) const {
  if (peer.same_host) return true;
  *why = "shared memory reaches ranks on this host only";
  return false;
}

ConnectResult ShmTransport::connect(const PeerInfo& peer, Deadline) {
  std::string why;
  if (auto a = attach(peer.rank, peer.address, &why)) return ConnectResult::connected(std::move(a));
  return ConnectResult::unavailable(std::move(why));
}

std::unique_ptr<ShmTransport::Attachment> ShmTransport::attach(int p, const std::string& address, std::string* why) {
  int v[3] = {0, -1, -1};  // pid, memfd, eventfd
  if (!parse_ints(address, v) || v[0] <= 0 || v[1] < 0 || v[2] < 0) {
    *why = fmt::format("malformed shared-memory address '{}'", address.substr(0, 100));
    return nullptr;
  }
  const int pid = v[0], memfd = v[1], efd = v[2];
  auto a = std::make_unique<Attachment>();
  a->pid = pid;
  a->pidfd = Fd(pidfd_open(pid));
  if (!a->pidfd.valid()) {
    *why = errno == ESRCH ? std::string("its process is gone") : fmt::format("pidfd_open: {}", errno_text());
    return nullptr;
  }
  Fd seg(pidfd_getfd(a->pidfd.get(), memfd));
  a->doorbell = Fd(pidfd_getfd(a->pidfd.get(), efd));
  if (!seg.valid() || !a->doorbell.valid()) {
    *why = fmt::format("pidfd_getfd: {} (shared memory needs permission to ptrace the peer: same user)", errno_text());
    return nullptr;
  }
  struct stat st{};
  if (::fstat(seg.get(), &st) != 0 || static_cast<std::size_t>(st.st_size) < shm::header_bytes()) {
    *why = "its segment is too small";
    return nullptr;
  }
  a->seg = shm::Mapping(std::move(seg), static_cast<std::size_t>(st.st_size));
  const auto* h = a->seg.header();
  // The pid may have been reused by an unrelated process: check it is ours.
  if (h->magic != shm::kSegmentMagic || h->job_id != cfg_.job_id || h->rank != static_cast<std::uint32_t>(p) ||
      h->world_size != static_cast<std::uint32_t>(cfg_.world_size) ||
      a->seg.bytes() < shm::segment_bytes(cfg_.world_size, h->ring_bytes)) {
    *why = "the segment behind its pid is not rank's segment of this job";
    return nullptr;
  }
  return a;
}

void ShmTransport::adopt(int p, std::unique_ptr<Dialed> d) {
  auto* a = static_cast<Attachment*>(d.get());
  Peer& x = peer(p);
  if (x.out.valid()) return;
  x.pid = a->pid;
  if (!x.pidfd.valid()) x.pidfd = std::move(a->pidfd);
  x.seg = std::move(a->seg);
  x.doorbell = std::move(a->doorbell);
  shm::RingControl* c = x.seg.ring_control(cfg_.rank);
  c->pid = ::getpid();
  c->memfd = own_.fd();
  c->eventfd = doorbell_.get();
  c->attached.store(1, std::memory_order_release);
  x.out = shm::RingWriter(c, x.seg.ring_data(cfg_.rank), x.seg.header()->ring_bytes);
  if (!x.watch) {
    x.watch = std::make_unique<PeerWatch>(*this, p);
    host_.add_fd(x.pidfd.get(), x.watch.get(), EPOLLIN);
  }
}

void ShmTransport::watch_sender(int s) {
  Peer& x = peer(s);
  if (x.watch) return;
  shm::RingControl* c = own_.ring_control(s);
  if (!c->attached.load(std::memory_order_acquire)) return;
  x.pid = c->pid;
  x.pidfd = Fd(pidfd_open(x.pid));
  if (!x.pidfd.valid()) {
    // Already gone: its records are still valid, drain() delivers them; the
    // next round reports the exit.
    return;
  }
  x.watch = std::make_unique<PeerWatch>(*this, s);
  host_.add_fd(x.pidfd.get(), x.watch.get(), EPOLLIN);
}

void ShmTransport::ring_doorbell(Peer& p) {
  // Pairs with prepare_sleep(): our head store, this fence, their flag.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (p.seg.header()->sleeping.load(std::memory_order_relaxed)) {
    std::uint64_t one = 1;
    [[maybe_unused]] auto n = ::write(p.doorbell.get(), &one, sizeof one);
  }
}

void ShmTransport::push_or_queue(int p, const shm::RecordHeader& h, Request* r) {
  Peer& x = peer(p);
  const bool eager = h.type == shm::RecordType::Eager;
  if (x.pending.empty() && x.out.push(h, eager ? r->buf : nullptr, eager ? h.bytes : 0)) {
    ring_doorbell(x);
    if (eager) host_.complete(*r);
    return;
  }
  x.pending.push_back({h, eager ? r : nullptr});
  if (r) r->queued = true;
}

bool ShmTransport::flush_pending(int p) {
  Peer& x = peer(p);
  bool any = false;
  while (!x.pending.empty()) {
    auto& f = x.pending.front();
    const bool eager = f.h.type == shm::RecordType::Eager;
    if (!x.out.push(f.h, eager ? f.r->buf : nullptr, eager ? f.h.bytes : 0)) break;
    Request* r = f.r;
    x.pending.pop_front();
    any = true;
    if (r) {
      r->queued = false;
      host_.complete(*r);
    }
  }
  if (any) ring_doorbell(x);
  return any;
}

void ShmTransport::send(Request& r) {
  shm::RecordHeader h{};
  h.ctx = r.env.ctx;
  h.tag = r.env.tag;
  h.reserved[0] = r.env.dtype;
  h.reserved2 = r.env.shape;
  h.bytes = r.bytes;
  if (r.bytes <= eager_limit_) {
    h.type = shm::RecordType::Eager;
    push_or_queue(r.peer, h, &r);
    return;
  }
  h.type = shm::RecordType::Rts;
  h.token = r.token = next_token_++;
  h.addr = reinterpret_cast<std::uint64_t>(r.buf);
  rts_out_[h.token] = &r;
  push_or_queue(r.peer, h, nullptr);
}

void ShmTransport::deliver_eager(int src, const shm::RecordHeader& h, const std::uint8_t* payload) {
  host_.deliver_arrived(src, Envelope{h.ctx, h.tag, h.reserved[0], h.reserved2}, payload, static_cast<std::size_t>(h.bytes), this);
}

void ShmTransport::deliver_rts(int src, const shm::RecordHeader& h) {
  const Envelope env{h.ctx, h.tag, h.reserved[0], h.reserved2};
  if (Request* r = host_.take_posted(src, env)) {
    r->source = src;
    if (auto err = receive_error(*r, src, env, static_cast<std::size_t>(h.bytes))) {
      host_.complete(*r, err);
      const Refusal by = refusal_of(*r);
      pull(src, h.addr, h.token, nullptr, &by);
      return;
    }
    r->received = static_cast<std::size_t>(h.bytes);
    pull(src, h.addr, h.token, r);
    return;
  }
  auto u = std::make_unique<Unexpected>();
  u->kind = Unexpected::Kind::Rendezvous;
  u->src = src;
  u->env = env;
  u->bytes = static_cast<std::size_t>(h.bytes);
  u->transport = this;
  u->send_token = h.token;
  u->remote_addr = h.addr;
  host_.add_unexpected(std::move(u));
}

void ShmTransport::claim(std::unique_ptr<Unexpected> u, Request* r) {
  if (r) r->received = u->bytes;
  pull(u->src, u->remote_addr, u->send_token, r);
}

// Copies an announced message straight out of the sender's memory, then
// tells the sender (FIN) that its buffer is free again.
void ShmTransport::reject(std::unique_ptr<Unexpected> u, const Refusal& by) {
  pull(u->src, u->remote_addr, u->send_token, nullptr, &by);
}

void ShmTransport::pull(int src, std::uint64_t addr, std::uint64_t token, Request* r, const Refusal* refused) {
  Peer& x = peer(src);
  if (r) {
    std::size_t done = 0;
    const std::size_t total = r->received;
    const pid_t pid = own_.ring_control(src)->pid;
    while (done < total) {
      iovec local{static_cast<char*>(r->buf) + done, total - done};
      iovec remote{reinterpret_cast<void*>(addr + done), total - done};
      ssize_t n = ::process_vm_readv(pid, &local, 1, &remote, 1, 0);
      if (n <= 0 && withdrawn(src, token)) break;  // below: not the sender's failure
      if (n <= 0) {
        // The sender withdrew the buffer (it aborted, or died): the job is
        // over; the abort names the root cause once known. A failure it
        // learned of first comes first: it may be why it let go.
        note_what_it_knew(src, "as its buffer went");
        host_.peer_failed(src, fmt::format("its announced buffer of {} bytes could not be read: {}", total,
                                        n < 0 ? errno_text() : "no progress"));
        host_.complete(*r, host_.peer_error(src));
        return;
      }
      done += static_cast<std::size_t>(n);
    }
    if (withdrawn(src, token)) {
      // What was read may be anything the sender's memory held since: the
      // receive fails, and no FIN goes back (the sender expects none).
      host_.complete(*r, std::make_exception_ptr(Error(
                             ErrorCode::Transport,
                             fmt::format("rank {} withdrew this message of {} bytes while it was being read (its send "
                                         "gave up mid-transfer, on a timeout); what was read is dropped",
                                         src, total),
                             src)));
      return;
    }
    host_.complete(*r);
  }
  // Answer FIN through our ring in the sender's segment (attach on demand,
  // from what it left in our ring's control block).
  if (!x.out.valid()) {
    shm::RingControl* c = own_.ring_control(src);
    std::string why;
    auto a = attach(src, fmt::format("{} {} {}", c->pid, c->memfd, c->eventfd), &why);
    if (!a) {
      host_.peer_failed(src, fmt::format("cannot answer it through shared memory: {}", why));
      return;
    }
    adopt(src, std::move(a));
  }
  shm::RecordHeader h{};
  h.type = shm::RecordType::Fin;
  h.token = token;
  if (refused) {  // a receive refused it: the send fails too, naming that receive
    h.reserved[0] = 1;
    h.reserved[1] = refused->dtype;
    h.bytes = refused->bytes;
    h.ctx = refused->shape;
  }
  push_or_queue(src, h, nullptr);
}

bool ShmTransport::held(int s) {
  if (!host_.hold_back(s)) return false;  // the common case, checked first
  for (const auto& [token, r] : rts_out_)
    if (r->peer == s) return false;  // its FIN for our send comes through this ring
  return true;
}

bool ShmTransport::drain(int s) {
  shm::RingControl* c = own_.ring_control(s);
  const std::uint64_t head = c->head.load(std::memory_order_acquire);
  std::uint64_t t = tails_[static_cast<std::size_t>(s)];
  // Held back, the ring fills and the sender queues (its memory, its buffers).
  if (t == head || held(s)) return false;
  if (!peer(s).watch) watch_sender(s);
  const std::uint8_t* data = own_.ring_data(s);
  const std::size_t cap = own_.header()->ring_bytes;
  auto corrupt = [&](const char* what) {
    host_.peer_failed(s, fmt::format("it wrote a malformed record into its shared-memory ring ({})", what));
  };
  const char* bad = shm::walk_records(data, cap, t, head, [&](const shm::RecordHeader& h, const std::uint8_t* payload) {
    switch (h.type) {
      case shm::RecordType::Eager:
        deliver_eager(s, h, payload);
        break;
      case shm::RecordType::Rts:
        deliver_rts(s, h);
        break;
      case shm::RecordType::Fin: {
        auto it = rts_out_.find(h.token);
        if (it != rts_out_.end()) {
          Request* r = it->second;
          rts_out_.erase(it);
          host_.complete(*r, h.reserved[0] == 1 ? rejected_send(*r, Refusal{h.reserved[1], h.bytes, h.ctx}) : nullptr);
        }
        break;
      }
      case shm::RecordType::Bye:
        peer(s).bye = true;
        peer(s).bye_knew = h.token;  // its first_failed (SegmentHeader), checked by knew_failed
        note_what_it_knew(s, "as it left");
        fail_sends_to(s, left_error(s));  // it reads nothing more: its FINs came before this
        host_.peer_left(s);
        break;
      default:  // Pad
        break;
    }
    return !host_.peer_error(s);
  });
  if (bad) {
    corrupt(bad);
    return true;
  }
  tails_[static_cast<std::size_t>(s)] = t;
  c->tail.store(t, std::memory_order_release);
  return true;
}

bool ShmTransport::poll() {
  if (shut_) return false;
  bool any = false;
  for (int s = 0; s < cfg_.world_size; ++s) {
    if (s == cfg_.rank) continue;
    any |= drain(s);
    if (!peer(s).pending.empty()) any |= flush_pending(s);
  }
  return any;
}

bool ShmTransport::prepare_sleep() {
  own_.header()->sleeping.store(1, std::memory_order_seq_cst);
  for (int s = 0; s < cfg_.world_size; ++s) {
    if (s == cfg_.rank) continue;
    if ((own_.ring_control(s)->head.load(std::memory_order_acquire) != tails_[static_cast<std::size_t>(s)] &&
         !held(s)) ||
        !peer(s).pending.empty()) {
      own_.header()->sleeping.store(0, std::memory_order_relaxed);
      return false;
    }
  }
  return true;
}

void ShmTransport::after_sleep() { own_.header()->sleeping.store(0, std::memory_order_relaxed); }

void ShmTransport::on_peer_exit(int p) {
  Peer& x = peer(p);
  if (x.gone) return;
  drain(p);  // records it wrote before exiting are still valid
  x.gone = true;
  if (x.pidfd.valid()) host_.del_fd(x.pidfd.get());
  // A failure it knew of before it went comes first: it may have left
  // because of it.
  note_what_it_knew(p, "before it exited");
  const bool left = x.bye || (x.seg.valid() && x.seg.header()->state.load(std::memory_order_acquire) ==
                                                   static_cast<std::uint32_t>(shm::SegmentState::Left));
  if (left) {
    // Queued and announced sends alike: an announced one waits for a FIN
    // that will never come.
    fail_sends_to(p, left_error(p));
    host_.peer_left(p);
  } else {
    host_.peer_failed(p, "its process exited without leaving the job (killed or crashed)");
  }
}

bool ShmTransport::cancel(Request& r) {
  if (r.kind == Request::Kind::Recv) return true;  // nothing of a receive lives here
  Peer& x = peer(r.peer);
  for (auto it = x.pending.begin(); it != x.pending.end(); ++it)
    if (it->r == &r || (it->h.type == shm::RecordType::Rts && it->h.token == r.token && rts_out_.count(r.token))) {
      x.pending.erase(it);
      rts_out_.erase(r.token);
      r.queued = false;
      return true;
    }
  // Announced: the receiver may be copying from the buffer right now. It
  // stays announced: its FIN (the receiver copied or dropped it) or the
  // peer's failure (fail_peer) completes it.
  return rts_out_.count(r.token) == 0;
}

void ShmTransport::drop_peer(int p) {
  Peer& x = peer(p);
  x.pending.clear();
  if (x.watch && x.pidfd.valid() && !x.gone) host_.del_fd(x.pidfd.get());
  x.gone = true;
}

void ShmTransport::note_what_it_knew(int p, const char* when) {
  if (const int q = knew_failed(p); q >= 0)
    host_.peer_failed(q, fmt::format("reported by rank {} (in shared memory) {}", p, when));
}

int ShmTransport::knew_failed(int p) const {
  // Its segment's word, or what its goodbye carried (a peer we never sent
  // to: its segment is not mapped here).
  const Peer& x = *peers_[static_cast<std::size_t>(p)];
  std::uint64_t knew = x.bye_knew;
  if (x.seg.valid()) knew = std::max<std::uint64_t>(knew, x.seg.header()->first_failed.load(std::memory_order_acquire));
  const auto q = static_cast<int>(knew) - 1;  // written by the peer: checked
  return knew > 0 && knew <= static_cast<std::uint64_t>(cfg_.world_size) && q != p && q != cfg_.rank ? q : -1;
}

void ShmTransport::keep_word_of(const PeerInfo& p) {
  if (p.rank < 0 || p.rank >= cfg_.world_size || p.rank == cfg_.rank) return;
  Peer& x = peer(p.rank);
  if (x.seg.valid()) return;
  std::string why;
  if (auto a = attach(p.rank, p.address, &why)) x.seg = std::move(a->seg);
  else BRAID_INFO("rank {}: its shared-memory word cannot be kept ({})", p.rank, why);
}

void ShmTransport::leaving_because_of(int rank) {
  // For peers that find this rank gone later (on_peer_exit), or hear its goodbye.
  std::uint32_t none = 0;
  if (rank >= 0 && rank != cfg_.rank)
    own_.header()->first_failed.compare_exchange_strong(none, static_cast<std::uint32_t>(rank) + 1,
                                                         std::memory_order_release, std::memory_order_relaxed);
}

void ShmTransport::fail_peer(int p, const std::exception_ptr& e) {
  leaving_because_of(p);
  break_off(p, e);
}

void ShmTransport::break_off(int p, const std::exception_ptr& e) {
  // Messages it announced and has not answered are void from now on: their
  // buffers go back to the caller with the error. The ring itself stays in
  // step (records are whole), so the peer goes on reading it; pull() checks
  // the word after its copy.
  Peer& x = peer(p);
  std::uint64_t lowest = ~std::uint64_t{0};
  for (const auto& [token, r] : rts_out_)
    if (r->peer == p) lowest = std::min(lowest, token);
  if (lowest != ~std::uint64_t{0} && x.out.valid()) x.out.withdraw_from(lowest);
  fail_sends_to(p, e);
  drop_peer(p);
}

bool ShmTransport::withdrawn(int src, std::uint64_t token) const {
  // Pairs with withdraw_from(): a copy that read a buffer the sender had
  // already given back was made after the sender voided it, so this load,
  // after the copy, sees the void.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  const std::uint64_t from = own_.ring_control(src)->withdrawn_from.load(std::memory_order_seq_cst);
  return from != 0 && token + 1 >= from;
}

void ShmTransport::fail_sends_to(int p, const std::exception_ptr& e) {
  Peer& x = peer(p);
  for (auto& f : x.pending)
    if (f.r) host_.complete(*f.r, e);
  x.pending.clear();
  for (auto it = rts_out_.begin(); it != rts_out_.end();) {
    if (it->second->peer == p) {
      host_.complete(*it->second, e);
      it = rts_out_.erase(it);
    } else {
      ++it;
    }
  }
}

std::exception_ptr ShmTransport::left_error(int p) {
  return std::make_exception_ptr(Error(
      ErrorCode::PeerFailure, fmt::format("rank {} left the job (destroy_process_group, or its exit) while a send to it was pending", p), p));
}

void ShmTransport::fail_all(const std::exception_ptr& e) {
  for (auto& x : peers_) {
    for (auto& f : x->pending)
      if (f.r) host_.complete(*f.r, e);
    x->pending.clear();
  }
  for (auto& [tok, r] : rts_out_) host_.complete(*r, e);
  rts_out_.clear();
}

void ShmTransport::shutdown() {
  if (shut_) return;
  // Leave first, then say goodbye: a peer that sees our exit checks either.
  own_.header()->state.store(static_cast<std::uint32_t>(shm::SegmentState::Left), std::memory_order_release);
  for (auto& x : peers_) {
    if (x->out.valid() && !x->gone && x->pending.empty()) {
      shm::RecordHeader h{};
      h.type = shm::RecordType::Bye;
      // What we knew of, for a peer that does not map our segment.
      h.token = own_.header()->first_failed.load(std::memory_order_relaxed);
      if (x->out.push(h, nullptr, 0)) ring_doorbell(*x);
    }
    if (x->watch && x->pidfd.valid() && !x->gone) host_.del_fd(x->pidfd.get());
    x->gone = true;
  }
  host_.del_fd(doorbell_.get());
  shut_ = true;
}

}  // namespace braid
