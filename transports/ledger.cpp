#include "transports/ledger.hpp"

#include <algorithm>
#include <cstddef>
#include <cstring>

namespace braid::onesided {

Ledger::Ledger(int n, int me)
    : n_(n), me_(me), peers_(static_cast<std::size_t>(n), nullptr), consumed_(static_cast<std::size_t>(n), 0),
      completed_seen_(static_cast<std::size_t>(n), 0) {}

void Ledger::bind(LedgerBlock* mine, std::vector<const LedgerBlock*> peers, Mirror* mirror) {
  mine_ = mine;
  peers_ = std::move(peers);
  peers_[static_cast<std::size_t>(me_)] = mine;
  mirror_ = mirror;
}

// Most calls describe the same buffers as two calls ago: leaving the line
// untouched keeps it cached in the peers that read it (and sends nothing).
template <class T>
void Ledger::store_if_changed(T& slot, const T& value) {
  if (std::memcmp(&slot, &value, sizeof value) == 0) return;
  slot = value;
  pushed(&slot, sizeof slot);
}

void Ledger::publish(int parity, int which, const BufDesc& d) { store_if_changed(mine_->desc[parity][which], d); }

BufDesc Ledger::peer_desc(int peer, int parity, int which) const { return of(peer).desc[parity][which]; }

void Ledger::publish_ipc(int parity, int which, const IpcDesc& d) { store_if_changed(mine_->ipc[parity][which], d); }

IpcDesc Ledger::peer_ipc(int peer, int parity, int which) const { return of(peer).ipc[parity][which]; }

void Ledger::doing(bool one_sided, std::uint64_t identity, std::uint32_t shape) {
  // A loop of one collective stores its shape once.
  if (one_sided && identity != 0 && shape != doing_shape_) {
    doing_shape_ = shape;
    mine_->doing_shape.store(shape, std::memory_order_relaxed);
    pushed(&mine_->doing_shape, sizeof mine_->doing_shape);
  }
  // Release: a peer that reads this identity reads the shape stored before.
  auto& slot = one_sided ? mine_->doing_one_sided : mine_->doing_messages;
  slot.store(identity, std::memory_order_release);
  pushed(&slot, sizeof slot);
}

std::uint64_t Ledger::peer_doing(int peer, bool one_sided) const {
  const LedgerBlock& b = of(peer);
  return (one_sided ? b.doing_one_sided : b.doing_messages).load(std::memory_order_acquire);
}

std::uint32_t Ledger::peer_doing_shape(int peer) const {
  // Acquire: ordered before a later look at the identity (one_sided.cpp).
  return of(peer).doing_shape.load(std::memory_order_acquire);
}

void Ledger::completed(std::uint64_t calls) {
  mine_->completed.store(calls, std::memory_order_release);
  pushed(&mine_->completed, sizeof mine_->completed);
}

std::uint64_t Ledger::peer_completed(int peer, std::uint64_t need) {
  // The peer's line changes every call: read it only when what we last saw
  // is not enough (usually it is: peers are rarely two calls behind).
  auto& seen = completed_seen_[static_cast<std::size_t>(peer)];
  // seq_cst (a plain load on x86): a waiter announces its sleep, then looks here.
  if (seen < need) seen = of(peer).completed.load(std::memory_order_seq_cst);
  return seen;
}

bool Ledger::all_completed(std::uint64_t need) {
  for (int q = 0; q < n_; ++q)
    if (q != me_ && peer_completed(q, need) < need) return false;
  return true;
}

bool Ledger::single_region(std::size_t bytes) { return line_round(bytes) > kSplitScratchBytes; }

std::size_t Ledger::region_to_grow(std::size_t bytes, std::size_t current) {
  const std::size_t need = single_region(bytes) ? line_round(bytes) : 2 * line_round(bytes);
  return current >= need ? 0 : std::max(need, 2 * current);
}

std::size_t Ledger::half_offset(std::size_t bytes, int parity, std::size_t region) {
  return single_region(bytes) ? 0 : static_cast<std::size_t>(parity) * (region / 2 / kLine * kLine);
}

std::uint64_t Ledger::writable_after(std::size_t bytes, std::uint64_t ticket) {
  const bool single = single_region(bytes);
  const bool after_single = last_single_ + 1 == ticket;
  if (single) last_single_ = ticket;
  if (single || after_single) return ticket;
  return ticket >= 2 ? ticket - 1 : 0;
}

void Ledger::mark_failed(const Failure& f) {
  LedgerBlock* b = mine_;
  if (b->failed.load(std::memory_order_relaxed)) return;
  b->failure_code = f.code;
  b->failure_about = f.about;
  b->failure_call = f.call;
  const std::size_t n = std::min(f.why.size(), sizeof b->failure - 1);
  std::memcpy(b->failure, f.why.data(), n);
  b->failure[n] = '\0';
  // The text first, then the flag, ordered after it: a peer that sees the
  // flag reads the whole text.
  pushed(&b->failure_code, sizeof(LedgerBlock) - offsetof(LedgerBlock, failure_code));
  b->failed.store(1, std::memory_order_release);
  pushed(&b->failed, sizeof b->failed, true);
}

void Ledger::knew_failed(int rank) {
  if (rank < 0 || mine_->knew_failed.load(std::memory_order_relaxed)) return;
  mine_->knew_failed.store(static_cast<std::uint32_t>(rank) + 1, std::memory_order_release);
  pushed(&mine_->knew_failed, sizeof mine_->knew_failed, true);
}

int Ledger::peer_knew_failed(int peer, int world) const {
  const std::uint32_t v = of(peer).knew_failed.load(std::memory_order_acquire);
  return v > 0 && v <= static_cast<std::uint32_t>(world) ? static_cast<int>(v) - 1 : -1;
}

bool Ledger::peer_failed(int peer, Failure* f) const {
  const LedgerBlock& b = of(peer);
  if (b.failed.load(std::memory_order_acquire) == 0) return false;
  // The peer wrote these before the flag; bound the read whatever it wrote.
  char text[sizeof b.failure];
  std::memcpy(text, b.failure, sizeof text);
  text[sizeof text - 1] = '\0';
  f->code = b.failure_code;
  f->about = b.failure_about;
  f->call = b.failure_call;
  f->why = text;
  return true;
}

}  // namespace braid::onesided
