// The transport interface: what moves the bytes of matched messages between
// two ranks, and what it may ask of the runtime above it.
//
// Three faces, each small:
//   - TransportHost: everything a transport may ask of the runtime: complete
//     a request, take a posted receive or keep an unexpected message, report
//     a peer failed or left, register a file descriptor, ask whether the job
//     has aborted. A transport sees nothing else of the runtime, so it can be
//     driven alone against a fake host (tests/transports/).
//   - the connect face: the transport's address, whether it reaches a peer,
//     and a connect that says connected, refused (the peer is gone) or
//     unavailable (try the next transport), with the reason.
//   - the message face: send, claim an unexpected message, cancel, and the
//     progress hooks.
//
// Threading: every call except connect() happens with the host's lock held;
// connect() runs without it (it may block on the network up to its deadline)
// and adopt() finishes it under the lock.
#pragma once

#include <cstdint>
#include <exception>
#include <memory>
#include <string>

#include "src/common/time.hpp"
#include "transports/message.hpp"

namespace braid {

class Transport;

// Something the host's epoll loop dispatches to.
class EventSource {
 public:
  virtual ~EventSource() = default;
  virtual void on_events(std::uint32_t epoll_events) = 0;
};

class TransportHost {
 public:
  virtual ~TransportHost() = default;
  // r is done; `error` says it failed.
  virtual void complete(Request& r, std::exception_ptr error = nullptr) = 0;
  // Matching: the first posted receive that matches a message from `src`,
  // unlinked; or null.
  virtual Request* take_posted(int src, const Envelope& env) = 0;
  // A message (or its announcement) arrived before its receive: keep it for
  // a later receive. The reference stays valid until a receive takes it.
  virtual Unexpected& add_unexpected(std::unique_ptr<Unexpected> u) = 0;
  // `peer` died or broke the protocol: the host fails what waits on it.
  virtual void peer_failed(int peer, const std::string& reason) = 0;
  // `peer` said goodbye (destroy_process_group).
  virtual void peer_left(int peer) = 0;
  // `peer`'s goodbye arrived on one of several sockets: it has left, though
  // messages it sent before may still be arriving on another (peer_left
  // follows once they are in). Why ops on it fail may be asked now.
  virtual void peer_said_goodbye(int /*peer*/) {}
  virtual void add_fd(int fd, EventSource* src, std::uint32_t events) = 0;
  virtual void mod_fd(int fd, EventSource* src, std::uint32_t events) = 0;
  virtual void del_fd(int fd) = 0;
  // Why `peer` can no longer be talked to: its failure, or the job's abort
  // (the store is lost); null while it can.
  virtual std::exception_ptr peer_error(int peer) const = 0;
  // Backpressure: true while message data held for receives not yet posted
  // has reached its bound (BRAID_MAX_UNEXPECTED_BYTES) and no posted receive
  // could match a message from `peer`. A transport then stops reading what
  // `peer` sends (TCP's flow control, or a full ring, holds the sender back)
  // until the host calls its resume(). Never while a posted receive might be
  // the next message's: that would deadlock a correct program.
  virtual bool hold_back(int) { return false; }

  // A whole message arrived from `src` in transport memory (a ring slot, a
  // receive buffer): into the first matching posted receive, else kept as an
  // unexpected message (a copy). Built on the calls above (transport.cpp).
  void deliver_arrived(int src, const Envelope& env, const void* payload, std::size_t bytes, Transport* from);
  // Receive r matched unexpected message u: copy what arrived, or let the
  // transport that holds the rest deliver it (claim). A receive that cannot
  // take it (too small, another dtype) fails and the message is dropped.
  void deliver(std::unique_ptr<Unexpected> u, Request& r);
  // No receive will take u (it failed, or its group is poisoned): drop it,
  // letting its transport drain what is still arriving and tell the sender
  // of an announced message that it is not wanted (the send completes).
  void discard(std::unique_ptr<Unexpected> u);
};

// What every transport of a process is built with.
struct TransportConfig {
  int rank = 0;
  int world_size = 1;
  std::uint64_t job_id = 0;
  std::string store_host;  // to choose which local address to advertise
  bool forced = false;     // the backend names this transport (no fallback)
};

// What the runtime knows of a peer when it connects to it.
struct PeerInfo {
  int rank = -1;
  bool same_host = false;  // the runtime's host identity says so
  int pid = 0;             // its process id (meaningful on the same host)
  std::string address;     // what the peer's transport of this kind published
};

// A connection made outside the host lock, not yet in use; each transport
// derives its own.
struct Dialed {
  virtual ~Dialed() = default;
};

struct ConnectResult {
  enum class Status : std::uint8_t {
    Connected,    // `dialed` is ready for adopt()
    Refused,      // the peer is gone (its listener refused): a failure of that peer
    Unavailable,  // this transport cannot reach it; the next one may
  };
  Status status = Status::Unavailable;
  std::string reason;
  std::unique_ptr<Dialed> dialed;

  static ConnectResult connected(std::unique_ptr<Dialed> d) { return {Status::Connected, {}, std::move(d)}; }
  static ConnectResult refused(std::string why) { return {Status::Refused, std::move(why), nullptr}; }
  static ConnectResult unavailable(std::string why) { return {Status::Unavailable, std::move(why), nullptr}; }
};

class Transport {
 public:
  virtual ~Transport() = default;
  virtual const char* name() const = 0;

