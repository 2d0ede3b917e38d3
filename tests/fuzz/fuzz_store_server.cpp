// The store's protocol, server side: requests from up to three clients (what
// a rank, or a stranger, sends), driven straight through StoreService, the
// protocol without the sockets. The input is a list of chunks, each for one
// client, so that one client's SET can answer another's parked GET.
// Checked: nothing crashes, every reply is a well-formed frame, and a client
// refused for lacking the secret gets nothing but its error. The first byte:
// bit 1 says whether the job has a secret.
#include <cstdlib>

#include "src/store/store_service.hpp"
#include "src/store/store_wire.hpp"
#include "tests/fuzz/fuzz.hpp"

namespace {

namespace st = braid::store;

// Every frame in out[from..] must decode.
void check_replies(const st::Client& c, std::size_t from) {
  std::vector<st::wire::Field> fields;
  for (std::size_t at = from; at < c.out.size();) {
    if (c.out.size() - at < st::wire::kHeaderSize) std::abort();
    const auto h = st::wire::decode_header(c.out.data() + at);
    if (!h || c.out.size() - at - st::wire::kHeaderSize < h->body_len ||
        !st::wire::decode_fields(c.out.data() + at + st::wire::kHeaderSize, h->body_len, h->nfields, fields))
      std::abort();
    if (!c.authed && h->code == static_cast<std::uint16_t>(st::wire::Status::Ok) && fields.size() == 1 &&
        fields[0].size() != braid::auth::kNonceBytes)
      std::abort();  // an unauthenticated client got a value
    at += st::wire::kHeaderSize + h->body_len;
  }
}

void server(const std::uint8_t* d, std::size_t n) {
  st::StoreService service("fuzzed store");
  st::Client clients[3];
  for (std::uint64_t i = 0; i < 3; ++i) {
    clients[i].id = i;
    service.opened(clients[i]);
  }
  bool open[3] = {true, true, true};
  // Chunks: a byte (client, and length's high bits), a length byte, bytes.
  for (std::size_t i = 0; i + 2 <= n;) {
    const int who = d[i] % 3;
    const std::size_t len = std::min<std::size_t>(n - i - 2, (std::size_t(d[i] >> 2) << 8) | d[i + 1]);
    i += 2;
    st::Client& c = clients[who];
    if (!open[who]) {
      i += len;
      continue;
    }
    c.in.insert(c.in.end(), d + i, d + i + len);
    i += len;
    const std::size_t before = c.out.size();
    const bool ok = service.process(c);
    check_replies(c, before);
    if (!ok || c.closing) {
      service.closed(c);
      open[who] = false;
    }
    // Parked clients whose keys arrived meanwhile.
    while (!service.ready().empty()) {
      const auto id = service.ready().front();
      service.ready().pop_front();
      st::Client& r = clients[id];
      if (!open[id] || !r.parked) continue;
      const std::size_t b = r.out.size();
      if (service.try_answer(r) && !service.process(r)) {
        service.closed(r);
        open[id] = false;
      }
      check_replies(r, b);
    }
    c.out.clear();  // "sent"
    c.out_pos = 0;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* d, std::size_t n) {
  if (n == 0 || n > (1 << 16)) return 0;
  fuzz::job_secret(d[0] & 2);
  server(d + 1, n - 1);
  return 0;
}
