// VerbsTransport: RDMA between ranks over reliable-connected queue pairs
// (InfiniBand, or RoCE v2 with a global route header).
//
// Connections. Set up lazily, on a rank's first send to a peer, through a
// TCP side channel whose address is in the store (handshake.hpp). As with
// TCP, a rank sends its messages only over the connection it dialed and
// receives over those its peers dialed, so each direction is one ordered QP
// and two ranks dialing each other at once never race. The dialed side's
// peer answers FIN and credits back over the same QP.
//
// Messages. Up to the eager limit (BRAID_IB_EAGER_LIMIT, 16 KiB) a message
// is copied into a registered slot and SENT into one of the receiver's
// pre-posted buffers, under credit-based flow control (eager.hpp); the send
// completes as soon as it is copied. Larger ones are zero-copy: RTS
// announces (address, rkey) of the sender's registered buffer, the receiver
// RDMA READs it straight into the posted receive buffer once matched and
// answers FIN; unexpected large messages cost no memory. Both kinds are
// matched when their header arrives, in QP order, so the matcher's
// non-overtaking rule holds across them. User buffers are registered through
// RegCache (reg_cache.hpp).
//
// Visibility. A receive completes once its bytes are in the caller's buffer:
// the receive (or last READ) completion guarantees the HCA's writes are
// visible to the CPU, and eager payloads are copied out before completing.
// A send completes when its buffer may be reused: an eager one once copied
// into a slot, a rendezvous one on FIN, after the receiver's last READ.
//
// Progress and sleep. One completion queue for every QP, polled by poll() on
// each progress round of the host (the ShmTransport precedent); its completion
// channel fd sits in the host's epoll, armed by prepare_sleep() before the
// host sleeps, so a waiter sleeps in the kernel rather than spinning.
//
// Failure. An error completion (retry exceeded, remote access error, a
// flush we did not cause), a malformed message, or the liveness socket
// closing without BYE fails the peer through TransportHost::peer_failed, which
// fails every op pending with it (and the job) with an error naming it.
//
// All calls happen with the host's lock held, except connect().
//
// Files: device (device, port, GID), queue_pair (the QP state machine),
// handshake (connection set-up over TCP), eager (buffers and credits),
// reg_cache (registrations), verbs_wire (messages); this class is split in
// verbs_connections.cpp (set-up, liveness, failure, teardown),
// verbs_transport.cpp (completions, messages, eager sends) and
// verbs_rendezvous.cpp (RTS, READ, FIN).
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "src/common/auth.hpp"
#include "src/common/fd.hpp"
#include "transports/transport.hpp"
#include "transports/verbs/device.hpp"
#include "transports/verbs/eager.hpp"
#include "transports/verbs/handshake.hpp"
#include "transports/verbs/reg_cache.hpp"
#include "transports/verbs/verbs_wire.hpp"

namespace braid {

class VerbsTransport final : public Transport, private EventSource {
 public:
  // Throws braid::Error(NotSupported) naming the reason when no RDMA device
  // with an active port is usable.
  VerbsTransport(TransportHost& host, const TransportConfig& cfg);
  // For backend "auto": null (logged) when no device is usable.
  static std::unique_ptr<VerbsTransport> try_create(TransportHost& host, const TransportConfig& cfg);
  ~VerbsTransport() override;

  const char* name() const override { return "verbs"; }
  // "host:port" of the handshake listener.
  std::string address() const override { return address_; }
  const verbs::Device& device() const { return *dev_; }

  // Between hosts; on one host too when the backend forces verbs.
  bool reaches(const PeerInfo& peer, std::string* why) const override;
  // Creates the QP, connects to the peer's handshake listener and writes
  // the request. Unavailable when the peer published no verbs address (no
  // device there); refused when its listener refuses.
  ConnectResult connect(const PeerInfo& peer, Deadline deadline) override;
  // Sends to `peer` queue on the connection until the peer's answer arrives.
  void adopt(int peer, std::unique_ptr<Dialed> d) override;
  bool connected(int peer) const override;
  // A liveness socket to `peer` is open (its death will be seen).
  bool watching(int peer) const override;

  struct Conn;
  struct ConnDeleter {  // Conn is private to transports/verbs
    void operator()(Conn* c) const;
  };
  using DialedConn = std::unique_ptr<Conn, ConnDeleter>;

  void send(Request& r) override;
  void claim(std::unique_ptr<Unexpected> u, Request* r) override;
  void reject(std::unique_ptr<Unexpected> u, const Refusal& by) override;
  bool cancel(Request& r) override;
  void drop_peer(int peer) override;
  void fail_peer(int peer, const std::exception_ptr& e) override;
  void break_off(int peer, const std::exception_ptr& e) override;
  void shutdown() override;
  void fail_all(const std::exception_ptr& e) override;
  void reap() override;

