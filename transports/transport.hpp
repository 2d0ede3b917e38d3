// Transport: moves the bytes of matched messages between two ranks.
//
// The engine owns matching, waiting and failure policy; a transport only
// moves frames and tells the engine what arrived. All calls happen with the
// engine mutex held; transports register their file descriptors with the
// engine's epoll set through EventSource.
#pragma once

#include <cstdint>
#include <exception>
#include <memory>

#include "core/request.hpp"

namespace braid {

struct Unexpected;

// Something the engine's epoll loop dispatches to.
class EventSource {
 public:
  virtual ~EventSource() = default;
  virtual void on_events(std::uint32_t epoll_events) = 0;
};

class Transport {
 public:
  virtual ~Transport() = default;
  virtual const char* name() const = 0;
  // Can this transport reach `peer` right now without further set-up?
  virtual bool connected(int peer) const = 0;
  // Starts sending r (r.peer, r.env, r.buf, r.bytes); the transport calls
  // Engine::complete(r) once the data left the caller's buffer.
  virtual void send(Request& r) = 0;
  // A receive matched an unexpected message this transport still holds (an
  // announced rendezvous, or an eager payload still arriving): deliver it
  // into r, or drop it if r is null (the receive failed).
  virtual void claim(std::unique_ptr<Unexpected> u, Request* r) = 0;
  // Withdraws r (timeout). Returns false if bytes of r are already on the
  // wire and the connection had to be closed.
  virtual bool cancel(Request& r) = 0;
  // Closes everything to `peer` after a failure; pending requests on it are
  // failed by the engine, not here.
  virtual void drop_peer(int peer) = 0;
  // Says goodbye to every peer and closes (destroy_process_group).
  virtual void shutdown() = 0;
  // Fails every request this transport holds (job abort).
  virtual void fail_all(const std::exception_ptr& e) = 0;
  // Frees what was retired; called when no progress round is in flight.
  virtual void reap() {}
  // Progress that no file descriptor announces (shared-memory rings, a
  // completion queue): called on every progress round. True if anything
  // happened.
  virtual bool poll() { return false; }
  // Before the engine sleeps in epoll_wait: arrange to be woken through an
  // fd in the epoll set. False if work arrived meanwhile (do not sleep).
  virtual bool prepare_sleep() { return true; }
  // After that sleep (called on every transport, prepared or not).
  virtual void after_sleep() {}
};

}  // namespace braid
