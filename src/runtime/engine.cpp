// The engine: progress over the transports, matching, waiting, timeouts and
// cancelling (engine.hpp). Failures are engine_failure.cpp, connecting a
// peer engine_connect.cpp.
//
// Why one file of ~530 lines: progress, completion and waiting are one
// state machine over the engine's mutex (the token holder polls, others
// sleep on the condition variable); split, each half would reach into the
// other's fields.
#include "src/runtime/engine.hpp"

#include <sched.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "braid/ops.hpp"
#include "src/common/env.hpp"
#include "src/common/errors.hpp"
#include "src/common/log.hpp"
#include "src/common/thread_name.hpp"
#include "src/runtime/cpu_sets.hpp"
#include "src/runtime/peers.hpp"

namespace braid {

namespace {
// Longest single sleep: bounds how late a waiter notices its deadline.
constexpr int kSliceMs = 100;
// Polling the transports that poll without a system call (cheap_poll) costs
// nothing next to epoll_wait(0), so spinning rounds look at the file
// descriptors only every few rounds.
constexpr int kFdPollEvery = 8;
constexpr int kSpinsPerClock = 8;  // wait_locked

// How long a waiter polls before it sleeps in the kernel: BRAID_SPIN_US, or
// 50 us, long enough to catch a reply from a peer on this host without a
// wake-up -- but where this machine's ranks share CPUs (cpu_sets.hpp) the
// peer we wait for needs our core, and polling with pause only delays it
// (measured: 8-byte all_reduce at 4 ranks on 2 cores, 238 us polling, 29 us
// not): then Engine::kYieldSpin, yielding between polls.
long spin_us_from_env() {
  return static_cast<long>(
      env_integer("BRAID_SPIN_US", 0, 1000000, "microseconds, 0..1000000").value_or(-1));
}

// Message data a rank keeps for receives not yet posted before it stops
// reading from peers that send more (Transport::hold_back). A bound, not a
// budget: a posted receive from a peer always lets its messages in.
std::size_t max_unexpected_from_env() {
  return static_cast<std::size_t>(env_integer("BRAID_MAX_UNEXPECTED_BYTES", 65536, 1LL << 40,
                                              "a byte count, 65536 to 2^40").value_or(256LL << 20));
}

const char* kind_name(const Request& r) { return r.kind == Request::Kind::Send ? "send to" : "receive from"; }

std::string peer_text(int peer) { return peer == ANY_SOURCE ? std::string("any rank") : fmt::format("rank {}", peer); }
}  // namespace

Engine::Engine(EngineConfig cfg, std::shared_ptr<store::Store> store)
    : cfg_(std::move(cfg)), store_(std::move(store)),
      failed_(static_cast<std::size_t>(cfg_.world_size), 0),
      left_(static_cast<std::size_t>(cfg_.world_size), 0),
      bye_heard_(static_cast<std::size_t>(cfg_.world_size), 0) {
  max_held_ = max_unexpected_from_env();
  epoll_ = Fd(::epoll_create1(EPOLL_CLOEXEC));
  wake_ = Fd(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!epoll_.valid() || !wake_.valid())
    fail(ErrorCode::Internal, "cannot create epoll/eventfd: {}", errno_text());
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.ptr = nullptr;  // the wake-up eventfd
  ::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, wake_.get(), &ev);
  route_.assign(static_cast<std::size_t>(cfg_.world_size), nullptr);
  awaited_.assign(static_cast<std::size_t>(cfg_.world_size), 0);
  const long us = spin_us_from_env();
  spin_ = std::chrono::microseconds(us >= 0 ? us : 50);
  spin_from_env_ = us >= 0;
  last_watchdog_ = Clock::now();
  TransportConfig tc;
  tc.rank = cfg_.rank;
  tc.world_size = cfg_.world_size;
  tc.job_id = cfg_.job_id;
  tc.store_host = cfg_.store_host;
  lineup_ = transports::make(*this, tc, cfg_.backend);
  for (auto& e : lineup_) {
    all_.push_back(e.transport.get());
    if (e.transport->cheap_poll()) spinners_.push_back(e.transport.get());
  }
  // One record says where this rank runs and how each transport reaches it.
  host_id_ = host_identity();
  PeerRecord me{host_id_, static_cast<int>(::getpid()), {}};
  for (const auto& name : transports::names()) {
    std::string addr;
    for (auto& e : lineup_)
      if (name == e.transport->name()) addr = e.transport->address();
    me.addresses.emplace_back(name, addr);
  }
  publish_peer_record(*store_, cfg_.rank, me);
  store_->set(fmt::format("cpus/{}", cfg_.rank), store::to_bytes(cpus::mine()));
}

