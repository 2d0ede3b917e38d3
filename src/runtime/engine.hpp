// Engine: matching, progress and failure policy for one process.
//
// Progress model. There is no dedicated I/O thread on the blocking path: the
// thread that waits drives progress itself. One "progress token" lets one
// waiter at a time sit in epoll_wait() (without the mutex) and handle what
// arrived (with the mutex); other waiters sleep on a condition variable and
// are woken after each round. A small send is handed to its transport on the
// caller's thread, which writes it at once where it can. Async ops (isend/irecv, async collectives) are
// driven by a background thread that only runs while async work is pending.
//
// Waiting spins briefly (epoll_wait with timeout 0), then sleeps in the
// kernel: with 8 ranks on 2 cores a spin that never sleeps costs minutes.
//
// Failure policy. A dead peer (its transport reports it failed: a connection
// closed without goodbye, a refused connect, a malformed message) aborts the
// job: every pending and later op of
// this process fails with an error naming the dead rank, and the abort is
// published in the store so that ranks that never talk to the dead one learn
// it too (every waiter checks the store about once a second).
#pragma once

#include <sys/epoll.h>

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "braid/error.hpp"
#include "braid/version.hpp"
#include "src/common/fd.hpp"
#include "src/common/time.hpp"
#include "src/store/store.hpp"
#include "transports/matcher.hpp"
#include "transports/registry.hpp"
#include "transports/transport.hpp"

namespace braid {

struct EngineConfig {
  int rank = 0;
  int world_size = 1;
  std::uint64_t job_id = 0;
  Millis timeout{300000};
  std::string store_host;  // to choose the address to advertise
  std::string backend = "auto";  // transports/registry.hpp says which there are
};

// The engine is the transports' host (transports/transport.hpp): they reach
// the runtime only through that face, and it reaches them only through
// Transport, in the registry's order of preference.
class Engine final : public TransportHost {
 public:
  Engine(EngineConfig cfg, std::shared_ptr<store::Store> store);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  int rank() const { return cfg_.rank; }
  int world_size() const { return cfg_.world_size; }
  Millis default_timeout() const { return cfg_.timeout; }
  store::Store& store() { return *store_; }

  // --- posting (caller does not hold the mutex) -----------------------------
  // Both throw braid::Error if the job is aborted or the peer is gone.
  // `keepalive`, if set, is held until the request completes (async ops).
  void post_send(Request& r, Deadline deadline);
  void post_recv(Request& r);
  void set_async(Request& r, std::shared_ptr<void> keepalive, Deadline deadline);

  // --- waiting --------------------------------------------------------------
  // Waits until r completes; throws its error, or a Timeout naming the peer
  // (the request is withdrawn first).
  void wait(Request& r, Deadline deadline);
  // Waits until any of `reqs` completes (or all are done); for the executor.
  // Returns false if the deadline passed first.
  bool wait_any(Request* const* reqs, std::size_t n, Deadline deadline, int peer_hint = -1);
  // Withdraws r with error e (a caller's own timeout policy).
  void cancel(Request& r, std::exception_ptr e);
  // One non-blocking progress pass; true if r is complete.
  bool test(Request& r);
  // Rethrows r's error, if any (after completion).
  void rethrow(Request& r);
  // An op's error as it should be reported (an abort may have been traced
  // to another root cause since).
  std::exception_ptr translate(std::exception_ptr e);

  // --- TransportHost: called by transports with the mutex held --------------
  void complete(Request& r, std::exception_ptr error = nullptr) override;
  Request* take_posted(int src, const Envelope& env) override { return matcher_.take_posted(src, env); }
  Unexpected& add_unexpected(std::unique_ptr<Unexpected> u) override { return matcher_.add_unexpected(std::move(u)); }
  void peer_failed(int peer, const std::string& reason) override;
  void peer_left(int peer) override;  // clean goodbye
  void add_fd(int fd, EventSource* src, std::uint32_t events) override;
  void mod_fd(int fd, EventSource* src, std::uint32_t events) override;
  void del_fd(int fd) override;
  std::exception_ptr abort_error() const override { return abort_error_; }
  bool hold_back(int peer) override;
  // Bytes of message data held for receives not yet posted (tests).
  std::size_t held_bytes() {
    std::lock_guard lk(mu_);
    return matcher_.held_bytes();
  }

  // How many ranks of the job run on this host, how many CPUs they may run
  // on between them, and whether they share CPUs (cpus::oversubscribed):
  // decides whether waiters poll before sleeping (not when they share).
  // Called once at init.
  void set_local_ranks(int n, int cpus, bool share);

