// The store record that joins an RDMA window's members: each rank publishes
// where its block is (address, size, rkey) and, for every member, the QP
// endpoint it made for that member. A peer's record reaches the adapter
// (connect_qp) and every later READ and WRITE (block, rkey), so it is
// checked field by field first: anyone who reaches the store could have
// written it. Pure, so that it is fuzzed (tests/fuzz/fuzz_verbs_hello.cpp).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "src/store/store.hpp"
#include "transports/verbs/queue_pair.hpp"

namespace braid::verbs {

inline constexpr std::uint32_t kWindowRecordMagic = 0x31575642;  // "BVW1"

// The record's head; the member endpoints follow it, n of them.
struct WindowRecordHead {
  std::uint32_t magic = kWindowRecordMagic;
  std::uint32_t group = 0;
  std::uint32_t rank = 0;
  std::uint32_t nranks = 0;
  std::uint64_t block = 0;
  std::uint64_t block_bytes = 0;
  std::uint32_t rkey = 0;
  std::uint32_t reserved = 0;
};

// What a window of group `group` (n members, blocks of `block_bytes`)
// expects of member q's record, read by member `me`.
struct WindowRecordCheck {
  std::uint32_t group = 0;
  int n = 0;
  int q = 0;
  int me = 0;
  std::uint64_t block_bytes = 0;
};

// What `me` takes from a peer's record.
struct WindowPeerRecord {
  std::uint64_t block = 0;
  std::uint32_t rkey = 0;
  QpEndpoint endpoint;  // the QP q made for `me`
};

store::Bytes make_window_record(const WindowRecordHead& head, const std::vector<QpEndpoint>& endpoints);
// The record checked; nullopt with *why set when it is not what `expect`
// says (size, magic, group, rank, member count, block size, a null block,
// or a malformed endpoint).
std::optional<WindowPeerRecord> read_window_record(const store::Bytes& r, const WindowRecordCheck& expect,
                                                   std::string* why);

}  // namespace braid::verbs
