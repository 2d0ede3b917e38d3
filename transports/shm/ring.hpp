// Ring: a single-producer, single-consumer byte ring in shared memory.
//
// One ring carries the messages of one sender to one receiver. It lives in
// the receiver's segment: the receiver polls only memory it owns, and a
// sender that never sends maps nothing.
//
// Records are whole multiples of 64 bytes (a cache line) and never wrap: a
// record that does not fit before the end is preceded by a padding record.
//
// Memory ordering (who sees what, when):
// - The producer writes a record's bytes, then publishes it with a release
//   store to `head`. A consumer that reads `head` with acquire sees every
//   byte of every record before that head.
// - The consumer reads records, then releases their space with a release
//   store to `tail`. A producer that reads `tail` with acquire may overwrite
//   everything before it.
// - head and tail are 64-bit byte counters that only grow; the position in
//   the data area is counter % capacity. They sit on separate cache lines so
//   the two sides do not bounce one line between them.
// The producer is another process: the consumer validates every record
// (type, length, alignment) before using it; a bad one is an error naming
// the producer, never a read outside the ring.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace braid::shm {

inline constexpr std::size_t kLine = 64;

enum class RecordType : std::uint8_t { Pad = 1, Eager, Rts, Fin, Bye };

struct RecordHeader {
  std::uint32_t length;  // whole record, header included, multiple of 64
  RecordType type;
  std::uint8_t reserved[3];
  std::uint32_t ctx;
  std::uint32_t reserved2;
  std::int64_t tag;
  std::uint64_t bytes;  // payload bytes (Eager), message bytes (Rts)
  std::uint64_t token;  // Rts/Fin: the sender's request id
  std::uint64_t addr;   // Rts: where the data is in the sender's address space
  std::uint64_t reserved3;
};
static_assert(sizeof(RecordHeader) == 56);
inline constexpr std::size_t kHeaderBytes = kLine;  // header padded to a line

struct alignas(kLine) RingControl {
  alignas(kLine) std::atomic<std::uint64_t> head;  // written by the producer
  alignas(kLine) std::atomic<std::uint64_t> tail;  // written by the consumer
  // Written once by the producer before its first record (release on
  // `attached`): how the consumer reaches back to it (to answer, to watch
  // it die) without asking the store.
  alignas(kLine) std::atomic<std::uint32_t> attached;
  std::int32_t pid;
  std::int32_t memfd;    // the producer's segment, as an fd number in its process
  std::int32_t eventfd;  // the producer's doorbell, likewise
  // 1 + the lowest token of the announced messages (RTS) the producer
  // withdrew, 0 while it withdrew none: every token from there on is void.
  // It withdraws when a send it announced timed out before the consumer
  // answered (ShmTransport::break_off); the buffer may be freed and reused
  // the moment the send returns, so a consumer that copied from it checks
  // this word after the copy, and drops what it read if the token is void.
  // The producer sends nothing more to the consumer after that.
  std::atomic<std::uint64_t> withdrawn_from;
};
static_assert(sizeof(RingControl) == 3 * kLine);

inline std::size_t record_length(std::size_t payload) {
  return (kHeaderBytes + payload + kLine - 1) / kLine * kLine;
}

// The producer's view: `tail_seen` caches the consumer's tail to avoid
// reading its line on every push.
class RingWriter {
 public:
  RingWriter() = default;
  RingWriter(RingControl* c, std::uint8_t* data, std::size_t capacity)
      : c_(c), data_(data), cap_(capacity), head_(c->head.load(std::memory_order_relaxed)),
        tail_seen_(c->tail.load(std::memory_order_acquire)) {}
  bool valid() const { return c_ != nullptr; }
  std::size_t capacity() const { return cap_; }
  // Voids every announced message from `token` on (RingControl::withdrawn_from).
  void withdraw_from(std::uint64_t token) {
    std::uint64_t none = 0;
    c_->withdrawn_from.compare_exchange_strong(none, token + 1, std::memory_order_seq_cst);
  }

  // Appends a record; false if the ring has no room now (try again later).
  bool push(const RecordHeader& h, const void* payload, std::size_t payload_bytes) {
    const std::size_t len = record_length(payload_bytes);
    std::size_t pos = head_ % cap_;
    const std::size_t pad = pos + len > cap_ ? cap_ - pos : 0;
    if (!room(pad + len)) return false;
    if (pad) {
      RecordHeader p{};
      p.length = static_cast<std::uint32_t>(pad);
      p.type = RecordType::Pad;
      std::memcpy(data_ + pos, &p, sizeof p);
      head_ += pad;
      pos = 0;
    }
    RecordHeader r = h;
    r.length = static_cast<std::uint32_t>(len);
    std::memcpy(data_ + pos, &r, sizeof r);
    if (payload_bytes) std::memcpy(data_ + pos + kHeaderBytes, payload, payload_bytes);
    head_ += len;
    c_->head.store(head_, std::memory_order_release);
    return true;
  }

 private:
  bool room(std::size_t need) {
    if (head_ + need - tail_seen_ <= cap_) return true;
    tail_seen_ = c_->tail.load(std::memory_order_acquire);
    return head_ + need - tail_seen_ <= cap_;
  }
  RingControl* c_ = nullptr;
  std::uint8_t* data_ = nullptr;
  std::size_t cap_ = 0;
  std::uint64_t head_ = 0;
  std::uint64_t tail_seen_ = 0;
};

// Walks the records of [t, head) in a ring's data area of `cap` bytes that
// another process wrote, checking each before `visit(header, payload)` sees
// it: a length that is a whole number of lines, inside the ring and the
// published bytes, a known type, and an Eager payload inside its record.
// Returns null once every record was visited (t == head), or what was wrong
// with the first bad one (t stays at it). `visit` returns false to stop
// early (t then points past the record it saw last).
template <class Visit>
const char* walk_records(const std::uint8_t* data, std::size_t cap, std::uint64_t& t, std::uint64_t head,
                         Visit&& visit) {
  if (head - t > cap) return "head beyond capacity";
  while (t < head) {
    const std::size_t pos = t % cap;
    // t is the consumer's own and moves by whole lines, so a header always
    // fits; checked anyway, as everything here is (fuzz_shm_ring found the
    // read past the end where t is not a whole number of lines).
    if (pos + sizeof(RecordHeader) > cap) return "tail not on a line";
    RecordHeader h;
    std::memcpy(&h, data + pos, sizeof h);
    if (h.length < kLine || h.length % kLine || pos + h.length > cap || t + h.length > head) return "bad length";
    switch (h.type) {
      case RecordType::Pad:
      case RecordType::Rts:
      case RecordType::Fin:
      case RecordType::Bye:
        break;
      case RecordType::Eager:
        if (h.bytes > h.length - kHeaderBytes) return "payload longer than its record";
        break;
      default:
        return "unknown record type";
    }
    t += h.length;
    if (!visit(h, data + pos + kHeaderBytes)) break;
  }
  return nullptr;
}

}  // namespace braid::shm
