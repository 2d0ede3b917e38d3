// The engine's failure policy.
//
// A failed rank poisons the groups that hold it, and nothing else: their
// pending ops fail, later ones are refused, naming the group's first failed
// member. "First" is the order of the job's failure log in the store
// (failures/<n>, counted by "failures"), so every rank names the same root
// cause: a rank that gave up after rank 3 died and then exited is logged
// after rank 3, and a survivor that sees it disconnect still names rank 3.
// Every waiter reads the log about once a second (the watchdog), which is
// also how ranks that never talk to the dead one learn of it. Only the
// store's loss ends the whole job (abort_locked).
//
// Why one file of ~530 lines: recording a failure, the words of peers that
// left, the log's order and the watchdog all edit failures_ and its order;
// they are one policy, read together.
#include <algorithm>
#include <optional>

#include "src/common/errors.hpp"
#include "src/common/log.hpp"
#include "src/runtime/engine.hpp"
#include "src/runtime/peers.hpp"
#include "src/runtime/positions.hpp"  // kStoreCallLimit

namespace braid {

namespace {
bool is_peer_failure(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const Error& x) {
    return x.code() == ErrorCode::PeerFailure;
  } catch (...) {
    return false;
  }
}
std::string log_key(std::uint64_t seq) { return fmt::format("failures/{}", seq); }
}  // namespace

// --- what an op is told ---------------------------------------------------------

std::exception_ptr Engine::rank_error_locked(int rank) const {
  // A rank that left on a failure it named (its goodbye, its memory, the
  // group's window) passes that failure on: where it is known, it is the
  // cause to name, not the rank that left (chaos, shared memory: a host-mate
  // of a stopped rank timed out, exited, and survivors that found its
  // process gone named it, though they had noted its word first).
  const int q = word_of_locked(rank).rank;
  const int named = q >= 0 && q != rank && q != cfg_.rank && failed_[static_cast<std::size_t>(q)]
                        ? q
                        : rank;
  for (const Failure& f : failures_)
    if (f.rank == named)
      return std::make_exception_ptr(Error(
          ErrorCode::PeerFailure,
          named == rank ? fmt::format("rank {} failed: {}", rank, f.reason)
                        : fmt::format("rank {} failed: {}; rank {} left after it", named, f.reason, rank),
          named));
  return nullptr;
}

Engine::Word Engine::word_of_locked(int peer) const {
  for (const Transport* t : all_)
    if (const int q = t->knew_failed(peer); q >= 0 && q < cfg_.world_size) return {q, t};
  if (const int q = window_word_ ? window_word_(peer) : -1; q >= 0 && q < cfg_.world_size && q != cfg_.rank)
    return {q, nullptr};
  return {};
}

void Engine::keep_words_of(const std::string& transport, const std::vector<PeerInfo>& mates) {
  std::lock_guard lk(mu_);
  for (Transport* t : all_)
    if (t->name() == transport)
      for (const PeerInfo& m : mates) t->keep_word_of(m);
}

std::exception_ptr Engine::group_error_locked(std::uint32_t id) const {
  if (!poisoned_.count(id)) return nullptr;
  const auto& members = groups_.at(id);
  // failures_ is in log order: the first member in it is the root cause.
  for (const Failure& f : failures_)
    if (std::find(members.begin(), members.end(), f.rank) != members.end()) {
      const bool me = f.rank == cfg_.rank;
      return std::make_exception_ptr(Error(
          ErrorCode::PeerFailure,
          me ? fmt::format("rank {} (this rank) was declared failed: {}; a group that holds it cannot go on", f.rank,
                           f.reason)
             : fmt::format("rank {} failed: {}", f.rank, f.reason),
          f.rank));
    }
  return nullptr;
}

std::exception_ptr Engine::request_error_locked(const Request& r) const {
  if (abort_error_) return abort_error_;
  if (!any_failed_ && out_of_step_.empty()) return nullptr;
  if (auto e = group_error_locked(r.env.ctx / 2)) return e;
  if (r.peer >= 0 && r.peer < cfg_.world_size && failed_[static_cast<std::size_t>(r.peer)])
    return rank_error_locked(r.peer);
  if (auto it = out_of_step_.find(r.peer); it != out_of_step_.end()) return it->second;
  return nullptr;
}

