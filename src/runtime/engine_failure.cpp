// The engine's failure policy: the first failure wins and every later op
// reports it; an abort is published in the store, so that ranks that never
// talk to the failed one learn it too, and a rank that published later
// learns the root cause from the store; the watchdog probes peers nothing
// else watches.
#include <algorithm>
#include <optional>

#include "src/common/errors.hpp"
#include "src/common/log.hpp"
#include "src/runtime/engine.hpp"
#include "src/runtime/peers.hpp"

namespace braid {

void Engine::fail_all_locked(const std::exception_ptr& e) {
  matcher_.for_each_posted([&](Request& r) { complete(r, e); });
  for (auto& u : matcher_.unexpected()) {
    if (u->kind == Unexpected::Kind::Local && u->local_send) complete(*u->local_send, e);
  }
  matcher_.clear_unexpected();
  for (Transport* t : all_) t->fail_all(e);
  // Anything still counted as async (e.g. a receive whose payload was being
  // copied) is failed too, so no Work waits forever.
  auto pending = async_reqs_;
  for (Request* r : pending) complete(*r, e);
}

void Engine::abort_locked(int peer, const std::string& reason, bool publish) {
  if (abort_error_) return;
  abort_peer_ = peer;
  const std::string msg = peer >= 0 ? fmt::format("job aborted: rank {} failed: {}", peer, reason)
                                    : fmt::format("job aborted: {}", reason);
  BRAID_WARN("{}", msg);
  abort_error_ = std::make_exception_ptr(Error(ErrorCode::PeerFailure, msg, peer));
  publish_abort_ = publish;
  // Fail first: dropping the peer's connections forgets what they held.
  fail_all_locked(abort_error_);
  if (peer >= 0 && peer < cfg_.world_size && peer != cfg_.rank)
    for (Transport* t : all_) t->drop_peer(peer);
  cv_.notify_all();
  if (token_) kick();
}

void Engine::peer_failed(int peer, const std::string& reason) { abort_locked(peer, reason, true); }

void Engine::peer_left(int peer) {
  left_[static_cast<std::size_t>(peer)] = 1;
  auto e = std::make_exception_ptr(Error(
      ErrorCode::PeerFailure,
      fmt::format("rank {} left the job (destroy_process_group) while a receive from it was pending",
                  peer),
      peer));
  matcher_.for_each_posted([&](Request& r) {
    if (r.peer == peer) complete(r, e);
  });
  cv_.notify_all();
}

void Engine::abort_peer_gone(int peer, const std::string& reason) {
  std::unique_lock lk(mu_);
  abort_locked(peer, reason, true);
  throw_aborted(lk);
}

void Engine::check_abort() {
  std::unique_lock lk(mu_);
  if (!abort_error_ && !token_ && Clock::now() - last_watchdog_ > kWatchdogPeriod) watchdog(lk);
  if (abort_error_) throw_aborted(lk);
}

void Engine::check_peer_alive(int peer) {
  check_abort();
  const PeerRecord h = read_peer_record(*store_, peer, Millis(1000));
  if (h.host == host_id_) {
    if (process_gone(h.pid)) abort_peer_gone(peer, "its process is gone (exited or killed)");
    return;
  }
  // On another host: a transport may tell (a listener refusing), as the
  // watchdog asks for peers nothing watches.
  for (Transport* t : all_) {
    PeerInfo info{peer, false, h.pid, h.address(t->name())};
    if (!info.address.empty() && t->probe_gone(info)) abort_peer_gone(peer, "its process is gone (exited or killed)");
  }
}

[[noreturn]] void Engine::throw_aborted(std::unique_lock<std::mutex>& lk) {
  // Publish (and so learn the root cause) before anyone sees the error.
  publish_abort(lk);
  std::rethrow_exception(abort_error_);
}


void Engine::watchdog(std::unique_lock<std::mutex>& lk) {
  last_watchdog_ = Clock::now();
  if (publish_abort_) {
    publish_abort(lk);
    return;
  }
  // Peers someone here waits on, that we would not otherwise see die: no
  // transport watches them (Transport::watching).
  std::vector<int> probe;
  for (int p = 0; p < cfg_.world_size; ++p)
    if (awaited_[static_cast<std::size_t>(p)] > 0 && p != cfg_.rank && !left_[static_cast<std::size_t>(p)] &&
        std::none_of(all_.begin(), all_.end(), [p](const Transport* t) { return t->watching(p); }))
      probe.push_back(p);
  // The token is ours, so nobody else polls while the mutex is released.
  token_ = true;
  lk.unlock();
  std::optional<store::Bytes> seen;
  std::string store_error;
  int dead = -1;
  try {
    seen = store_->try_get("abort");
    for (std::size_t i = 0; i < probe.size() && i < 8 && !seen && dead < 0; ++i) {
      // The peer may have died before ever talking to us. On this host its
      // pid tells; elsewhere, a transport may tell (a listener refusing).
      const int p = probe[i];
      const PeerRecord h = read_peer_record(*store_, p, Millis(1000));
      if (h.host == host_id_) {
        if (process_gone(h.pid)) dead = p;
        continue;
      }
      for (Transport* t : all_) {
        PeerInfo info{p, false, h.pid, h.address(t->name())};
        if (!info.address.empty() && t->probe_gone(info)) {
          dead = p;
          break;
        }
      }
    }
  } catch (const Error& e) {
    if (e.code() == ErrorCode::Store) store_error = e.what();
  }
  lk.lock();
  token_ = false;
  if (!store_error.empty()) {
    abort_locked(0, fmt::format("the store became unreachable ({}); rank 0 hosts it", store_error), false);
  } else if (seen) {
    const std::string v = store::to_string(*seen);
    if (auto r = abort_rank(v, cfg_.world_size))
      abort_locked(*r, "reported by another rank", false);
    else
      abort_locked(-1, fmt::format("the store's abort record is malformed ('{}', expected a rank of this job of {}): "
                                   "something other than this job's ranks wrote it", v.substr(0, 40), cfg_.world_size),
                   false);
  } else if (dead >= 0) {
    abort_locked(dead, "its process is gone (exited or killed)", true);
  }
  cv_.notify_all();
}

void Engine::publish_abort(std::unique_lock<std::mutex>& lk) {
  // One thread publishes; others wait for its answer, which may change the
  // error they are about to throw.
  cv_.wait(lk, [&] { return !publishing_; });
  if (!publish_abort_) return;
  publish_abort_ = false;
  publishing_ = true;
  const std::string value = fmt::format("{}\n", abort_peer_);
  lk.unlock();
  std::string first;
  try {
    first = store::to_string(store_->compare_set("abort", {}, store::to_bytes(value)));
  } catch (const Error& e) {
    BRAID_WARN("could not publish the abort in the store: {}", e.what());
  }
  lk.lock();
  publishing_ = false;
  cv_.notify_all();
  BRAID_INFO("published abort '{}'; the store holds '{}'", value.substr(0, value.size() - 1),
             first.substr(0, first.find('\n')));
  // Another rank published first: its rank is the root cause (the one we saw
  // may only have exited after it). Errors not yet thrown name the root.
  const int root = abort_rank(first, cfg_.world_size).value_or(-1);
  if (!first.empty() && first != value && root >= 0 && root != abort_peer_) {
    const int seen = abort_peer_;
    superseded_ = abort_error_;
    abort_peer_ = root;
    abort_error_ = std::make_exception_ptr(Error(
        ErrorCode::PeerFailure,
        fmt::format("job aborted: rank {} failed (reported by another rank; rank {} then disconnected from this one)",
                    root, seen),
        root));
  }
}

}  // namespace braid
