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
// closed without goodbye, a refused connect, a malformed message) is a
// failed rank. Its failure poisons exactly the groups that hold it: their
// pending and later ops fail with an error naming the group's first failed
// member, while groups without it go on (survivors may shrink and continue:
// braid/recovery.hpp). Failures are appended to a log in the store, so that
// ranks that never talk to the dead one learn it too (every waiter reads the
// log about once a second) and everyone agrees which failure came first:
// a rank that gave up after a failure and exited is not the culprit. Only
// losing the store aborts the whole job.
#pragma once

#include <sys/epoll.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
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
  // `dialing`, where given, hears of a first send to a peer not yet
  // connected before the connect blocks (a dial across a cut link can take
  // the whole timeout, and the caller may want to say so where others see).
  struct Dialing {
    virtual void dialing(int peer) = 0;

   protected:
    ~Dialing() = default;
  };
  void post_send(Request& r, Deadline deadline, Dialing* dialing = nullptr);
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
  // An op's error as it should be reported: a failure in r's group names the
  // group's first failed member, which the failure log may have told since.
  std::exception_ptr translate(std::exception_ptr e, const Request& r);

  // --- TransportHost: called by transports with the mutex held --------------
  void complete(Request& r, std::exception_ptr error = nullptr) override;
  Request* take_posted(int src, const Envelope& env) override { return matcher_.take_posted(src, env); }
  Unexpected& add_unexpected(std::unique_ptr<Unexpected> u) override { return matcher_.add_unexpected(std::move(u)); }
  void peer_failed(int peer, const std::string& reason) override;
  void peer_left(int peer) override;  // clean goodbye
  void peer_said_goodbye(int peer) override;
  void add_fd(int fd, EventSource* src, std::uint32_t events) override;
  void mod_fd(int fd, EventSource* src, std::uint32_t events) override;
  void del_fd(int fd) override;
  std::exception_ptr peer_error(int peer) const override;
  bool hold_back(int peer) override;
  // Bytes of message data held for receives not yet posted (tests).
  std::size_t held_bytes() {
    std::lock_guard lk(mu_);
    return matcher_.held_bytes();
  }

  // How many ranks of the job run on this host, how many CPUs they may run
  // on between them, whether they share CPUs (cpus::oversubscribed), and
  // whether the job spans hosts: decides how waiters poll before sleeping.
  // Called once at init.
  void set_local_ranks(int n, int cpus, bool share, bool spans_hosts);

  // --- for the one-sided runner, which waits without the
  // mutex: how long to poll before sleeping, and whether to yield the CPU
  // while polling (ranks outnumber CPUs).
  std::chrono::microseconds spin_time() const { return spin_; }
  bool oversubscribed() const { return oversubscribed_; }
  // Where a machine's ranks outnumber its CPUs (oversubscribed()), a waiter
  // polls this long, yielding its CPU between polls (sched_yield) so that
  // the peer it waits for runs, before it sleeps: message waits and
  // one-sided waits alike.
  static constexpr auto kYieldSpin = std::chrono::microseconds(200);
  // Throws the job's abort error if there is one; about once a second also
  // reads the failure log another rank may have written.
  void check_abort();
  // check_abort(), and if `peer` is known to be gone (on this host: its
  // process; elsewhere: a transport's probe_gone), records its failure and
  // throws the error naming it.
  void check_peer_alive(int peer);

  // --- failures and groups (engine_failure.cpp) -------------------------------
  // Every group's members, given at its creation: a failure poisons exactly
  // the groups that hold the failed rank (ctx / 2 is a message's group).
  void add_group(std::uint32_t id, const std::vector<int>& ranks);
  // check_abort(), and throws if group `id` holds a failed rank
  // (PeerFailure naming the first of them in the failure log).
  void check_group(std::uint32_t id);
  // check_group at a call's issue: free (one atomic read) while no rank
  // has failed.
  void check_issue(std::uint32_t id) {
    if (troubled_.load(std::memory_order_acquire)) check_group(id);
  }
  // `peer`, a member of group `id`, is known gone (the one-sided runner saw
  // it): records its failure, then throws the group's error.
  [[noreturn]] void peer_gone(int peer, const std::string& reason, std::uint32_t id);
  // A peer's error named `rank` as failed (a window's failure mark): record
  // it, so failed_ranks() holds it when the error is thrown.
  void note_reported(int rank, const std::string& reason);
  // Where a gone peer's word of a failure it learned of may also be read
  // (the world group's window: Ledger::knew_failed), besides the transports.
  void set_window_word(std::function<int(int peer)> read) {
    std::lock_guard lk(mu_);
    window_word_ = std::move(read);
  }
  // Init: the transport named `transport` keeps each host-mate's word from
  // now on (Transport::keep_word_of), `mates` carrying its addresses.
  void keep_words_of(const std::string& transport, const std::vector<PeerInfo>& mates);
  // As note_reported, ordered just before `before`'s failure if that is
  // noted already: the report is of what made `before` leave.
  void note_reported_before(int rank, int before, const std::string& reason);
  // Global ranks known to have failed, ascending.
  std::vector<int> failed_ranks();
  // Failed, or left the job: it will take part in nothing more.
  bool gone(int rank);
  // Said goodbye (destroy_process_group), failed or not.
  bool left(int rank);
  // A rank on this host whose process is stopped (peers.hpp); false
  // elsewhere or when the store cannot say (read capped at 1 s).
  bool stopped(int rank);
  // The store key a rank sets as it leaves (teardown), before its process
  // exits: a peer that then sees the process gone knows it left, not died.
  static std::string goodbye_key(int rank) { return "bye/" + std::to_string(rank); }
  // The store key a rank that leaves on an error sets, before its process
  // exits, to its leaving word (the rank it names): for peers that find it
  // gone and never read its goodbye or mapped its memory (shutdown).
  static std::string last_word_key(int rank) { return "lastword/" + std::to_string(rank); }
  // For agreement (recovery.cpp): reads the failure log now, and records as
  // failed those of `peers` that are gone (their process exited, on this
  // host; a listener refusing, elsewhere). Throws only if the store is lost.
  void refresh_failures(const std::vector<int>& peers);
  // Ranks that failed (teardown waits for the others' goodbye only).
  int failed_count();
  // The first other rank in the failure log's order that failed, or -1.
  int first_failed();
  // An op of this rank gave up (its error reached the caller) naming
  // `named`: the first such rank is kept for leaving_word().
  void note_gave_up(int named);
  // Why this rank leaves, should it leave on an error: the first failure it
  // learned of, else the rank its first give-up named (a timeout names no
  // failure, only whom it waited on); -1 if neither.
  int leaving_word();
  // A store call outside the engine failed with `e` (agreement): when the
  // store is unreachable, the job is over as the watchdog would find it
  // (naming rank 0, its host); other errors are rethrown as they are.
  [[noreturn]] void store_call_failed(const Error& e);

  // Says goodbye to every peer and stops the background thread. A rank that
  // leaves on an error passes leaving_word(): its goodbye says that rank,
  // where it names no failure, for peers left waiting on this rank.
  void shutdown(int why = -1);

 private:
  // What a peer found gone left in the store: its goodbye (it called
  // destroy_process_group), or its last word (the rank it named as it left
  // on an error).
  struct Farewell {
    bool bye = false;
    int last_word = -1;
  };
  // Store reads, capped at 1 s together; never throws (a store that does
  // not answer reads as no farewell: the watchdog reports it). Called
  // without mu_.
  Farewell farewell(int peer);
  // A gone peer's farewell and what it knew, noted before its own failure:
  // the rank its last word names. mu_ held.
  void note_farewell_locked(int peer, const Farewell& f);
  // A peer whose process is gone: left, if it said goodbye first (its
  // pending receives fail saying so), else failed (logged, its groups
  // poisoned), after its farewell. mu_ held.
  void note_gone_locked(int peer, const Farewell& f);
  // A gone peer's word of a failure it learned of before it went
  // (Transport::knew_failed), noted first: it may be why the peer left.
  void note_what_it_knew_locked(int peer);
  // How often a long wait asks the store whether the job was aborted.
  static constexpr auto kWatchdogPeriod = std::chrono::milliseconds(1000);
  // How long an abandoned send already on the wire to a live peer may take
  // to finish before its connection is given up (Engine::cancel).
  static constexpr auto kDrainWait = std::chrono::milliseconds(5000);
  struct WaitTarget;
  // True if anything moved: a transport made progress or an event came.
  bool progress_round(std::unique_lock<std::mutex>& lk, int timeout_ms);
  bool wait_locked(std::unique_lock<std::mutex>& lk, const std::function<bool()>& done,
                   Deadline deadline, int peer_hint);
  void release_graveyard(std::unique_lock<std::mutex>& lk);  // also publishes failures
  // Appends the failures found here to the store's log and reads the log's
  // new entries (the mutex is released meanwhile; one thread at a time).
  void publish_failures(std::unique_lock<std::mutex>& lk);
  void watchdog(std::unique_lock<std::mutex>& lk);
  // Reads log entries after log_read_ (without the mutex): (seq, value).
  std::vector<std::pair<std::uint64_t, std::string>> read_log(std::uint64_t from);
  void apply_log_locked(const std::vector<std::pair<std::uint64_t, std::string>>& entries);
  // Reads and applies the log's new entries now, the mutex released
  // meanwhile (no other thread may be publishing); the store's error, if
  // it could not be read.
  std::string read_log_now(std::unique_lock<std::mutex>& lk);
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
  // Sharing CPUs in a job across hosts: a spin looks at the file
  // descriptors every round (spin_round says why).
  bool fds_every_round_ = false;
  // The bound on held_bytes() (BRAID_MAX_UNEXPECTED_BYTES), and whether a
  // transport holds a peer back since hold_back() said so.
  std::size_t max_held_ = 0;
  bool holding_ = false;
  // After a receive is posted: lets transports read again what they held.
  void resume_held();
  // The whole job ends (the store is lost, its failure log is malformed).
  void abort_locked(const std::string& reason, int peer = -1);
  void store_lost_locked(const std::string& why);
  void fail_all_locked(const std::exception_ptr& e);
  // `rank` failed: poisons its groups, fails what waits on it or on them.
  // `seq`: its place in the failure log, if read from there; else it is
  // published unless `publish` is false (another rank did).
  void note_failure_locked(int rank, const std::string& reason, bool publish, std::uint64_t seq = kUnlogged);
  std::exception_ptr rank_error_locked(int rank) const;
  // The failure `peer` said it knew of as it left, a rank of the job other
  // than this one (as the transports' words are checked): in a
  // transport's goodbye or memory (`via`), else in the group's window
  // (`via` null); rank -1 where it said none.
  struct Word {
    int rank = -1;
    const Transport* via = nullptr;
  };
  Word word_of_locked(int peer) const;
  // failures_ in the log's order, each rank after the failure its word names.
  void order_failures_locked();
  std::exception_ptr group_error_locked(std::uint32_t id) const;
  // Why r cannot proceed (job abort, its group poisoned, its peer failed).
  std::exception_ptr request_error_locked(const Request& r) const;
  [[noreturn]] void throw_error(std::unique_lock<std::mutex>& lk, const std::function<std::exception_ptr()>& why);
  void ensure_connected(const Request& r, Deadline deadline);
  // A connect found `peer` gone (its listener refused, its process exited):
  // record its failure, publish, and throw.
  [[noreturn]] void connect_refused(const Request& r, const std::string& reason);

  bool routed(int peer) const;
  void spin_round(std::unique_lock<std::mutex>& lk, int round, int peer_hint);
  void kick();
  void async_loop();
  void expire_async_locked();
  // Withdraws r with error e; false (r untouched) if bytes of it are on the
  // wire, so that it can only finish or take its connection down with it.
  bool cancel_locked(Request& r, std::exception_ptr e);
  // cancel_locked, and if r is on the wire, break_off_locked (timeouts).
  void cancel_or_fail_locked(Request& r, std::exception_ptr e);
  // The stream to `peer` is out of step (an op gave up mid-transfer): its
  // transport drops it, and later ops with it are refused. Not a failure
  // of `peer`: nothing is logged or published, no group is poisoned.
  void break_off_locked(int peer, const std::exception_ptr& why);
  [[noreturn]] void throw_for(std::unique_lock<std::mutex>& lk, const Request& r);

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

  // Job abort: only the store's loss (or a malformed failure log).
  std::exception_ptr abort_error_;
  // Failed ranks, in the order of the job's failure log (those not yet
  // logged last, kUnlogged), and per rank.
  static constexpr std::uint64_t kUnlogged = ~std::uint64_t{0};
  struct Failure {
    int rank;
    std::uint64_t seq;
    std::string reason;
  };
  std::vector<Failure> failures_;
  std::vector<char> failed_;
  bool any_failed_ = false;
  std::atomic<bool> troubled_{false};  // any_failed_ or abort_error_, read without the mutex
  std::vector<int> unpublished_;  // found here, not yet in the log
  // Peers whose connection break_off_locked gave up, with the error later
  // ops with them get.
  std::unordered_map<int, std::exception_ptr> out_of_step_;
  std::uint64_t log_read_ = 0;    // log entries read so far
  bool publishing_ = false;       // a thread is writing or reading the log
  std::unordered_map<std::uint32_t, std::vector<int>> groups_;
  std::unordered_set<std::uint32_t> poisoned_;
  std::vector<char> left_;       // peers that said goodbye
  std::vector<char> bye_heard_;  // peers whose goodbye arrived, with their messages perhaps not all in
  int gave_up_named_ = -1;       // note_gave_up's first rank
  std::function<int(int)> window_word_;  // set_window_word

  // Async ops: counted so the background thread sleeps when idle.
  std::vector<Request*> async_reqs_;
  std::vector<Deadline> async_deadlines_;
  std::vector<std::shared_ptr<void>> graveyard_;  // released outside the mutex
  std::thread async_thread_;
  bool stopping_ = false;
  Clock::time_point last_watchdog_{};
};

}  // namespace braid