std::exception_ptr Engine::peer_error(int peer) const {
  if (abort_error_) return abort_error_;
  return peer >= 0 && peer < cfg_.world_size && failed_[static_cast<std::size_t>(peer)] ? rank_error_locked(peer)
                                                                                       : nullptr;
}

void Engine::throw_error(std::unique_lock<std::mutex>& lk, const std::function<std::exception_ptr()>& why) {
  // Publish (and so learn the root cause) before anyone sees the error.
  publish_failures(lk);
  auto e = why();
  if (!e) e = abort_error_;
  if (!e) e = std::make_exception_ptr(Error(ErrorCode::Internal, "an op failed without a recorded cause"));
  std::rethrow_exception(e);
}

void Engine::throw_for(std::unique_lock<std::mutex>& lk, const Request& r) {
  throw_error(lk, [&] { return request_error_locked(r); });
}

std::exception_ptr Engine::translate(std::exception_ptr e, const Request& r) {
  if (!e || !is_peer_failure(e)) return e;
  std::unique_lock lk(mu_);
  // A peer that left or disconnected may have done so because another rank
  // failed first (it gave up and exited): the log says so, if it does.
  if (!any_failed_ && !publishing_) (void)read_log_now(lk);  // the store gone too: the error stands
  if (!any_failed_) return e;
  publish_failures(lk);
  if (auto now = request_error_locked(r)) return now;
  return e;
}

// --- recording failures ------------------------------------------------------------

void Engine::add_group(std::uint32_t id, const std::vector<int>& ranks) {
  std::lock_guard lk(mu_);
  groups_[id] = ranks;
  for (int r : ranks)
    if (r >= 0 && r < cfg_.world_size && failed_[static_cast<std::size_t>(r)]) poisoned_.insert(id);
}

void Engine::note_failure_locked(int rank, const std::string& reason, bool publish, std::uint64_t seq) {
  if (rank < 0 || rank >= cfg_.world_size) return;
  if (failed_[static_cast<std::size_t>(rank)]) {
    // Known already: the log may place it earlier than we did.
    for (Failure& f : failures_)
      if (f.rank == rank && seq < f.seq) f.seq = seq;
    order_failures_locked();
    return;
  }
  BRAID_WARN("rank {} failed: {}", rank, reason);
  failed_[static_cast<std::size_t>(rank)] = 1;
  any_failed_ = true;
  troubled_.store(true, std::memory_order_release);
  failures_.push_back({rank, seq, reason});
  order_failures_locked();
  if (publish && seq == kUnlogged) unpublished_.push_back(rank);
  for (const auto& [id, members] : groups_)
    if (std::find(members.begin(), members.end(), rank) != members.end()) poisoned_.insert(id);

  // Fail what waits on the rank or on a poisoned group: posted receives,
  // messages no receive will take (their senders are told they are not
  // wanted), and every request the transports hold for the rank.
  const auto e_rank = rank_error_locked(rank);
  matcher_.for_each_posted([&](Request& r) {
    if (auto e = request_error_locked(r)) complete(r, e);
  });
  auto dropped = matcher_.take_unexpected_if([&](const Unexpected& u) {
    return u.src == rank || poisoned_.count(u.env.ctx / 2) > 0;
  });
  for (auto& u : dropped) {
    if (u->kind == Unexpected::Kind::Local && u->local_send) {
      complete(*u->local_send, request_error_locked(*u->local_send));
      continue;
    }
    if (u->src == rank) continue;  // its transport is dropped just below
    discard(std::move(u));
  }
  if (rank != cfg_.rank) {
    for (Transport* t : all_) t->fail_peer(rank, e_rank);
  }
  // Async requests the transports no longer hold (a receive whose payload
  // was being copied).
  auto pending = async_reqs_;
  for (Request* r : pending)
    if (r->peer == rank) complete(*r, e_rank);
  cv_.notify_all();
  if (token_) kick();
}