void Engine::set_local_ranks(int n, int cpus, bool share, bool spans_hosts) {
  oversubscribed_ = share;
  fds_every_round_ = share && spans_hosts;
  // Sharing CPUs, a waiter still polls a while, but yields its CPU between
  // polls (as Open MPI's yield_when_idle, and the one-sided waits here).
  if (!spin_from_env_) spin_ = oversubscribed_ ? kYieldSpin : std::chrono::microseconds(50);
  BRAID_INFO("{} ranks on this machine, {} CPUs between them: waiters poll for {} us{}", n, cpus, spin_.count(),
             oversubscribed_ ? ", yielding between polls" : "");
}

Engine::~Engine() {
  try {
    shutdown();
  } catch (...) {
  }
}

// --- epoll plumbing ---------------------------------------------------------

void Engine::add_fd(int fd, EventSource* src, std::uint32_t events) {
  epoll_event ev{};
  ev.events = events;
  ev.data.ptr = src;
  if (::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, fd, &ev) != 0)
    fail(ErrorCode::Internal, "epoll_ctl(ADD) failed: {}", errno_text());
}

void Engine::mod_fd(int fd, EventSource* src, std::uint32_t events) {
  epoll_event ev{};
  ev.events = events;
  ev.data.ptr = src;
  ::epoll_ctl(epoll_.get(), EPOLL_CTL_MOD, fd, &ev);
}

void Engine::del_fd(int fd) { ::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, fd, nullptr); }

void Engine::kick() {
  std::uint64_t one = 1;
  [[maybe_unused]] auto n = ::write(wake_.get(), &one, sizeof one);
}

bool Engine::progress_round(std::unique_lock<std::mutex>& lk, int timeout_ms) {
  // Nobody is inside epoll_wait now, so closed connections can be freed.
  for (Transport* t : all_) t->reap();
  bool busy = false;
  for (Transport* t : all_) busy |= t->poll();
  if (busy) timeout_ms = 0;
  // Transports that are not fd-driven arrange a wake-up through one before
  // we sleep (prepare_sleep: a flag the peer checks, an armed queue).
  const bool sleeping = timeout_ms != 0;
  if (sleeping)
    for (Transport* t : all_)
      if (!t->prepare_sleep()) timeout_ms = 0;
  token_ = true;
  lk.unlock();
  epoll_event evs[64];
  int n = ::epoll_wait(epoll_.get(), evs, 64, timeout_ms);
  lk.lock();
  token_ = false;
  if (sleeping)
    for (Transport* t : all_) t->after_sleep();
  for (int i = 0; i < n; ++i) {
    if (evs[i].data.ptr == nullptr) {
      std::uint64_t v;
      [[maybe_unused]] auto r = ::read(wake_.get(), &v, sizeof v);
      continue;
    }
    static_cast<EventSource*>(evs[i].data.ptr)->on_events(evs[i].events);
  }
  for (Transport* t : all_) busy |= t->poll();
  cv_.notify_all();
  return busy || n > 0;
}

