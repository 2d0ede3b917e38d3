// TcpTransport: TCP sockets between ranks, with connections set up lazily.
//
// Each rank listens on one port; its "host:port" is this transport's address.
// A rank dials a peer the first time it sends to it, unless the peer dialed
// it first: then it sends over that connection. One socket carries both
// directions, so a reply carries the acknowledgement of what it answers
// (with a socket per direction every acknowledgement is a segment of its
// own: 8-byte pingpong 6.05 us against 4.84, bench/RESULTS.md section 39).
// Two ranks that dial each other at once end with two sockets: both move
// their messages to the one the lower rank dialed. The side that moves
// writes SWITCH last on the old socket and FOLLOWS first on the new one, and
// the reader reads nothing after FOLLOWS before that SWITCH, so each
// direction stays one ordered stream (wire.hpp). The other socket stays
// open, unused. Control frames (CTS) go over the socket messages go over.
// DATA does not: each rank dials a socket of its own for the data of its
// large messages, since bulk both ways over one socket serialises on the
// socket's lock in the kernel.
//
// Messages up to the eager limit go in one frame; larger ones announce
// themselves (RTS) and stream into the posted receive buffer once matched
// (CTS, then DATA): large messages are never copied through an intermediate
// buffer and unexpected large messages cost no memory.
//
// With BRAID_TCP_SOCKETS=N a rank dials N sockets to each peer it sends to,
// and sends only over those: each direction has sockets of its own (as
// with BRAID_TCP_SHARED=0), and a CTS goes back over the socket its RTS
// came on.
// The first carries every frame but DATA as above. DATA goes over all of
// them: a message of at least 2 x 512 KiB is cut into up to N parts, each
// with its offset, one per socket (the receive completes when all its bytes
// are in), and successive messages start on successive sockets. One stream
// is one kernel path and, on a fast link, one CPU's copying: several fill
// what one cannot.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "src/common/auth.hpp"
#include "src/common/fd.hpp"
#include "transports/tcp/connection.hpp"
#include "transports/transport.hpp"

namespace braid {

class TcpTransport final : public Transport, private EventSource {
 public:
  TcpTransport(TransportHost& host, const TransportConfig& cfg);
  ~TcpTransport() override;

  const char* name() const override { return "tcp"; }
  // "host:port" of the listener.
  std::string address() const override { return address_; }
  // Every peer with a listener address.
  bool reaches(const PeerInfo& peer, std::string* why) const override;
  // Blocking connect + HELLO. Refused when the peer's listener refuses
  // (its process is gone); throws a Timeout when it does not answer.
  ConnectResult connect(const PeerInfo& peer, Deadline deadline) override;
  void adopt(int peer, std::unique_ptr<Dialed> d) override;
  bool connected(int peer) const override;
  // A connection the peer dialed to us is open: its EOF would tell.
  bool watching(int peer) const override;
  // Its listener refuses a connection.
  bool probe_gone(const PeerInfo& peer) override;

  void send(Request& r) override;
  void claim(std::unique_ptr<Unexpected> u, Request* r) override;
  void reject(std::unique_ptr<Unexpected> u, const Refusal& by) override;
  bool cancel(Request& r) override;
  void drop_peer(int peer) override;
  void fail_peer(int peer, const std::exception_ptr& e) override;
  void break_off(int peer, const std::exception_ptr& e) override;
  int knew_failed(int peer) const override;
  void leaving_because_of(int rank) override;
  // The peer's goodbye carried `word`: 1 + the first rank it had learned
  // had failed, or 0 (Transport::knew_failed).
  void heard_goodbye(int peer, std::uint64_t word);
  void shutdown() override;
  // Fails every request this transport holds (job abort).
  void fail_all(const std::exception_ptr& e) override;
  // Frees closed connections; only when no progress round is in flight.
  void reap() override;
  // Connections held back (hold_back) read again.
  void resume() override;
  int poll_peer(int peer) override;

  std::size_t eager_limit() const { return eager_limit_; }
  // Open sockets this rank dialed to `peer`, and accepted from it.
  int sockets_to(int peer) const;
  int accepted_from(int peer) const { return incoming_[static_cast<std::size_t>(peer)]; }
  // DATA frames (whole messages or parts) written so far.
  std::uint64_t parts_sent() const { return parts_sent_; }
  // One socket carries both directions with each peer (the default, with
  // one socket per peer).
  bool shares() const { return shared_; }
  // The socket this rank sends to `peer` over is one it dialed (tests).
  bool sends_on_dialed(int peer) const { return connected(peer) && out_[static_cast<std::size_t>(peer)]->dialed(); }
  // Times a socket waited at FOLLOWS for the SWITCH on the old one (tests).
  std::uint64_t switch_waits() const { return switch_waits_; }

