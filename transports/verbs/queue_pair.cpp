#include "transports/verbs/queue_pair.hpp"

#include <sys/random.h>

#include <algorithm>
#include <cstring>

#include "src/common/errors.hpp"

namespace braid::verbs {

std::string check_endpoint(const QpEndpoint& e) {
  if (e.qpn == 0 || e.qpn > 0xffffff || e.psn > 0xffffff)
    return fmt::format("bad queue pair number {} or PSN {}", e.qpn, e.psn);
  if (e.mtu < IBV_MTU_256 || e.mtu > IBV_MTU_4096) return fmt::format("bad MTU code {}", e.mtu);
  if (e.ethernet > 1 || e.rd_atom == 0) return "bad link layer or READ depth";
  return {};
}

namespace {
// Local ACK timeout 4.096 us * 2^16 = 268 ms, 7 retries: a peer whose HCA
// stops answering fails the QP within about 2 s. (A dead peer process is
// usually seen sooner, through the connection socket.)
constexpr std::uint8_t kAckTimeout = 16;
constexpr std::uint8_t kRetryCount = 7;
// Receiver-not-ready: credits guarantee a posted buffer, so RNR means a bug;
// retry a few times rather than forever (7 would be "forever").
constexpr std::uint8_t kRnrRetry = 6;
constexpr std::uint8_t kMinRnrTimer = 12;  // 0.64 ms
constexpr std::uint8_t kHopLimit = 64;
constexpr std::uint8_t kMaxReadDepth = 16;
}  // namespace

std::uint32_t random_psn() {
  std::uint32_t v = 0;
  if (getrandom(&v, sizeof v, 0) != sizeof v) v = 0x1234;
  return v & 0xffffff;
}

std::uint8_t read_depth(const Device& dev) {
  const int d = std::min({dev.attr.max_qp_rd_atom, dev.attr.max_qp_init_rd_atom, int{kMaxReadDepth}});
  return static_cast<std::uint8_t>(std::max(d, 1));
}

QpPtr create_rc_qp(const Device& dev, ibv_pd* pd, ibv_cq* cq, const QpLimits& limits) {
  ibv_qp_init_attr ia{};
  ia.send_cq = cq;
  ia.recv_cq = cq;
  ia.qp_type = IBV_QPT_RC;
  ia.sq_sig_all = 1;  // every send completes visibly: its slot or READ is tracked
  ia.cap.max_send_wr = limits.send_wr;
  ia.cap.max_recv_wr = limits.recv_wr;
  ia.cap.max_send_sge = 1;
  ia.cap.max_recv_sge = 1;
  QpPtr qp(ibv_create_qp(pd, &ia));
  if (!qp)
    fail(ErrorCode::Transport, "verbs: ibv_create_qp on {} failed: {} (send {} recv {} work requests)", dev.name,
         errno_text(), limits.send_wr, limits.recv_wr);
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.pkey_index = 0;
  a.port_num = static_cast<std::uint8_t>(dev.port);
  a.qp_access_flags = static_cast<unsigned>(limits.access);
  if (int err = ibv_modify_qp(qp.get(), &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
    fail(ErrorCode::Transport, "verbs: QP RESET->INIT on {} failed: {}", dev.name, errno_text(err));
  return qp;
}

QpEndpoint local_endpoint(const Device& dev, ibv_qp* qp, std::uint32_t psn) {
  QpEndpoint e;
  e.gid = dev.gid;
  e.qpn = qp->qp_num;
  e.psn = psn;
  e.lid = dev.port_attr.lid;
  e.mtu = static_cast<std::uint8_t>(dev.port_attr.active_mtu);
  e.ethernet = dev.ethernet ? 1 : 0;
  e.rd_atom = read_depth(dev);
  return e;
}

void connect_qp(ibv_qp* qp, const Device& dev, const QpEndpoint& local, const QpEndpoint& remote) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = static_cast<ibv_mtu>(std::min(local.mtu, remote.mtu));
  a.dest_qp_num = remote.qpn;
  a.rq_psn = remote.psn;
  a.max_dest_rd_atomic = local.rd_atom;  // READs we answer: what we announced
  a.min_rnr_timer = kMinRnrTimer;
  a.ah_attr.port_num = static_cast<std::uint8_t>(dev.port);
  a.ah_attr.sl = 0;
  a.ah_attr.src_path_bits = 0;
  // RoCE always routes by GID with a global route header; InfiniBand by LID,
  // with a GRH only when the peer's subnet prefix differs from ours.
  const bool other_subnet = !dev.ethernet && dev.gid_index >= 0 && std::memcmp(remote.gid.data(), dev.gid.data(), 8) != 0;
  if (dev.ethernet || other_subnet) {
    a.ah_attr.is_global = 1;
    std::memcpy(a.ah_attr.grh.dgid.raw, remote.gid.data(), 16);
    a.ah_attr.grh.sgid_index = static_cast<std::uint8_t>(dev.gid_index < 0 ? 0 : dev.gid_index);
    a.ah_attr.grh.hop_limit = kHopLimit;
    a.ah_attr.grh.traffic_class = 0;
    a.ah_attr.grh.flow_label = 0;
  } else {
    a.ah_attr.is_global = 0;
    a.ah_attr.dlid = remote.lid;
  }
  if (int err = ibv_modify_qp(qp, &a,
                              IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                  IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
    fail(ErrorCode::Transport, "verbs: QP INIT->RTR on {} failed: {} (remote QPN {}, GID {}, MTU {})", dev.name,
         errno_text(err), remote.qpn, gid_text(remote.gid), mtu_bytes(a.path_mtu));
  ibv_qp_attr s{};
  s.qp_state = IBV_QPS_RTS;
  s.timeout = kAckTimeout;
  s.retry_cnt = kRetryCount;
  s.rnr_retry = kRnrRetry;
  s.sq_psn = local.psn;
  s.max_rd_atomic = std::min(local.rd_atom, remote.rd_atom);  // READs we issue: what the peer answers
  if (int err = ibv_modify_qp(qp, &s,
                              IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                                  IBV_QP_MAX_QP_RD_ATOMIC))
    fail(ErrorCode::Transport, "verbs: QP RTR->RTS on {} failed: {}", dev.name, errno_text(err));
}

void qp_to_error(ibv_qp* qp) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_ERR;
  ibv_modify_qp(qp, &a, IBV_QP_STATE);
}

}  // namespace braid::verbs
