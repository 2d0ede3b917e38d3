#include "transports/verbs/eager.hpp"

#include "src/common/errors.hpp"

namespace braid::verbs {

namespace {
MrPtr register_plain(ibv_pd* pd, void* p, std::size_t bytes, int access, const char* what) {
  MrPtr mr(ibv_reg_mr(pd, p, bytes, access));
  if (!mr)
    fail(ErrorCode::Transport,
         "verbs: cannot register {} ({} bytes): {} (the locked-memory limit, ulimit -l, may be too low)", what,
         bytes, errno_text());
  return mr;
}
}  // namespace

RecvRing::RecvRing(ibv_pd* pd, std::uint32_t count, std::uint32_t bytes)
    : count_(count), bytes_(bytes), mem_(allocate_aligned(std::size_t{count} * bytes)) {
  mr_ = register_plain(pd, mem_.get(), std::size_t{count} * bytes, IBV_ACCESS_LOCAL_WRITE, "receive buffers");
}

int RecvRing::post(ibv_qp* qp, std::uint32_t i, std::uint64_t wr_id) {
  ibv_sge sge{};
  sge.addr = reinterpret_cast<std::uintptr_t>(buffer(i));
  sge.length = bytes_;
  sge.lkey = mr_->lkey;
  ibv_recv_wr wr{};
  wr.wr_id = wr_id;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  ibv_recv_wr* bad = nullptr;
  return ibv_post_recv(qp, &wr, &bad);
}

SendSlots::SendSlots(ibv_pd* pd, std::uint32_t count, std::uint32_t bytes)
    : bytes_(bytes), mem_(allocate_aligned(std::size_t{count} * bytes)), owner_(count, kNone) {
  mr_ = register_plain(pd, mem_.get(), std::size_t{count} * bytes, IBV_ACCESS_LOCAL_WRITE, "send buffers");
  free_.reserve(count);
  for (std::uint32_t i = count; i-- > 0;) free_.push_back(i);
}

std::uint32_t SendSlots::take(std::uint32_t owner) {
  if (free_.empty()) return kNone;
  const std::uint32_t s = free_.back();
  free_.pop_back();
  owner_[s] = owner;
  return s;
}

void SendSlots::release(std::uint32_t slot) {
  if (slot >= owner_.size() || owner_[slot] == kNone) return;  // already given back
  owner_[slot] = kNone;
  free_.push_back(slot);
}

void SendSlots::release_owned_by(std::uint32_t owner) {
  for (std::uint32_t s = 0; s < owner_.size(); ++s)
    if (owner_[s] == owner) release(s);
}

}  // namespace braid::verbs