  // --- connect face -----------------------------------------------------------
  // What peers need to reach this rank through this transport (published in
  // the store by the runtime). Empty: peers cannot dial us this way.
  virtual std::string address() const = 0;
  // Could this transport reach `peer` at all (before any address is read)?
  // If not, `why` says so for the error that lists every transport tried.
  virtual bool reaches(const PeerInfo& peer, std::string* why) const = 0;
  // Connects to `peer` at `peer.address`, without the host lock, by
  // `deadline`. Throws braid::Error(Timeout) when the peer did not answer.
  virtual ConnectResult connect(const PeerInfo& peer, Deadline deadline) = 0;
  // Under the host lock: from now on send() to `peer` goes through `d`.
  virtual void adopt(int peer, std::unique_ptr<Dialed> d) = 0;
  // Can this transport send to `peer` right now without further set-up?
  virtual bool connected(int peer) const = 0;
  // Would this transport see `peer` die (a socket from it, a pidfd on it)?
  virtual bool watching(int /*peer*/) const { return false; }
  // A peer that may never have talked to us: is it known to be gone? Called
  // by the host's watchdog without the lock, for peers nothing watches.
  virtual bool probe_gone(const PeerInfo& /*peer*/) { return false; }

  // --- message face -------------------------------------------------------------
  // Starts sending r (r.peer, r.env, r.buf, r.bytes); the transport calls
  // host.complete(r) once the data left the caller's buffer.
  virtual void send(Request& r) = 0;
  // A receive matched an unexpected message this transport still holds (an
  // announced rendezvous, or an eager payload still arriving): deliver it
  // into r, or drop it if r is null (the receive failed).
  virtual void claim(std::unique_ptr<Unexpected> u, Request* r) = 0;
  // Receive `by` refused u (too small, another dtype): dropped as by
  // claim(u, nullptr), and where the message is still the sender's (an
  // announced one), its send fails too, naming both sides (Refusal).
  virtual void reject(std::unique_ptr<Unexpected> u, const Refusal&) { claim(std::move(u), nullptr); }
  // Withdraws r (timeout). Returns false if bytes of r are already on the
  // wire and the connection had to be closed.
  virtual bool cancel(Request& r) = 0;
  // Closes everything to `peer` after a failure; pending requests on it are
  // failed by the host, not here.
  virtual void drop_peer(int peer) = 0;
  // `peer` failed: completes with `e` every request this transport holds
  // for it (sends to it, receives streaming from it), then drop_peer().
  // Traffic with every other peer goes on: survivors may continue.
  virtual void fail_peer(int peer, const std::exception_ptr& e) = 0;
  // An op with `peer` was abandoned with bytes of it on the wire (it timed
  // out): the stream to it is out of step. Does what fail_peer does, but
  // records nothing of `peer` having failed: it is alive, most likely
  // stalled behind the rank that is really at fault, and this rank's
  // goodbye must not name it.
  virtual void break_off(int peer, const std::exception_ptr& e) = 0;
  // `peer`, gone now, learned before it went that this rank had failed (the
  // first failure it learned of), as it left word in memory this transport
  // shares with it; -1 where it did not, or this transport cannot tell. It
  // may have given up and exited because of that rank: with the store's
  // host among the dead, the failure log that would order the two is gone.
  virtual int knew_failed(int /*peer*/) const { return -1; }
  // Init, for each rank on this host (`peer.address` is this transport's):
  // keep what lets knew_failed read its word once it is gone, though no
  // message may ever pass between us. Otherwise a host-mate that left on
  // the store host's loss and exited first leaves no word here, and the
  // survivor that finds it gone names it (chaos: rank 0 killed in teardown,
  // over shm).
  virtual void keep_word_of(const PeerInfo& /*peer*/) {}
  // This rank leaves on an error that named `rank` (Engine::leaving_word),
  // just before shutdown(): where it learned of no failure, its word to
  // peers (knew_failed's) says that rank.
  virtual void leaving_because_of(int /*rank*/) {}
  // Says goodbye to every peer and closes (destroy_process_group).
  virtual void shutdown() = 0;
  // Fails every request this transport holds (job abort).
  virtual void fail_all(const std::exception_ptr& e) = 0;

  // --- progress -----------------------------------------------------------------
  // Frees what was retired; called when no progress round is in flight.
  virtual void reap() {}
  // Progress that no file descriptor announces (shared-memory rings, a
  // completion queue): called on every progress round. True if anything
  // happened.
  virtual bool poll() { return false; }
  // poll() costs no system call, so a spinning waiter may call it on every
  // round and look at the file descriptors only now and then.
  virtual bool cheap_poll() const { return false; }
  // A spinning waiter that awaits `peer`: read what it sent, now, straight
  // from the connections it writes on (one recv each), rather than after
  // epoll_wait said so: a message that lands is then read by one system
  // call instead of two. -1 where this transport holds no connection to
  // it, else 1 if anything arrived, 0 if not.
  virtual int poll_peer(int /*peer*/) { return -1; }
  // Before the host sleeps in epoll_wait: arrange to be woken through an fd
  // in the epoll set. False if work arrived meanwhile (do not sleep).
  virtual bool prepare_sleep() { return true; }
  // After that sleep (called on every transport, prepared or not).
  virtual void after_sleep() {}
  // The host's hold_back() may now say otherwise: read again what was held.
  virtual void resume() {}
};

}  // namespace braid