void Engine::order_failures_locked() {
  std::stable_sort(failures_.begin(), failures_.end(), [](const Failure& a, const Failure& b) { return a.seq < b.seq; });
  // A rank that left on a failure it named comes after that failure,
  // whatever the log says: the rank that logged its death first may not
  // have read its word (chaos: a rank that timed out on a stopped host-mate
  // and exited was logged by another that found it gone, and survivors that
  // had read its word in the group's window named it all the same).
  // Bounded: a word that names a rank after it moves that rank once.
  std::size_t i = 0, moves = 0;
  while (i < failures_.size() && moves <= failures_.size()) {
    const int q = word_of_locked(failures_[i].rank).rank;
    const auto at = failures_.begin() + static_cast<std::ptrdiff_t>(i);
    const auto later = q < 0 ? failures_.end()
                             : std::find_if(at + 1, failures_.end(), [q](const Failure& f) { return f.rank == q; });
    if (later == failures_.end()) {
      ++i;
      continue;
    }
    Failure cause = *later;
    cause.seq = std::min(cause.seq, at->seq);
    failures_.erase(later);
    failures_.insert(failures_.begin() + static_cast<std::ptrdiff_t>(i), cause);
    ++moves;  // i stays: the cause's own word is looked at next
  }
}

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

void Engine::abort_locked(const std::string& reason, int peer) {
  if (abort_error_) return;
  const std::string msg = fmt::format("job aborted: {}", reason);
  BRAID_WARN("{}", msg);
  abort_error_ = std::make_exception_ptr(Error(ErrorCode::PeerFailure, msg, peer));
  troubled_.store(true, std::memory_order_release);
  fail_all_locked(abort_error_);
  cv_.notify_all();
  if (token_) kick();
}

void Engine::store_lost_locked(const std::string& why) {
  // Rank 0 hosts the store unless an external braid-store does: it is the
  // rank to name (survivors cannot go on without a store), unless it left on
  // a failure it knew of or a rank it gave up on, as its word (a goodbye,
  // its segment) says: that rank is the cause, and the store went after.
  note_what_it_knew_locked(0);
  note_failure_locked(0, fmt::format("the store it hosts became unreachable ({})", why), false);
  // The first failure in the log's order is the cause; rank 0 is, where it
  // was known failed before any other (a peer's goodbye said so).
  for (const Failure& f : failures_) {
    if (f.rank == cfg_.rank) continue;
    if (f.rank == 0) break;
    return abort_locked(fmt::format("rank {} failed: {}; rank 0, which hosts the store, left after it (the store "
                                    "became unreachable: {})", f.rank, f.reason, why),
                        f.rank);
  }
  abort_locked(fmt::format("rank 0 failed: the store became unreachable ({}); rank 0 hosts it", why), 0);
}

void Engine::store_call_failed(const Error& e) {
  if (e.code() != ErrorCode::Store && e.code() != ErrorCode::Timeout) throw e;
  std::unique_lock lk(mu_);
  store_lost_locked(e.what());
  throw_error(lk, [&] { return abort_error_; });
}

void Engine::peer_failed(int peer, const std::string& reason) { note_failure_locked(peer, reason, true); }

void Engine::peer_said_goodbye(int peer) { bye_heard_[static_cast<std::size_t>(peer)] = 1; }

void Engine::peer_left(int peer) {
  left_[static_cast<std::size_t>(peer)] = 1;
  auto e = std::make_exception_ptr(Error(
      ErrorCode::PeerFailure,
      fmt::format("rank {} left the job (destroy_process_group, or its exit) while a receive from it was pending",
                  peer),
      peer));
  matcher_.for_each_posted([&](Request& r) {
    if (r.peer == peer) complete(r, e);
  });
  cv_.notify_all();
}

void Engine::peer_gone(int peer, const std::string& reason, std::uint32_t id) {
  const Farewell f = farewell(peer);
  std::unique_lock lk(mu_);
  note_farewell_locked(peer, f);
  note_failure_locked(peer, reason, true);
  throw_error(lk, [&] { return group_error_locked(id); });
}

void Engine::note_reported(int rank, const std::string& reason) {
  std::lock_guard lk(mu_);
  note_failure_locked(rank, reason, false);
}

