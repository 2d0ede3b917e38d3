// ShmTransport: ranks on one host, through shared memory.
//
// Small messages are copied into the receiver's inbound ring for this sender
// and out again (two copies, no system call when the receiver is awake).
// Large messages are announced (RTS with the sender's address) and the
// receiver copies them straight from the sender's memory into the posted
// buffer with process_vm_readv (one copy), then answers FIN.
//
// Waking: a receiver about to sleep in the engine's epoll sets `sleeping` in
// its segment and re-checks its rings; a sender, after publishing a record,
// writes the receiver's eventfd only if it is asleep (a Dekker handshake:
// each side stores, fences, then loads the other's word). So awake receivers
// cost the sender nothing, and one epoll waits on sockets and shared memory
// alike.
//
// Death: a pidfd per peer, in the host's epoll, fires when the process
// exits. A peer that left cleanly sent BYE through every ring it wrote and
// marked its own segment Left first; otherwise the exit is a failure.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "transports/shm/segment.hpp"
#include "transports/transport.hpp"

namespace braid {

class ShmTransport final : public Transport {
 public:
  ShmTransport(TransportHost& host, const TransportConfig& cfg);
  ~ShmTransport() override;

  const char* name() const override { return "shm"; }
  // What peers need to attach to us: "pid memfd eventfd".
  std::string address() const override;
  // Peers on this host (as the runtime's host identity says).
  bool reaches(const PeerInfo& peer, std::string* why) const override;
  // Takes the peer's memfd and eventfd through a pidfd and maps its segment.
  // Unavailable (with the reason) when the kernel does not allow it; the
  // runtime then tries the next transport.
  ConnectResult connect(const PeerInfo& peer, Deadline deadline) override;
  void adopt(int peer, std::unique_ptr<Dialed> d) override;
  bool connected(int peer) const override;
  // A pidfd watches the peer's process.
  bool watching(int peer) const override;

  void send(Request& r) override;
  void claim(std::unique_ptr<Unexpected> u, Request* r) override;
  void reject(std::unique_ptr<Unexpected> u, const Refusal& by) override;
  bool cancel(Request& r) override;
  void drop_peer(int peer) override;
  void fail_peer(int peer, const std::exception_ptr& e) override;
  void break_off(int peer, const std::exception_ptr& e) override;
  int knew_failed(int peer) const override;
  // Maps its segment (its header: state, first_failed) until adopt() maps it
  // for use; a peer we cannot attach to now is left as it is.
  void keep_word_of(const PeerInfo& peer) override;
  // A failure `peer` learned of before it went (knew_failed) is noted first,
  // as reported by it `when` (as it left, before it exited, ...).
  void note_what_it_knew(int peer, const char* when);
  void leaving_because_of(int rank) override;
  void shutdown() override;
  void fail_all(const std::exception_ptr& e) override;

  // Drains inbound rings and retries records that found a ring full. True
  // if anything happened. Called by the engine on every progress round.
  bool poll() override;
  bool cheap_poll() const override { return true; }
  // The sleep handshake (see above). prepare_sleep() returns false when
  // work arrived meanwhile: do not sleep.
  bool prepare_sleep() override;
  void after_sleep() override;

  struct Peer;

 private:
  friend class PeerWatch;
  // A peer's segment mapped and its doorbell taken, not yet in use.
  struct Attachment final : Dialed {
    pid_t pid = 0;
    Fd pidfd;
    shm::Mapping seg;
    Fd doorbell;
  };
  // Null (with `why`) when the kernel does not let us attach.
  std::unique_ptr<Attachment> attach(int peer, const std::string& address, std::string* why);
  void on_peer_exit(int peer);
  // Fails every send to `peer`, queued or announced (awaiting its FIN).
  void fail_sends_to(int peer, const std::exception_ptr& e);
  // Whether `src` voided its announced message `token` (break_off on its side).
  bool withdrawn(int src, std::uint64_t token) const;
  static std::exception_ptr left_error(int peer);
  bool drain(int sender);
  // The host holds `sender` back (TransportHost::hold_back) and no send of
  // ours waits for its FIN: its ring is left as it is.
  bool held(int sender);
  void deliver_eager(int src, const shm::RecordHeader& h, const std::uint8_t* payload);
  void deliver_rts(int src, const shm::RecordHeader& h);
  void pull(int src, std::uint64_t addr, std::uint64_t token, Request* r, const Refusal* refused = nullptr);
  void push_or_queue(int peer, const shm::RecordHeader& h, Request* r);
  bool flush_pending(int peer);
  void ring_doorbell(Peer& p);
  void watch_sender(int sender);
  Peer& peer(int p) { return *peers_[static_cast<std::size_t>(p)]; }

  TransportHost& host_;
  TransportConfig cfg_;
  shm::Mapping own_;
  Fd doorbell_;  // our eventfd, in the engine's epoll
  std::unique_ptr<EventSource> doorbell_src_;
  std::vector<std::unique_ptr<Peer>> peers_;
  std::vector<std::uint64_t> tails_;  // consumer position per inbound ring
  std::size_t eager_limit_;
  std::unordered_map<std::uint64_t, Request*> rts_out_;  // sends awaiting FIN
  std::uint64_t next_token_ = 1;
  bool shut_ = false;
};

}  // namespace braid
