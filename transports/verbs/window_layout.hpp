// verbs::Window's block layout and limits, shared by window.cpp (set-up) and
// window_data.cpp (the data path).
#pragma once

#include <infiniband/verbs.h>

#include <chrono>
#include <cstddef>
#include <cstdint>

#include "transports/ledger.hpp"

namespace braid::verbs {

// Peers READ and WRITE the block and described buffers.
inline constexpr int kAccess = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE;
inline constexpr std::uint32_t kSendWr = 128;       // per QP
inline constexpr int kStagingSlots = 256;           // sources of small WRITEs (ledger updates, signals)
inline constexpr std::size_t kSlotBytes = 512;      // the largest ledger update (a failure mark) fits
inline constexpr std::size_t kBlockScratchBytes = 64 * 1024;  // per half, as on shared memory
inline constexpr auto kProbeInterval = std::chrono::milliseconds(200);
inline constexpr auto kOpTimeout = std::chrono::seconds(10);  // past the QP's own retries (~2 s)
inline constexpr auto kLinger = std::chrono::seconds(5);

// In order: every member's ledger (ours at our rank), one signal line per
// writer, the staging slots (local only), a probe landing line, two halves
// of small Scratch.
struct Layout {
  explicit Layout(int n) : n_(static_cast<std::size_t>(n)) {}
  std::size_t ledger(int rank) const { return static_cast<std::size_t>(rank) * sizeof(onesided::LedgerBlock); }
  std::size_t line(int writer) const {
    return n_ * sizeof(onesided::LedgerBlock) + static_cast<std::size_t>(writer) * onesided::kLine;
  }
  std::size_t slot(int k) const { return line(static_cast<int>(n_)) + static_cast<std::size_t>(k) * kSlotBytes; }
  std::size_t probe() const { return slot(kStagingSlots); }
  std::size_t scratch(int parity) const {
    return probe() + onesided::kLine + static_cast<std::size_t>(parity) * kBlockScratchBytes;
  }
  std::size_t total() const { return scratch(2); }

 private:
  std::size_t n_;
};
static_assert(kSlotBytes >= sizeof(onesided::LedgerBlock) - offsetof(onesided::LedgerBlock, failure_code));

}  // namespace braid::verbs