void Engine::note_reported_before(int rank, int before, const std::string& reason) {
  std::lock_guard lk(mu_);
  std::uint64_t seq = kUnlogged;
  for (const Failure& f : failures_)
    if (f.rank == before && f.seq > 0) seq = f.seq - 1;
  note_failure_locked(rank, reason, false, seq);
}

std::vector<int> Engine::failed_ranks() {
  std::unique_lock lk(mu_);
  std::vector<int> out;
  for (int r = 0; r < cfg_.world_size; ++r)
    if (failed_[static_cast<std::size_t>(r)]) out.push_back(r);
  return out;
}

int Engine::first_failed() {
  std::lock_guard lk(mu_);
  for (const Failure& f : failures_)
    if (f.rank != cfg_.rank) return f.rank;
  return -1;
}

void Engine::note_gave_up(int named) {
  std::lock_guard lk(mu_);
  if (gave_up_named_ < 0 && named >= 0 && named < cfg_.world_size && named != cfg_.rank) gave_up_named_ = named;
}

int Engine::leaving_word() {
  const int q = first_failed();
  std::lock_guard lk(mu_);
  return q >= 0 ? q : gave_up_named_;
}

int Engine::failed_count() {
  std::lock_guard lk(mu_);
  return static_cast<int>(failures_.size());
}

bool Engine::left(int rank) {
  std::lock_guard lk(mu_);
  return left_[static_cast<std::size_t>(rank)] || bye_heard_[static_cast<std::size_t>(rank)];
}

bool Engine::gone(int rank) {
  std::lock_guard lk(mu_);
  return failed_[static_cast<std::size_t>(rank)] || left_[static_cast<std::size_t>(rank)];
}

void Engine::check_abort() {
  std::unique_lock lk(mu_);
  if (!abort_error_ && !token_ && Clock::now() - last_watchdog_ > kWatchdogPeriod) watchdog(lk);
  if (abort_error_) throw_error(lk, [&] { return abort_error_; });
}

void Engine::check_group(std::uint32_t id) {
  std::unique_lock lk(mu_);
  if (!abort_error_ && !token_ && Clock::now() - last_watchdog_ > kWatchdogPeriod) watchdog(lk);
  if (abort_error_ || (any_failed_ && poisoned_.count(id)))
    throw_error(lk, [&] { return abort_error_ ? abort_error_ : group_error_locked(id); });
}

void Engine::check_peer_alive(int peer) {
  check_abort();
  {
    std::unique_lock lk(mu_);
    if (failed_[static_cast<std::size_t>(peer)]) throw_error(lk, [&] { return rank_error_locked(peer); });
  }
  const PeerRecord h = read_peer_record(*store_, peer, kStoreCallLimit);
  bool dead = false;
  if (h.host == host_id_) {
    dead = process_gone(h.pid);
  } else {
    // On another host: a transport may tell (a listener refusing), as the
    // watchdog asks for peers nothing watches.
    for (Transport* t : all_) {
      PeerInfo info{peer, false, h.pid, h.address(t->name())};
      if (!info.address.empty() && t->probe_gone(info)) dead = true;
    }
  }
  if (!dead) return;
  const Farewell f = farewell(peer);
  std::unique_lock lk(mu_);
  note_gone_locked(peer, f);
  if (f.bye) throw Error(ErrorCode::PeerFailure, fmt::format("rank {} left the job (destroy_process_group)", peer), peer);
  throw_error(lk, [&] { return rank_error_locked(peer); });
}

void Engine::note_what_it_knew_locked(int peer) {
  if (peer < 0 || peer >= cfg_.world_size || failed_[static_cast<std::size_t>(peer)]) return;
  const Word w = word_of_locked(peer);
  if (w.rank < 0) return;
  note_failure_locked(w.rank,
                      w.via ? fmt::format("reported by rank {} before it left (in its {} goodbye or memory)", peer,
                                          w.via->name())
                            : fmt::format("reported by rank {} (in the group's window) before it exited", peer),
                      true);
}

