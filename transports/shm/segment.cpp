#include "transports/shm/segment.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <new>
#include <utility>

#include "src/common/errors.hpp"

namespace braid::shm {

Mapping::Mapping(Fd fd, std::size_t bytes) : fd_(std::move(fd)), bytes_(bytes) {
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd_.get(), 0);
  if (p == MAP_FAILED) fail(ErrorCode::Transport, "mmap of a shared-memory segment ({} bytes) failed: {}", bytes, errno_text());
  base_ = p;
}

Mapping::Mapping(Mapping&& o) noexcept
    : fd_(std::move(o.fd_)), base_(std::exchange(o.base_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}

Mapping& Mapping::operator=(Mapping&& o) noexcept {
  if (this != &o) {
    if (base_) ::munmap(base_, bytes_);
    fd_ = std::move(o.fd_);
    base_ = std::exchange(o.base_, nullptr);
    bytes_ = std::exchange(o.bytes_, 0);
  }
  return *this;
}

Mapping::~Mapping() {
  if (base_) ::munmap(base_, bytes_);
}

RingControl* Mapping::ring_control(int sender) const {
  const auto rb = header()->ring_bytes;
  return reinterpret_cast<RingControl*>(static_cast<std::uint8_t*>(base_) + header_bytes() +
                                        static_cast<std::size_t>(sender) * ring_stride(rb));
}

std::uint8_t* Mapping::ring_data(int sender) const {
  return reinterpret_cast<std::uint8_t*>(ring_control(sender)) + sizeof(RingControl);
}

Mapping create_segment(std::uint64_t job_id, int rank, int world, std::size_t ring_bytes) {
  Fd fd(::memfd_create("braid-shm", MFD_CLOEXEC));
  if (!fd.valid()) fail(ErrorCode::Transport, "memfd_create failed: {}", errno_text());
  const std::size_t bytes = segment_bytes(world, ring_bytes);
  if (::ftruncate(fd.get(), static_cast<off_t>(bytes)) != 0)
    fail(ErrorCode::Transport, "sizing the shared-memory segment to {} bytes failed: {}", bytes, errno_text());
  Mapping m(std::move(fd), bytes);
  // A fresh memfd reads as zeros: rings start empty (head = tail = 0).
  auto* h = new (m.header()) SegmentHeader{};
  h->magic = kSegmentMagic;
  h->job_id = job_id;
  h->rank = static_cast<std::uint32_t>(rank);
  h->world_size = static_cast<std::uint32_t>(world);
  h->ring_bytes = ring_bytes;
  h->state.store(static_cast<std::uint32_t>(SegmentState::Alive), std::memory_order_release);
  return m;
}

}  // namespace braid::shm
