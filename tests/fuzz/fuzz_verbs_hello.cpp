// The verbs handshake: the 64-byte Hello a peer (or a stranger on the verbs
// listener) sends, checked before any field is used.
#include <cstring>

#include "tests/fuzz/fuzz.hpp"
#include "transports/verbs/handshake.hpp"

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
  return 0;
}