void Engine::spin_round(std::unique_lock<std::mutex>& lk, int round, int peer_hint) {
  // Waiting for one peer over sockets: read its connections straight away
  // (Transport::poll_peer), so that its message is read by the recv that
  // finds it, not by epoll_wait and then a recv: a system call less per
  // message (2 ranks over TCP, 8-byte pingpong: bench/RESULTS.md section
  // 32). The other descriptors are then looked at every kFdPollEvery rounds,
  // as below, unless ranks share CPUs across hosts. Only the transport that
  // carries this rank's traffic to the peer is read, where that is decided:
  // the others have nothing of it.
  int direct = -1;
  if (peer_hint >= 0) {
    Transport* routed = route_[static_cast<std::size_t>(peer_hint)];
    for (Transport* t : all_) {
      if (routed && t != routed) continue;
      const int got = t->poll_peer(peer_hint);
      if (got > 0) {
        cv_.notify_all();
        return;
      }
      direct = std::max(direct, got);
    }
  }
  // A spin: the transports that poll without a system call (and the peer's
  // sockets, above), file descriptors every few rounds -- but every round
  // where this machine's ranks share CPUs and the job spans hosts: each
  // round there ends in a yield, a context switch to another rank, so
  // looking only every kFdPollEvery rounds leaves a message from another
  // host unread for that many switches (2 hosts x 2 ranks on 2 CPUs, 8-byte
  // all_reduce: 41-47 us against 34-39 us). On one host the sockets carry
  // nothing there, so the cadence stays (a system call a round buys nothing).
  if ((direct == 0 || !spinners_.empty()) && !fds_every_round_ && round % kFdPollEvery != 0) {
    bool busy = false;
    for (Transport* t : spinners_) busy |= t->poll();
    if (!busy) {
      lk.unlock();
      if (oversubscribed_) sched_yield();
      else __builtin_ia32_pause();
      lk.lock();
    }
    cv_.notify_all();
    return;
  }
  // A peer that shares our CPU may be the one we wait for: let it run,
  // unless something just moved (the caller looks whether it is done).
  if (!progress_round(lk, 0) && oversubscribed_) {
    lk.unlock();
    sched_yield();
    lk.lock();
  }
}

// --- completion and failure -------------------------------------------------

void Engine::complete(Request& r, std::exception_ptr error) {
  if (r.done.load(std::memory_order_relaxed)) return;
  if (r.posted) matcher_.unpost(r);
  r.error = std::move(error);
  if (r.is_async) {
    auto it = std::find(async_reqs_.begin(), async_reqs_.end(), &r);
    if (it != async_reqs_.end()) {
      async_deadlines_.erase(async_deadlines_.begin() + (it - async_reqs_.begin()));
      async_reqs_.erase(it);
    }
    // The Work may be gone already; free its state outside the mutex.
    if (r.keepalive) graveyard_.push_back(std::move(r.keepalive));
  }
  r.done.store(true, std::memory_order_release);
}

// --- posting ----------------------------------------------------------------

void Engine::post_send(Request& r, Deadline deadline, Dialing* dialing) {
  r.kind = Request::Kind::Send;
  r.deadline = deadline;
  if (r.peer == cfg_.rank) {
    // A send to oneself never touches a transport: match it directly.
    std::unique_lock lk(mu_);
    if (request_error_locked(r)) throw_for(lk, r);
    if (r.is_async) {
      async_reqs_.push_back(&r);
      async_deadlines_.push_back(deadline);
    }
    // The message stays in the sender's buffer until a receive takes it.
    auto u = std::make_unique<Unexpected>();
    u->kind = Unexpected::Kind::Local;
    u->src = cfg_.rank;
    u->env = r.env;
    u->bytes = r.bytes;
    u->local_send = &r;
    if (Request* rr = matcher_.take_posted(cfg_.rank, r.env)) {
      deliver(std::move(u), *rr);
    } else {
      matcher_.add_unexpected(std::move(u));
    }
    cv_.notify_all();
    if (token_) kick();
    return;
  }
  bool ready = false;
  {
    std::unique_lock lk(mu_);
    if (request_error_locked(r)) throw_for(lk, r);
    if (left_[static_cast<std::size_t>(r.peer)])
      throw Error(ErrorCode::PeerFailure,
                  fmt::format("cannot send to rank {}: it left the job (destroy_process_group, or its exit)", r.peer),
                  r.peer);
    // Under the mutex: another thread may be connecting this peer (TSan saw
    // the unlocked read race with ensure_connected's write).
    ready = routed(r.peer);
  }
  if (!ready) {
    if (dialing) dialing->dialing(r.peer);
    ensure_connected(r, deadline);
  }
  std::unique_lock lk(mu_);
  if (request_error_locked(r)) throw_for(lk, r);
  if (r.is_async) {
    async_reqs_.push_back(&r);
    async_deadlines_.push_back(deadline);
    cv_.notify_all();
  }
  if (!routed(r.peer)) {  // dropped between dial and now
    complete(r, std::make_exception_ptr(Error(
        ErrorCode::PeerFailure, fmt::format("connection to rank {} was lost", r.peer), r.peer)));
    return;
  }
  route_[static_cast<std::size_t>(r.peer)]->send(r);
  if (token_ && !r.done.load(std::memory_order_relaxed)) kick();
}

