// Reliable-connected queue pairs and their state machine.
//
//   RESET --create_rc_qp--> INIT --to_rtr(remote)--> RTR --to_rts--> RTS
//   any state --to_error--> ERR   (flushes every outstanding work request)
//
// A QP is created in INIT, so receive buffers can be posted before the peer
// is known. to_rtr() needs what the peer published (QpEndpoint): its QP
// number, first packet sequence number, and where it is (GID on RoCE, which
// needs a global route header; LID on InfiniBand, plus a GRH when the peer is
// in another subnet). Both sides take the smaller of their path MTUs and
// bound RDMA READs in flight by the peer's responder resources.
#pragma once

#include <cstdint>
#include <string>

#include "transports/verbs/device.hpp"
#include "transports/verbs/verbs_objects.hpp"

namespace braid::verbs {

// What one end of a connection tells the other (see handshake.hpp).
struct QpEndpoint {
  RawGid gid{};
  std::uint32_t qpn = 0;
  std::uint32_t psn = 0;     // 24 bits
  std::uint16_t lid = 0;
  std::uint8_t mtu = 0;      // enum ibv_mtu (1..5)
  std::uint8_t ethernet = 0; // RoCE
  std::uint8_t rd_atom = 1;  // RDMA READs it can answer at once (responder resources)
};

struct QpLimits {
  std::uint32_t send_wr = 64;
  std::uint32_t recv_wr = 64;
  // What the peer may do to memory through this QP (ibv_access_flags): the
  // message connections only READ (rendezvous), one-sided windows WRITE too.
  int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ;
};

// An RC QP on `cq` (for both queues), moved to INIT. Throws braid::Error.
// Why a peer's endpoint cannot be used (QP number or PSN past 24 bits, an
// MTU code outside IBV_MTU_256..4096, a link layer other than IB or
// Ethernet, no READ depth); empty when it can.
std::string check_endpoint(const QpEndpoint& e);
QpPtr create_rc_qp(const Device& dev, ibv_pd* pd, ibv_cq* cq, const QpLimits& limits);
// INIT -> RTR -> RTS. `local_psn` is the PSN this side announced. Throws
// braid::Error(Transport) naming the step that failed.
void connect_qp(ibv_qp* qp, const Device& dev, const QpEndpoint& local, const QpEndpoint& remote);
// Moves the QP to ERR: the HCA stops touching its buffers, outstanding work
// requests complete with IBV_WC_WR_FLUSH_ERR. Best effort.
void qp_to_error(ibv_qp* qp);

// This side's endpoint for a QP on `dev`.
QpEndpoint local_endpoint(const Device& dev, ibv_qp* qp, std::uint32_t psn);
// A random 24-bit initial packet sequence number.
std::uint32_t random_psn();
// RDMA READs a QP on `dev` may have outstanding (as initiator and responder).
std::uint8_t read_depth(const Device& dev);

}  // namespace braid::verbs