 private:
  friend class Connection;
  void on_events(std::uint32_t events) override;  // the listener
  // Called by connections.
  TransportHost& host() { return host_; }
  // A HELLO's claims (job, rank, world); false (and c retired) if foreign.
  bool hello_valid(Connection& c, const wire::FrameHeader& h);
  // The host holds `peer` back and no rendezvous of ours waits for its DATA.
  bool hold_back(int peer);
  // The accepted connection c speaks for its HELLO's rank from now on.
  void accept_peer(Connection& c, int peer);
  // One socket per pair: c, just dialed or accepted from a peer that
  // shares, becomes the socket messages to it go over, or is told it never
  // will (SWITCH 0). The socket the lower rank dialed wins.
  void take_carrier(Connection& c);
  void on_switch(Connection& c, const wire::FrameHeader& h);
  void on_follows(Connection& c);
  void note_shares(int peer) { shares_with_[static_cast<std::size_t>(peer)] = 1; }
  // The job's secret, or null (auth.hpp); and the label each side's proof
  // is made under, bound to the HELLO's job, rank and world.
  const auth::Secret* secret() const { return secret_.get(); }
  static std::string proof_label(bool acceptor, const wire::FrameHeader& hello);
  void on_rts(Connection& c, const wire::FrameHeader& h);
  void on_cts(Connection& c, const wire::FrameHeader& h);
  // The receive a DATA frame (or a part of one) fills, or null to drain it.
  Request* on_data(const wire::FrameHeader& h);
  // A part of r's data has arrived: r completes with its last.
  void data_arrived(Request& r, std::size_t bytes);
  // No connection writes into r any more (a part failed, or was cancelled).
  void divert_everywhere(Request& r);
  void send_cts(Connection& c, Request* r, std::uint64_t send_token, std::size_t bytes,
                const Refusal* refused = nullptr);
  Connection* live(std::uint64_t id) const;
  void connection_broken(Connection& c, const std::string& why);
  // A failure the peer's goodbye said it learned of is why it left, maybe:
  // noted first, so that it comes first in the failure log.
  void note_why_it_left(int peer);
  // Completes with `e` (and forgets) the requests of `tokens` that belong.
  void complete_if(std::unordered_map<std::uint64_t, Request*>& tokens, const std::exception_ptr& e,
                   const std::function<bool(const Request&)>& belongs);
  void connection_closed_cleanly(Connection& c);
  void retire(Connection& c, bool park = false);
  // Writes HELLO (and the nonce, where the job has a secret) on a socket
  // dialed to a peer's listener; returns the HELLO, bound into the proofs.
  wire::FrameHeader say_hello(int fd, Deadline deadline, const std::string& who, auth::Nonce* nonce,
                              std::uint8_t flags);
  // Says `bye` to `peer` over a socket dialed for it alone, where every
  // socket to it is mid-frame (shutdown()); bounded by `deadline`.
  void goodbye_afresh(int peer, const net::SockAddr& listener, const wire::FrameHeader& bye, Deadline deadline);
  // Completes with `e` every request held for `peer`.
  void fail_requests_with(int peer, const std::exception_ptr& e);
  void fail_requests_of(Connection& c, const std::exception_ptr& e);
  std::uint64_t job_id() const { return cfg_.job_id; }

  TransportHost& host_;
  TransportConfig cfg_;
  std::shared_ptr<const auth::Secret> secret_ = auth::secret_from_env();
  Fd listen_fd_;
  std::string address_;
  std::size_t eager_limit_;
  std::string congestion_;  // BRAID_TCP_CONGESTION; "" keeps the kernel's default

  std::vector<std::unique_ptr<Connection>> conns_;  // live
  // poll_peer's connections of the peer it was last asked for, found again
  // whenever conns_ or a connection's peer changed (conns_changed_).
  struct PeerConns {
    int peer = -1;
    std::uint64_t seen = 0;
    std::vector<Connection*> conns;
    std::vector<Connection*> data;  // sharing: the sockets its DATA comes on
  };
  PeerConns polled_;
  std::uint64_t conns_changed_ = 1;
  std::vector<std::unique_ptr<Connection>> retired_;  // closed, freed by reap()
  // Sockets of connections break_off() left out of step, with the peer's
  // listener where the connection was dialed (for goodbye_afresh()).
  struct Parked {
    int peer;
    std::optional<net::SockAddr> listener;
    Fd fd;
  };
  std::vector<Parked> parked_;
  // Connections that ended while connection_broken() read a peer's last
  // words, handled after it.
  std::vector<std::pair<Connection*, std::string>> broken_while_draining_;
  int sockets_;                   // dialed per peer (BRAID_TCP_SOCKETS)
  bool shared_;                   // one socket per pair (sockets_ == 1, BRAID_TCP_SHARED)
  std::vector<Connection*> out_;  // the connection this rank sends over, per peer
  // Per peer, out_ is set: connect() dials no more. Read by connect(),
  // which runs outside the host's lock.
  std::unique_ptr<std::atomic<bool>[]> carrier_;
  std::vector<std::uint8_t> shares_with_;  // per peer, it shares one socket per pair (its HELLO or SWITCH said)
  // Sharing, per peer: how far its clean exit has come, and whether the
  // socket its DATA came over has ended (connection_closed_cleanly).
  enum class Ending : std::uint8_t { None, DataOwed, Left };
  std::vector<Ending> ending_;
  std::vector<std::uint8_t> data_ended_;
  std::vector<std::uint8_t> switched_;     // per peer, a SWITCH 1 read and its FOLLOWS not yet
  std::vector<Connection*> paused_;        // per peer, the socket read up to FOLLOWS, awaiting the SWITCH
  std::uint64_t switch_waits_ = 0;
  std::vector<std::optional<net::SockAddr>> listeners_;  // per peer, its listener, once connect() read it
  std::vector<std::vector<Connection*>> stripes_;  // per peer, the other sockets dialed to it
  std::vector<std::size_t> turn_;                   // per peer, the socket the next DATA starts on
  std::vector<int> incoming_;     // count of live accepted connections per peer
  std::uint32_t first_failed_ = 0;     // 1 + the first rank fail_peer was told of; our goodbye says it
  bool draining_ = false;              // connection_broken reads what a broken peer sent last
  std::vector<std::uint64_t> bye_knew_;  // per peer, what its goodbye said (heard_goodbye)

  std::unordered_map<std::uint64_t, Request*> rts_out_;  // sends awaiting CTS
  std::unordered_map<std::uint64_t, Request*> rdv_in_;   // receives awaiting DATA
  std::uint64_t next_token_ = 1;
  std::uint64_t parts_sent_ = 0;
  std::uint64_t next_conn_id_ = 1;
};

}  // namespace braid
