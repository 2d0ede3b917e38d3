#include "transports/verbs/window_record.hpp"

#include <cstring>

#include <fmt/core.h>

namespace braid::verbs {

store::Bytes make_window_record(const WindowRecordHead& head, const std::vector<QpEndpoint>& endpoints) {
  store::Bytes rec(sizeof head + endpoints.size() * sizeof(QpEndpoint));
  std::memcpy(rec.data(), &head, sizeof head);
  if (!endpoints.empty()) std::memcpy(rec.data() + sizeof head, endpoints.data(), endpoints.size() * sizeof(QpEndpoint));
  return rec;
}

std::optional<WindowPeerRecord> read_window_record(const store::Bytes& r, const WindowRecordCheck& x,
                                                   std::string* why) {
  WindowRecordHead h;
  const std::size_t want = sizeof h + static_cast<std::size_t>(x.n) * sizeof(QpEndpoint);
  if (x.n < 1 || x.me < 0 || x.me >= x.n || r.size() != want) {
    *why = fmt::format("its record is {} bytes; expected {}", r.size(), want);
    return std::nullopt;
  }
  std::memcpy(&h, r.data(), sizeof h);
  if (h.magic != kWindowRecordMagic || h.group != x.group || h.rank != static_cast<std::uint32_t>(x.q) ||
      h.nranks != static_cast<std::uint32_t>(x.n) || h.block_bytes != x.block_bytes || h.block == 0) {
    *why = "its record is not this group's window";
    return std::nullopt;
  }
  WindowPeerRecord out;
  out.block = h.block;
  out.rkey = h.rkey;
  std::memcpy(&out.endpoint, r.data() + sizeof h + static_cast<std::size_t>(x.me) * sizeof(QpEndpoint),
              sizeof out.endpoint);
  if (std::string bad = check_endpoint(out.endpoint); !bad.empty()) {
    *why = fmt::format("its queue pair endpoint is malformed: {}", bad);
    return std::nullopt;
  }
  return out;
}

}  // namespace braid::verbs
