// Shared-memory ring records: bytes another process wrote into this rank's
// ring (its producer), walked with the checks the transport uses
// (shm::walk_records). Every payload a visitor is given must lie inside the
// ring and inside the published bytes. The same bytes, as a peer's buffer
// descriptor (base, size, addr, bytes), go through the check every window
// makes before it maps or reads one (onesided::span_inside), against
// 128-bit arithmetic.
#include <cstring>
#include <vector>

#include "tests/fuzz/fuzz.hpp"
#include "transports/ledger.hpp"
#include "transports/shm/ring.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* d, std::size_t n) {
  namespace shm = braid::shm;
  if (n >= 32) {
    std::uint64_t q[4];
    std::memcpy(q, d, 32);
    const unsigned __int128 base = q[0], size = q[1], addr = q[2], bytes = q[3];
    const bool inside = addr >= base && addr + bytes <= base + size;
    if (braid::onesided::span_inside(q[0], q[1], q[2], q[3]) != inside) std::abort();
  }
  if (n < 16) return 0;
  // The first 16 bytes: the tail the consumer has reached and the head the
  // producer published; then the ring's data, a whole number of lines.
  std::uint64_t t, head;
  std::memcpy(&t, d, 8);
  std::memcpy(&head, d + 8, 8);
  const std::size_t cap = std::max<std::size_t>(shm::kLine, (n - 16) / shm::kLine * shm::kLine);
  std::vector<std::uint8_t> ring(cap, 0);
  std::memcpy(ring.data(), d + 16, std::min(cap, n - 16));
  // Counters as a real consumer would hold them: t is its own, and a head
  // that runs behind it is the producer's lie the walk must refuse.
  // (Real tails move by whole lines; bit 0 of t keeps some that do not, to
  // exercise the walk's own check.)
  t = t & 1 ? t % (1u << 20) : (t % (1u << 20)) / shm::kLine * shm::kLine;
  head = t + head % (2 * cap + 1);
  std::uint64_t pos = t;
  const std::uint64_t first = t;
  (void)shm::walk_records(ring.data(), cap, pos, head, [&](const shm::RecordHeader& h, const std::uint8_t* payload) {
    const std::size_t off = static_cast<std::size_t>(payload - ring.data());
    if (payload < ring.data() + shm::kHeaderBytes || off + (h.type == shm::RecordType::Eager ? h.bytes : 0) > cap ||
        h.length < shm::kLine || pos > head || pos <= first)
      std::abort();
    if (h.type == shm::RecordType::Eager && h.bytes) {
      volatile std::uint8_t sink = payload[h.bytes - 1];  // ASan checks the read
      (void)sink;
    }
    return true;
  });
  if (pos > head || pos < first) std::abort();
  return 0;
}