void Engine::post_recv(Request& r) {
  r.kind = Request::Kind::Recv;
  std::unique_lock lk(mu_);
  if (request_error_locked(r)) throw_for(lk, r);
  auto u = matcher_.take_unexpected(r);
  // A departed peer's messages that already arrived can still be received.
  if (!u && r.peer >= 0 && r.peer != cfg_.rank && left_[static_cast<std::size_t>(r.peer)])
    throw Error(ErrorCode::PeerFailure,
                fmt::format("cannot receive from rank {}: it left the job (destroy_process_group, or its exit)", r.peer),
                r.peer);
  if (r.is_async) {
    async_reqs_.push_back(&r);
    async_deadlines_.push_back(r.deadline);
    cv_.notify_all();
  }
  if (u) {
    deliver(std::move(u), r);
  } else {
    matcher_.post(r);
  }
  // Either may let a transport that holds back a peer read again.
  resume_held();
}

bool Engine::hold_back(int peer) {
  if (matcher_.held_bytes() < max_held_ || matcher_.posted_from(peer)) return false;
  holding_ = true;
  return true;
}

void Engine::resume_held() {
  if (!holding_ || matcher_.held_bytes() >= max_held_) return;
  holding_ = false;
  for (Transport* t : all_) t->resume();
}

void Engine::set_async(Request& r, std::shared_ptr<void> keepalive, Deadline deadline) {
  r.is_async = true;
  r.keepalive = std::move(keepalive);
  r.deadline = deadline;
  std::lock_guard lk(mu_);
  if (!async_thread_.joinable() && !stopping_) {
    async_thread_ = std::thread([this] { async_loop(); });
    name_thread(async_thread_, "braid-progress");
  }
}

// --- waiting ----------------------------------------------------------------

bool Engine::cancel_locked(Request& r, std::exception_ptr e) {
  if (r.done.load(std::memory_order_relaxed)) return true;
  if (r.posted) {
    matcher_.unpost(r);
  } else if (r.peer == cfg_.rank && r.kind == Request::Kind::Send) {
    matcher_.drop_local_send(r);
  } else if (r.kind == Request::Kind::Recv) {
    for (Transport* t : all_) t->cancel(r);
  } else if (Transport* t = route_[static_cast<std::size_t>(r.peer)]) {
    if (!t->cancel(r)) return false;
  }
  complete(r, e);
  return true;
}

void Engine::cancel_or_fail_locked(Request& r, std::exception_ptr e) {
  if (cancel_locked(r, e)) return;
  // Bytes of it are on the wire: the stream to that peer is out of step,
  // which its connection cannot recover from (NCCL treats timeouts the
  // same way). The peer is not declared failed, though: it is alive, and
  // usually stalled behind the rank at fault (a stopped host-mate), which
  // the op's own error names once diagnosed. Logging the peer as the job's
  // failure made every survivor, and the peer itself, name the wrong rank.
  complete(r, e);  // first: its own error is the timeout, not the closing
  break_off_locked(r.peer, e);
}