void Engine::note_farewell_locked(int peer, const Farewell& f) {
  // A store that does not answer here says nothing of which went first, the
  // peer or the store's host (rank 0 may have exited after naming this
  // peer): the watchdog reports the store's loss on its own.
  const int q = f.last_word;
  if (q >= 0 && q < cfg_.world_size && q != peer && q != cfg_.rank && !failed_[static_cast<std::size_t>(peer)])
    note_failure_locked(q, fmt::format("reported by rank {} (in the store) as it left", peer), true);
  note_what_it_knew_locked(peer);
}

void Engine::note_gone_locked(int peer, const Farewell& f) {
  note_farewell_locked(peer, f);
  if (f.bye) peer_left(peer);
  else note_failure_locked(peer, "its process is gone (exited or killed)", true);
}

bool Engine::stopped(int rank) {
  store::CallCap cap(Deadline::after(kStoreCallLimit));
  try {
    const PeerRecord h = read_peer_record(*store_, rank, kStoreCallLimit);
    return h.host == host_id_ && process_stopped(h.pid);
  } catch (const Error&) {
    return false;
  }
}

Engine::Farewell Engine::farewell(int peer) {
  Farewell f;
  store::CallCap cap(Deadline::after(kStoreCallLimit));
  try {
    f.bye = store_->try_get(goodbye_key(peer)).has_value();
    if (!f.bye)
      if (const auto v = store_->try_get(last_word_key(peer)))
        f.last_word = decimal(store::to_string(*v), 9).value_or(-1);  // written by the peer: checked by the reader
  } catch (const Error&) {  // the store is gone: the watchdog says so
  }
  return f;
}

void Engine::refresh_failures(const std::vector<int>& peers) {
  {
    std::unique_lock lk(mu_);
    if (abort_error_) throw_error(lk, [&] { return abort_error_; });
  }
  std::vector<int> dead;
  for (int p : peers) {
    if (p == cfg_.rank || gone(p)) continue;
    const PeerRecord h = read_peer_record(*store_, p, kStoreCallLimit);
    if (h.host == host_id_) {
      if (process_gone(h.pid)) dead.push_back(p);
      continue;
    }
    for (Transport* t : all_) {
      PeerInfo info{p, false, h.pid, h.address(t->name())};
      if (!info.address.empty() && t->probe_gone(info)) {
        dead.push_back(p);
        break;
      }
    }
  }
  std::vector<Farewell> words;
  for (int p : dead) words.push_back(farewell(p));
  std::unique_lock lk(mu_);
  for (std::size_t i = 0; i < dead.size(); ++i) note_gone_locked(dead[i], words[i]);
  // Publishing also reads what the others logged.
  if (unpublished_.empty()) {
    while (publishing_) cv_.wait(lk);
    if (const std::string store_error = read_log_now(lk); !store_error.empty()) store_lost_locked(store_error);
  } else {
    publish_failures(lk);
  }
  if (abort_error_) throw_error(lk, [&] { return abort_error_; });
}

// --- the failure log -----------------------------------------------------------------

std::vector<std::pair<std::uint64_t, std::string>> Engine::read_log(std::uint64_t from) {
  std::vector<std::pair<std::uint64_t, std::string>> out;
  const auto count = static_cast<std::uint64_t>(std::max<std::int64_t>(0, store_->add("failures", 0)));
  for (std::uint64_t seq = from + 1; seq <= count; ++seq) {
    // A writer counts before it writes its entry: a gap closes soon.
    auto v = store_->try_get(log_key(seq));
    if (!v) break;
    out.emplace_back(seq, store::to_string(*v));
  }
  return out;
}

std::string Engine::read_log_now(std::unique_lock<std::mutex>& lk) {
  publishing_ = true;
  const auto from = log_read_;
  lk.unlock();
  std::vector<std::pair<std::uint64_t, std::string>> entries;
  std::string store_error;
  try {
    entries = read_log(from);
  } catch (const Error& e) {
    store_error = e.what();
  }
  lk.lock();
  publishing_ = false;
  cv_.notify_all();
  apply_log_locked(entries);
  return store_error;
}