  // --- for the one-sided runner, which waits without the
  // mutex: how long to poll before sleeping, and whether to yield the CPU
  // while polling (ranks outnumber CPUs).
  std::chrono::microseconds spin_time() const { return spin_; }
  bool oversubscribed() const { return oversubscribed_; }
  // A peer on this host is gone: abort the job naming it, then throw.
  [[noreturn]] void abort_peer_gone(int peer, const std::string& reason);
  // Throws the job's abort error if there is one; about once a second also
  // looks in the store for an abort another rank published.
  void check_abort();
  // check_abort(), and if `peer` is known to be gone (on this host: its
  // process; elsewhere: a transport's probe_gone), aborts the job naming it
  // and throws.
  void check_peer_alive(int peer);

  // Says goodbye to every peer and stops the background thread.
  void shutdown();
  // True once the job is known to be aborted; the error names the dead rank.
  bool aborted() const { return abort_error_ != nullptr; }
  int abort_peer() const { return abort_peer_; }

 private:
  // How often a long wait asks the store whether the job was aborted.
  static constexpr auto kWatchdogPeriod = std::chrono::milliseconds(1000);
  struct WaitTarget;
  void progress_round(std::unique_lock<std::mutex>& lk, int timeout_ms);
  bool wait_locked(std::unique_lock<std::mutex>& lk, const std::function<bool()>& done,
                   Deadline deadline, int peer_hint);
  void release_graveyard(std::unique_lock<std::mutex>& lk);  // also publishes an abort
  void publish_abort(std::unique_lock<std::mutex>& lk);
  void watchdog(std::unique_lock<std::mutex>& lk);
  // Marks a peer as waited on for its lifetime (the mutex must be held at
  // construction and destruction).
  struct Awaiting {
    Awaiting(Engine& e, int peer) : e_(&e), peer_(peer) {
      if (peer_ >= 0) e_->awaited_[static_cast<std::size_t>(peer_)]++;
    }
    Awaiting(Awaiting&& o) noexcept : e_(o.e_), peer_(o.peer_) { o.peer_ = -1; }
    Awaiting(const Awaiting&) = delete;
    ~Awaiting() {
      if (peer_ >= 0) e_->awaited_[static_cast<std::size_t>(peer_)]--;
    }
    Engine* e_;
    int peer_;
  };
  std::vector<int> awaited_;  // waiters per peer
  std::chrono::microseconds spin_{50};
  bool spin_from_env_ = false;
  bool oversubscribed_ = false;
  // The bound on held_bytes() (BRAID_MAX_UNEXPECTED_BYTES), and whether a
  // transport holds a peer back since hold_back() said so.
  std::size_t max_held_ = 0;
  bool holding_ = false;
  // After a receive is posted: lets transports read again what they held.
  void resume_held();
  void abort_locked(int peer, const std::string& reason, bool publish);
  void fail_all_locked(const std::exception_ptr& e);
  void ensure_connected(int peer, Deadline deadline);
  // A connect found `peer` gone (its listener refused, its process exited):
  // abort the job naming it, publish, and throw.
  [[noreturn]] void connect_refused(int peer, const std::string& reason);

  bool routed(int peer) const;
  void spin_round(std::unique_lock<std::mutex>& lk, int round);
  void kick();
  void async_loop();
  void expire_async_locked();
  void cancel_locked(Request& r, std::exception_ptr e);
  [[noreturn]] void throw_aborted(std::unique_lock<std::mutex>& lk);

  EngineConfig cfg_;
  std::shared_ptr<store::Store> store_;

  std::mutex mu_;
  std::condition_variable cv_;
  bool token_ = false;
  Fd epoll_;
  Fd wake_;  // eventfd: wakes the token holder out of epoll_wait

  Matcher matcher_;
  // Every transport the backend uses, in order of preference; `all_` and
  // `spinners_` (those whose poll() costs no system call) for progress.
  std::vector<transports::Entry> lineup_;
  std::vector<Transport*> all_;
  std::vector<Transport*> spinners_;
  std::vector<Transport*> route_;      // per peer, decided on the first send
  std::string host_id_;
  std::mutex connect_mu_;  // serialises dialing; never held with mu_ waiting

  // Abort state: the first failure wins and every later op reports it.
  std::exception_ptr abort_error_;
  std::exception_ptr superseded_;  // an abort replaced by its root cause
  int abort_peer_ = -1;
  bool publish_abort_ = false;
  bool publishing_ = false;  // a thread is writing the abort to the store
  std::vector<char> left_;  // peers that said goodbye

  // Async ops: counted so the background thread sleeps when idle.
  std::vector<Request*> async_reqs_;
  std::vector<Deadline> async_deadlines_;
  std::vector<std::shared_ptr<void>> graveyard_;  // released outside the mutex
  std::thread async_thread_;
  bool stopping_ = false;
  Clock::time_point last_watchdog_{};
};

}  // namespace braid
