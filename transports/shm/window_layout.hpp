// The layout of a window block, shared by window.cpp, window_signals.cpp and
// window_memory.cpp.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "transports/shm/window.hpp"

namespace braid::shm {

using onesided::kLine;
using onesided::line_round;

struct Window::Header {
  std::uint64_t magic;
  std::uint32_t group;
  std::uint32_t rank;
  std::uint32_t nranks;
  std::int32_t pid;
  alignas(kLine) std::atomic<std::uint32_t> doorbell;
  alignas(kLine) std::atomic<std::uint32_t> sleeping;
  onesided::LedgerBlock ledger;
};

inline std::size_t header_size() { return line_round(sizeof(Window::Header)); }
// A block of n ranks, in order: the header, a signal line per peer, two
// halves of block Scratch, then the fast boxes (kBoxSlots per writer).
inline std::size_t block_scratch_offset(int n) { return header_size() + static_cast<std::size_t>(n) * kLine; }
inline std::size_t boxes_offset(int n) { return block_scratch_offset(n) + 2 * kBlockScratchBytes; }
inline std::size_t block_size(int n) {
  return boxes_offset(n) + static_cast<std::size_t>(n) * kBoxSlots * kBoxLines * kLine;
}

}  // namespace braid::shm