void Engine::apply_log_locked(const std::vector<std::pair<std::uint64_t, std::string>>& entries) {
  for (const auto& [seq, v] : entries) {
    if (seq <= log_read_) continue;
    log_read_ = seq;
    const auto r = abort_rank(v, cfg_.world_size);
    if (!r || *r < 0) {
      abort_locked(fmt::format("the store's failure log holds a malformed entry ('{}', expected a rank of this job "
                               "of {}): something other than this job's ranks wrote it",
                               v.substr(0, 40), cfg_.world_size));
      return;
    }
    note_failure_locked(*r, "reported by another rank", false, seq);
  }
}

void Engine::publish_failures(std::unique_lock<std::mutex>& lk) {
  // One thread publishes; others wait for its answer, which may change the
  // error they are about to throw.
  cv_.wait(lk, [&] { return !publishing_; });
  // After the job's abort (its store lost, or its log malformed) the log
  // tells nobody anything: a frozen store would hold each error its timeout.
  if (abort_error_) unpublished_.clear();
  if (unpublished_.empty()) return;
  auto mine = std::move(unpublished_);
  unpublished_.clear();
  publishing_ = true;
  const auto from = log_read_;
  // Rank 0 known failed (a peer that left said so): its store answers late
  // or never, so a second, not the store's whole timeout, before the error
  // goes out without the log; its order here stands.
  std::optional<store::CallCap> cap;
  if (failed_[0]) cap.emplace(Deadline::after(kStoreCallLimit));
  lk.unlock();
  std::vector<std::pair<std::uint64_t, int>> logged;
  std::vector<std::pair<std::uint64_t, std::string>> entries;
  try {
    for (int r : mine) {
      const auto seq = static_cast<std::uint64_t>(store_->add("failures", 1));
      store_->set(log_key(seq), store::to_bytes(fmt::format("{}\n", r)));
      logged.emplace_back(seq, r);
    }
    entries = read_log(from);
  } catch (const Error& e) {
    BRAID_WARN("could not publish a failure in the store: {}", e.what());
  }
  lk.lock();
  publishing_ = false;
  cv_.notify_all();
  for (const auto& [seq, r] : logged) note_failure_locked(r, "", false, seq);
  apply_log_locked(entries);
}

void Engine::watchdog(std::unique_lock<std::mutex>& lk) {
  last_watchdog_ = Clock::now();
  if (!unpublished_.empty()) {
    publish_failures(lk);
    return;
  }
  if (publishing_) return;
  // Peers someone here waits on, that we would not otherwise see die: no
  // transport watches them (Transport::watching).
  std::vector<int> probe;
  for (int p = 0; p < cfg_.world_size; ++p)
    if (awaited_[static_cast<std::size_t>(p)] > 0 && p != cfg_.rank && !left_[static_cast<std::size_t>(p)] &&
        !failed_[static_cast<std::size_t>(p)] &&
        std::none_of(all_.begin(), all_.end(), [p](const Transport* t) { return t->watching(p); }))
      probe.push_back(p);
  // The token is ours, so nobody else polls while the mutex is released.
  token_ = true;
  publishing_ = true;
  const auto from = log_read_;
  lk.unlock();
  std::vector<std::pair<std::uint64_t, std::string>> entries;
  std::string store_error;
  int dead = -1;
  try {
    entries = read_log(from);
    for (std::size_t i = 0; i < probe.size() && i < 8 && dead < 0; ++i) {
      // The peer may have died before ever talking to us. On this host its
      // pid tells; elsewhere, a transport may tell (a listener refusing).
      const int p = probe[i];
      const PeerRecord h = read_peer_record(*store_, p, kStoreCallLimit);
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
    // Unreachable, or no answer within the store's whole timeout: a store
    // that is gone or frozen (its host stopped) serves nobody any more.
    if (e.code() == ErrorCode::Store || e.code() == ErrorCode::Timeout) store_error = e.what();
  }
  Farewell dead_word;
  if (dead >= 0 && store_error.empty()) dead_word = farewell(dead);
  lk.lock();
  token_ = false;
  publishing_ = false;
  if (!store_error.empty()) {
    store_lost_locked(store_error);
  } else {
    apply_log_locked(entries);
    if (dead >= 0) note_gone_locked(dead, dead_word);
  }
  cv_.notify_all();
}

}  // namespace braid