  // Polls the completion queue and moves queued work; true if anything
  // happened. Called by the host on every progress round.
  bool poll() override;
  // Arms the completion channel before the host sleeps in epoll; false
  // when work arrived meanwhile (do not sleep).
  bool prepare_sleep() override;

  std::size_t eager_limit() const { return eager_limit_; }
  const verbs::RegCache& reg_cache() const { return *cache_; }

 private:
  friend struct Conn;
  struct Outgoing;
  struct ReadOp;
  struct RtsOut;
  class CqWatch;

  void on_events(std::uint32_t events) override;  // the listener
  void on_cq_event();
  void on_socket(Conn& c, std::uint32_t events);
  // Connection set-up (verbs_transport.cpp).
  void setup_qp(Conn& c);
  // What this rank says of itself and of c's QP in a Hello.
  verbs::HelloFields hello_fields(const Conn& c) const;
  void accept_request(Conn& c);
  void finish_dial(Conn& c);
  // The authenticated handshake's second steps (handshake.hpp).
  void accept_proof(Conn& c);
  void dial_ready(Conn& c);
  // Writes a handshake message whole into the connection's fresh socket.
  bool send_now(Conn& c, const void* p, std::size_t n);
  void start_flow(Conn& c, const verbs::HelloFields& remote);
  // Completions and messages.
  bool drain_cq();
  void handle_completion(const ibv_wc& wc);
  void on_message(Conn& c, std::uint32_t index, std::uint32_t len);
  void deliver_eager(Conn& c, const verbs::MsgHeader& h, const std::uint8_t* payload);
  // Sending.
  void enqueue(Conn& c, Outgoing o);
  bool flush(Conn& c);
  bool post_message(Conn& c, verbs::MsgHeader h, const void* payload, std::size_t n);
  bool post_data(Conn& c, Request& r);
  bool send_credits(Conn& c);
  // Rendezvous (verbs_rendezvous.cpp).
  void on_rts(Conn& c, const verbs::MsgHeader& h);
  void on_fin(Conn& c, const verbs::MsgHeader& h);
  void start_read(Conn& c, Request& r, std::uint64_t addr, std::uint32_t rkey, std::uint64_t token);
  bool post_reads(Conn& c, std::uint32_t read_id);
  void on_read_done(Conn& c, std::uint32_t read_id);
  void send_fin(Conn& c, std::uint64_t token, std::uint8_t status, const Refusal& refused = {});
  // Failure and teardown.
  void malformed(Conn& c, const std::string& what);
  void conn_failed(Conn& c, const std::string& why);
  void on_eof(Conn& c);
  void closed_cleanly(Conn& c);
  void stop_reads(Conn& c, const char* why);
  void fail_requests_of(Conn& c, const std::exception_ptr& e);
  void retire(Conn& c);
  Conn* live(std::uint32_t id);

  TransportHost& host_;
  TransportConfig cfg_;
  std::shared_ptr<const auth::Secret> secret_ = auth::secret_from_env();
  std::size_t eager_limit_;
  // Declared in dependency order: destroyed in reverse (QPs and MRs before
  // the CQ and PD, those before the device context).
  std::unique_ptr<verbs::Device> dev_;
  verbs::PdPtr pd_;
  verbs::ChannelPtr channel_;
  verbs::CqPtr cq_;
  std::unique_ptr<verbs::SendSlots> slots_;
  std::unique_ptr<verbs::RegCache> cache_;
  std::uint32_t read_chunk_ = 0;

  Fd listen_fd_;
  std::string address_;
  std::unique_ptr<CqWatch> cq_watch_;
  bool armed_ = false;
  bool dirty_ = false;  // conns may have work to flush, credits to return, EOFs to settle
  bool shut_ = false;

  std::atomic<std::uint32_t> next_conn_id_{1};
  std::vector<std::unique_ptr<Conn>> conns_;    // live, or handshaking
  std::vector<std::unique_ptr<Conn>> retired_;  // closed; freed by reap()
  std::unordered_map<std::uint32_t, Conn*> live_;  // by id: whose completions count
  std::vector<Conn*> out_;  // dialed by us, per peer: carries our messages
  std::vector<Conn*> in_;   // dialed by the peer: carries its messages

  std::unordered_map<std::uint64_t, RtsOut> rts_out_;  // announced sends awaiting FIN
  std::unordered_map<std::uint32_t, ReadOp> reads_;   // receives being read
  std::uint64_t next_token_ = 1;
  std::uint32_t next_read_ = 1;
};

}  // namespace braid
