// The verbs handshake: the 64-byte Hello a peer (or a stranger on the verbs
// listener) sends, checked before any field is used; and the same bytes as
// an RDMA window's store record (window_record.hpp), read by members of
// windows of 1 to 4 ranks.
#include <cstring>

#include "tests/fuzz/fuzz.hpp"
#include "transports/verbs/handshake.hpp"
#include "transports/verbs/window_record.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* d, std::size_t n) {
  braid::verbs::Hello h{};
  std::memcpy(&h, d, std::min(n, sizeof h));
  for (auto kind : {braid::verbs::HelloKind::Request, braid::verbs::HelloKind::Accept}) {
    for (int expected : {-1, 1}) {
      const std::string bad = braid::verbs::check_hello(h, kind, 0x1234, 4, 0, expected);
      if (bad.empty()) {
        const auto f = braid::verbs::fields_of(h);
        if (f.rank < 0 || f.rank >= 4 || f.rank == 0 || (expected >= 0 && f.rank != expected)) std::abort();
      }
    }
  }
  const braid::store::Bytes rec(d, d + n);
  for (int members = 1; members <= 4; ++members) {
    for (int me : {0, members - 1}) {
      const braid::verbs::WindowRecordCheck x{7, members, 1 % members, me, 65536};
      std::string why;
      const auto peer = braid::verbs::read_window_record(rec, x, &why);
      if (peer) {
        if (rec.size() != sizeof(braid::verbs::WindowRecordHead) + members * sizeof(braid::verbs::QpEndpoint) ||
            peer->block == 0 || !braid::verbs::check_endpoint(peer->endpoint).empty())
          std::abort();
      } else if (why.empty()) {
        std::abort();
      }
    }
  }
  return 0;
}
