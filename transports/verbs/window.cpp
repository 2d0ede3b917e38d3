// verbs::Window's set-up and teardown: the block, one QP per peer, and the
// store records that join them (window.hpp).
#include "transports/verbs/window.hpp"

#include <algorithm>
#include <cstring>
#include <new>
#include <optional>
#include <thread>

#include "src/common/errors.hpp"
#include "src/common/log.hpp"
#include "transports/await_record.hpp"
#include "transports/verbs/queue_pair.hpp"
#include "transports/verbs/window_layout.hpp"
#include "transports/verbs/window_record.hpp"

namespace braid::verbs {

namespace {

std::string key(std::uint32_t group, int rank, const char* suffix = "") {
  return fmt::format("osv/{}/{}{}", group, rank, suffix);
}

// A peer's record, check_alive asked while it is missing, so a peer that
// died before publishing is named within the deadline.
store::Bytes peer_record(store::Store& store, const std::string& k, int world_rank, Deadline deadline,
                         const std::function<void(int)>& check_alive, const char* what) {
  return await_record(
      store, k, deadline, [&] { check_alive(world_rank); },
      [&] {
        fail_peer(ErrorCode::Timeout, world_rank,
                  "RDMA window: rank {} did not {} before the deadline (a rank that passed other counts than this "
                  "one may run the call as messages instead)",
                  world_rank, what);
      });
}

}  // namespace

Window::Window(store::Store& store, std::uint32_t group_id, std::vector<int> world, int me, Deadline deadline,
               const std::function<void(int)>& check_alive)
    : onesided::Window(std::move(world), me), check_alive_(check_alive), peers_(world_.size()), sent_(world_.size(), 0),
      slot_busy_(kStagingSlots, false) {
  const int n = size();
  std::string why;
  dev_ = open_device(&why);
  if (!dev_) throw Error(ErrorCode::NotSupported, fmt::format("RDMA window: {}", why));
  pd_.reset(ibv_alloc_pd(dev_->ctx.get()));
  if (!pd_) fail(ErrorCode::Transport, "RDMA window: ibv_alloc_pd on {} failed: {}", dev_->name, errno_text());
  const int want = n * static_cast<int>(kSendWr) + 16;
  cq_.reset(ibv_create_cq(dev_->ctx.get(), std::min(want, dev_->attr.max_cqe), nullptr, nullptr, 0));
  if (!cq_) fail(ErrorCode::Transport, "RDMA window: ibv_create_cq failed: {}", errno_text());

  const Layout lay(n);
  block_bytes_ = lay.total();
  block_ = allocate_aligned(block_bytes_);  // zeroed: every count starts at 0
  block_mr_.reset(ibv_reg_mr(pd_.get(), block_.get(), block_bytes_, kAccess));
  if (!block_mr_)
    fail(ErrorCode::Transport, "RDMA window: cannot register its {}-byte block: {}", block_bytes_, errno_text());
  for (int q = 0; q < n; ++q) new (block_.get() + lay.ledger(q)) onesided::LedgerBlock{};
  reg_ = std::make_unique<RegCache>(pd_.get());

  // Our QPs, and the record that tells peers how to reach them.
  std::vector<QpEndpoint> mine(static_cast<std::size_t>(n));
  for (int q = 0; q < n; ++q) {
    if (q == me) continue;
    QpLimits limits;
    limits.send_wr = kSendWr;
    limits.recv_wr = 1;
    limits.access = kAccess;
    peers_[static_cast<std::size_t>(q)].qp = create_rc_qp(*dev_, pd_.get(), cq_.get(), limits);
    mine[static_cast<std::size_t>(q)] = local_endpoint(*dev_, peers_[static_cast<std::size_t>(q)].qp.get(), random_psn());
  }
  WindowRecordHead head;
  head.group = group_id;
  head.rank = static_cast<std::uint32_t>(me);
  head.nranks = static_cast<std::uint32_t>(n);
  head.block = reinterpret_cast<std::uint64_t>(block_.get());
  head.block_bytes = block_bytes_;
  head.rkey = block_mr_->rkey;
  store.set(key(group_id, me), make_window_record(head, mine));

  // Theirs: check every field before it reaches the adapter.
  for (int q = 0; q < n; ++q) {
    if (q == me) continue;
    const store::Bytes r = peer_record(store, key(group_id, q), world_rank(q), deadline, check_alive, "publish its RDMA window");
    std::string why;
    const auto theirs = read_window_record(r, {group_id, n, q, me, block_bytes_}, &why);
    if (!theirs) fail_peer(ErrorCode::Transport, world_rank(q), "RDMA window: rank {}: {}", world_rank(q), why);
    Peer& p = peers_[static_cast<std::size_t>(q)];
    p.block = theirs->block;
    p.rkey = theirs->rkey;
    connect_qp(p.qp.get(), *dev_, mine[static_cast<std::size_t>(q)], theirs->endpoint);
  }
  // Nobody WRITEs before every peer's QP can receive.
  store.set(key(group_id, me, "/up"), store::to_bytes("1"));
  for (int q = 0; q < n; ++q)
    if (q != me) (void)peer_record(store, key(group_id, q, "/up"), world_rank(q), deadline, check_alive, "connect its RDMA window");

  std::vector<const onesided::LedgerBlock*> ledgers(static_cast<std::size_t>(n), nullptr);
  for (int q = 0; q < n; ++q)
    ledgers[static_cast<std::size_t>(q)] = reinterpret_cast<const onesided::LedgerBlock*>(block_.get() + lay.ledger(q));
  ledger_.bind(reinterpret_cast<onesided::LedgerBlock*>(block_.get() + lay.ledger(me)), std::move(ledgers), this);
  BRAID_INFO("RDMA window for group {} ({} ranks) on {} port {} connected", group_id, n, dev_->name, dev_->port);
}

Window::~Window() {
  // Peers may still READ our buffers and Scratch for the calls we
  // completed; wait (bounded) until they have completed them too. Quietly:
  // a destructor neither throws nor aborts the job (the host's check would
  // do both for a peer that has already left, and the host may be gone).
  try {
    linger();
  } catch (...) {
  }
  drain_all();
  for (auto& held : held_)
    for (RegCache::Entry* e : held) reg_->release(e);
}

void Window::linger() {
  const auto* mine = reinterpret_cast<const onesided::LedgerBlock*>(block_.get() + Layout(size()).ledger(me_));
  const std::uint64_t done = mine->completed.load(std::memory_order_relaxed);
  const auto end = Clock::now() + kLinger;
  for (;;) {
    bool waiting = false;
    poll();
    for (int q = 0; q < size(); ++q)
      if (q != me_ && ledger_.peer_completed(q, done) < done && peers_[static_cast<std::size_t>(q)].error.empty())
        waiting = true;
    if (!waiting || Clock::now() >= end) return;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

}  // namespace braid::verbs
