// Connecting a peer: the engine walks the registry's lineup of transports.
#include "src/common/errors.hpp"
#include "src/common/log.hpp"
#include "src/runtime/engine.hpp"
#include "src/runtime/peers.hpp"

namespace braid {

bool Engine::routed(int peer) const {
  Transport* t = route_[static_cast<std::size_t>(peer)];
  return t && t->connected(peer);
}

void Engine::connect_refused(const Request& r, const std::string& reason) {
  const Farewell f = farewell(r.peer);
  std::unique_lock lk(mu_);
  note_farewell_locked(r.peer, f);
  note_failure_locked(r.peer, reason, true);
  throw_for(lk, r);  // publishes first: learns the root cause if another rank logged one earlier
}

// Transport choice is this loop: the first transport of the lineup that
// reaches the peer and connects carries its messages (NCCL's selectTransport
// in spirit). A refusal means the peer is gone; "unavailable" passes on to
// the next transport, and the error when none is left lists every reason.
void Engine::ensure_connected(const Request& r, Deadline deadline) {
  const int peer = r.peer;
  std::lock_guard g(connect_mu_);
  {
    std::unique_lock lk(mu_);
    if (request_error_locked(r)) throw_for(lk, r);
    if (routed(peer)) return;
  }
  // Store and network I/O happen outside the engine mutex: other threads keep
  // making progress while this one dials or maps.
  PeerRecord rec;
  try {
    rec = read_peer_record(*store_, peer, Millis(deadline.poll_ms()));
  } catch (const Error& e) {
    // Every rank's record is in the store before init returns anywhere: a
    // read that times out is a store that does not answer (its host
    // stopped, say), which names its host like a store that is gone.
    if (e.code() != ErrorCode::Store && e.code() != ErrorCode::Timeout) throw;
    std::unique_lock lk(mu_);
    store_lost_locked(e.what());
    throw_for(lk, r);
  }
  PeerInfo info;
  info.rank = peer;
  info.same_host = rec.host == host_id_;
  info.pid = rec.pid;
  std::string reasons;
  for (auto& e : lineup_) {
    if (!e.routes) continue;
    Transport& t = *e.transport;
    std::string why;
    if (t.reaches(info, &why)) {
      info.address = rec.address(t.name());
      ConnectResult res = t.connect(info, deadline);
      if (res.status == ConnectResult::Status::Connected) {
        std::unique_lock lk(mu_);
        if (request_error_locked(r)) throw_for(lk, r);
        t.adopt(peer, std::move(res.dialed));
        route_[static_cast<std::size_t>(peer)] = &t;
        BRAID_INFO("rank {}: {}", peer, t.name());
        return;
      }
      if (res.status == ConnectResult::Status::Refused) connect_refused(r, res.reason);
      // Unavailable: a peer on this host whose process is gone explains it.
      if (info.same_host && process_gone(info.pid)) connect_refused(r, "its process is gone (exited or killed)");
      why = res.reason;
      BRAID_WARN("rank {}: {} unavailable ({}); trying the next transport", peer, t.name(), why);
    }
    reasons += fmt::format("{}{}: {}", reasons.empty() ? "" : "; ", t.name(), why);
  }
  throw Error(ErrorCode::Transport,
              fmt::format("backend '{}': no transport reaches rank {} ({} host): {}", cfg_.backend, peer,
                          info.same_host ? "on this" : "on another", reasons),
              peer);
}

}  // namespace braid