void Engine::break_off_locked(int peer, const std::exception_ptr& why) {
  if (peer < 0 || peer >= cfg_.world_size || peer == cfg_.rank || out_of_step_.count(peer)) return;
  std::string what = "an op with it was abandoned mid-transfer";
  try {
    std::rethrow_exception(why);
  } catch (const std::exception& x) {
    what = x.what();
  } catch (...) {
  }
  BRAID_WARN("rank {}: the connection to it is out of step and given up ({})", peer, what);
  auto e = std::make_exception_ptr(Error(
      ErrorCode::Transport,
      fmt::format("the connection to rank {} was given up out of step, by an earlier op with it that gave up "
                  "mid-transfer ({}); nothing more can pass between the two ranks in this job",
                  peer, what),
      peer));
  out_of_step_.emplace(peer, e);
  if (Transport* t = route_[static_cast<std::size_t>(peer)]) t->break_off(peer, e);
  // Receives posted for it would wait for a connection that is gone: they
  // fail as every op with it now does (request_error_locked).
  matcher_.for_each_posted([&](Request& q) {
    if (auto err = request_error_locked(q)) complete(q, err);
  });
  cv_.notify_all();
}

// Returns true when done() holds, false when the deadline passed first.
bool Engine::wait_locked(std::unique_lock<std::mutex>& lk, const std::function<bool()>& done,
                         Deadline deadline, int peer_hint) {
  int spins = 0;
  // Registered as awaited, so whichever thread runs the watchdog probes it.
  Awaiting awaiting(*this, peer_hint);
  auto now = Clock::now();
  const auto spin_end = now + spin_;
  bool spinning = true;
  // Between spin rounds the clock is read every kSpinsPerClock rounds only:
  // a read costs about what a round that finds nothing does (5% of a 2-rank
  // TCP pingpong's samples), and spin rounds never sleep, so spin_end and
  // the deadline are passed by a few rounds at most. After anything else
  // (a sleep in epoll_wait or on cv_) it is read at once.
  bool after_spin = false;
  while (!done()) {
    if (!after_spin || spins % kSpinsPerClock == 0) now = Clock::now();
    after_spin = false;
    if (now >= deadline.at) return false;
    if (!token_) {
      if (spinning && now < spin_end) {
        spin_round(lk, spins++, peer_hint);
        after_spin = true;
        continue;
      }
      spinning = false;
      progress_round(lk, deadline.poll_ms(kSliceMs));
      expire_async_locked();
      if (!unpublished_.empty() || Clock::now() - last_watchdog_ > kWatchdogPeriod) watchdog(lk);
    } else {
      cv_.wait_for(lk, Millis(std::min(deadline.poll_ms(kSliceMs), kSliceMs) + 1));
    }
  }
  return true;
}

void Engine::rethrow(Request& r) {
  if (r.error) std::rethrow_exception(translate(r.error, r));
}

void Engine::release_graveyard(std::unique_lock<std::mutex>& lk) {
  publish_failures(lk);
  if (graveyard_.empty()) return;
  auto dead = std::move(graveyard_);
  graveyard_.clear();
  lk.unlock();
  dead.clear();
  lk.lock();
}

void Engine::wait(Request& r, Deadline deadline) {
  std::unique_lock lk(mu_);
  if (!wait_locked(lk, [&] { return r.done.load(std::memory_order_acquire); }, deadline, r.peer)) {
    cancel_or_fail_locked(r, std::make_exception_ptr(Error(
        ErrorCode::Timeout,
        fmt::format("{} {} (tag {}) timed out after {} ms", kind_name(r), peer_text(r.peer),
                    r.env.tag, r.timeout.count()),
        r.peer)));
  }
  release_graveyard(lk);
  lk.unlock();
  rethrow(r);
}

bool Engine::wait_any(Request* const* reqs, std::size_t n, Deadline deadline, int peer_hint) {
  std::unique_lock lk(mu_);
  // Every peer waited on is registered for the watchdog's probes (counted
  // in place: this is the collective hot path, it must not allocate).
  struct Register {
    Engine& e;
    Request* const* reqs;
    std::size_t n;
    int delta;
    void apply(int d) {
      for (std::size_t i = 0; i < n; ++i)
        if (reqs[i]->peer >= 0) e.awaited_[static_cast<std::size_t>(reqs[i]->peer)] += d;
    }
    Register(Engine& en, Request* const* r, std::size_t count) : e(en), reqs(r), n(count), delta(1) { apply(1); }
    ~Register() { apply(-1); }
  } registered(*this, peer_hint < 0 ? reqs : nullptr, peer_hint < 0 ? n : 0);
  auto any = [&] {
    for (std::size_t i = 0; i < n; ++i)
      if (reqs[i]->done.load(std::memory_order_acquire)) return true;
    return n == 0;
  };
  bool ok = wait_locked(lk, any, deadline, peer_hint);
  release_graveyard(lk);
  return ok;
}

