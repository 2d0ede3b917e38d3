// Segment: the shared memory one rank owns. It holds a header and one
// inbound ring per possible sender, in an anonymous memfd: nothing is ever
// named in /dev/shm, so a rank killed at any moment leaves nothing behind.
// A peer maps it by taking a duplicate of the memfd with pidfd_getfd(),
// which the kernel allows to processes that may ptrace the owner (same user).
//
// Visibility: the header's fields are written by the owner before it
// publishes its address in the store and never change, except `state`
// (release by the owner at shutdown), `first_failed` (release by the owner
// when it first learns of a failure) and `sleeping` (see ShmTransport).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "src/common/fd.hpp"
#include "transports/shm/ring.hpp"

namespace braid::shm {

inline constexpr std::uint64_t kSegmentMagic = 0x31474553444952ULL;  // "BRIDSEG1"
inline constexpr std::size_t kRingBytes = 256 * 1024;  // per (sender, receiver)

enum class SegmentState : std::uint32_t { Alive = 1, Left = 2 };

struct alignas(kLine) SegmentHeader {
  std::uint64_t magic;
  std::uint64_t job_id;
  std::uint32_t rank;
  std::uint32_t world_size;
  std::uint64_t ring_bytes;
  std::atomic<std::uint32_t> state;
  // 1 + the first rank the owner learned had failed, 0 while it knows of
  // none. A peer that finds the owner gone reads it: the owner may have
  // given up and exited because of that rank, and with the store's host
  // among the dead the failure log that would say so is gone too.
  std::atomic<std::uint32_t> first_failed;
  alignas(kLine) std::atomic<std::uint32_t> sleeping;  // owner is (about to be) asleep
};

// Byte offsets inside a segment of `world` rings.
inline std::size_t header_bytes() { return (sizeof(SegmentHeader) + kLine - 1) / kLine * kLine; }
inline std::size_t ring_stride(std::size_t ring_bytes) { return sizeof(RingControl) + ring_bytes; }
inline std::size_t segment_bytes(int world, std::size_t ring_bytes) {
  return header_bytes() + static_cast<std::size_t>(world) * ring_stride(ring_bytes);
}

// A mapping of a segment, owned or a peer's. Unmapped on destruction.
class Mapping {
 public:
  Mapping() = default;
  Mapping(Fd fd, std::size_t bytes);  // maps fd (throws braid::Error)
  Mapping(Mapping&& o) noexcept;
  Mapping& operator=(Mapping&& o) noexcept;
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  ~Mapping();

  bool valid() const { return base_ != nullptr; }
  SegmentHeader* header() const { return static_cast<SegmentHeader*>(base_); }
  RingControl* ring_control(int sender) const;
  std::uint8_t* ring_data(int sender) const;
  std::size_t bytes() const { return bytes_; }
  int fd() const { return fd_.get(); }

 private:
  Fd fd_;
  void* base_ = nullptr;
  std::size_t bytes_ = 0;
};

// Creates this rank's segment (memfd, sized, mapped, header written).
Mapping create_segment(std::uint64_t job_id, int rank, int world, std::size_t ring_bytes);

}  // namespace braid::shm