void Engine::cancel(Request& r, std::exception_ptr e) {
  std::unique_lock lk(mu_);
  if (cancel_locked(r, e)) return;
  // Bytes of it are on the wire. When its op gave up because its group
  // lost a member, the peer is alive and reads every frame: let it finish
  // (bounded), rather than fail a live peer. A timeout is the peer's fault.
  const Deadline soon{std::min(r.deadline.at, Clock::now() + kDrainWait)};
  if (r.peer >= 0 && any_failed_ && !failed_[static_cast<std::size_t>(r.peer)] &&
      wait_locked(lk, [&] { return r.done.load(std::memory_order_acquire); }, soon, r.peer))
    return;
  cancel_or_fail_locked(r, e);
}

bool Engine::test(Request& r) {
  if (r.done.load(std::memory_order_acquire)) return true;
  std::unique_lock lk(mu_);
  if (!token_) {
    progress_round(lk, 0);
    expire_async_locked();
  }
  release_graveyard(lk);
  return r.done.load(std::memory_order_acquire);
}

void Engine::expire_async_locked() {
  if (async_reqs_.empty()) return;
  const auto now = Clock::now();
  for (std::size_t i = 0; i < async_reqs_.size();) {
    if (async_deadlines_[i].at <= now) {
      Request& r = *async_reqs_[i];
      cancel_or_fail_locked(r, std::make_exception_ptr(Error(
          ErrorCode::Timeout,
          fmt::format("{} {} (tag {}) timed out after {} ms", kind_name(r), peer_text(r.peer),
                      r.env.tag, r.timeout.count()),
          r.peer)));
      i = 0;  // cancel_locked edited the vectors
      continue;
    }
    ++i;
  }
}

void Engine::async_loop() {
  std::unique_lock lk(mu_);
  while (!stopping_) {
    if (async_reqs_.empty()) {
      release_graveyard(lk);
      cv_.wait(lk, [&] { return stopping_ || !async_reqs_.empty(); });
      continue;
    }
    if (!token_) {
      progress_round(lk, kSliceMs);
      expire_async_locked();
      if (!unpublished_.empty() || Clock::now() - last_watchdog_ > kWatchdogPeriod) watchdog(lk);
      release_graveyard(lk);
    } else {
      cv_.wait_for(lk, Millis(kSliceMs));
    }
  }
}

void Engine::shutdown(int why) {
  {
    std::unique_lock lk(mu_);
    if (stopping_) return;
    stopping_ = true;
    cv_.notify_all();
    kick();
  }
  if (async_thread_.joinable()) async_thread_.join();
  // A rank leaving on an error leaves its word in the store too, for a peer
  // that finds it gone without having mapped its memory or read its goodbye
  // (a host-mate it never sent to). Not where the store is what failed.
  bool aborted = false;
  {
    std::lock_guard lk(mu_);
    aborted = abort_error_ != nullptr;
  }
  if (why >= 0 && why < cfg_.world_size && why != cfg_.rank && !aborted) {
    store::CallCap cap(Deadline::after(std::chrono::milliseconds(500)));
    try {
      store_->set(last_word_key(cfg_.rank), store::to_bytes(std::to_string(why)));
    } catch (const Error&) {
    }
  }
  std::unique_lock lk(mu_);
  // Publish failures found here so that others learn of them even if we exit now.
  publish_failures(lk);
  for (Transport* t : all_) {
    if (why >= 0 && why < cfg_.world_size && why != cfg_.rank) t->leaving_because_of(why);
    t->shutdown();
    t->reap();
  }
  release_graveyard(lk);
}

}  // namespace braid
