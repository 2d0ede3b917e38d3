// Every store value the runtime parses: anyone who can write to the store
// could have written it. Each parser must take any bytes and either return
// something sane or throw braid::Error(Store); the numbers of a shared-memory
// address or window record ("pid memfd eventfd", "pid fd") are parsed by
// parse_ints. Error records (a rank that gave up, a window's first member
// that failed) and hang-diagnosis positions are parsed here too.
#include <algorithm>
#include <string>

#include "src/common/error_record.hpp"
#include "src/runtime/peers.hpp"
#include "src/runtime/positions.hpp"
#include "transports/record_text.hpp"
#include "tests/fuzz/fuzz.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* d, std::size_t n) {
  const std::string v = fuzz::text(d, n);
  fuzz::only_braid_errors("parse_peer_record", [&] {
    const braid::PeerRecord r = braid::parse_peer_record(v, 3);
    if (r.pid <= 0) std::abort();
    (void)r.address("tcp");
  });
  fuzz::only_braid_errors("parse_job_record", [&] {
    const auto j = braid::parse_job_record(v);
    if (j.world_size < 1) std::abort();
  });
  if (const auto id = braid::decimal(v, 10)) {  // a split's group id
    if (std::to_string(*id).size() > v.size()) std::abort();
  }
  for (int world : {1, 4, 1 << 20}) {
    const auto r = braid::abort_rank(v, world);
    if (r && (*r < -1 || *r >= world)) std::abort();
  }
  for (int world : {1, 4}) {
    const auto r = braid::parse_error_record(v, world, {braid::ErrorCode::Timeout, braid::ErrorCode::PeerFailure});
    if (!r) continue;
    if (r->named < 0 || r->named >= world || r->by < 0 || r->by >= world || r->what.size() > 400) std::abort();
    if (r->code != braid::ErrorCode::Timeout && r->code != braid::ErrorCode::PeerFailure) std::abort();
    // Written back, it reads the same.
    const auto again = braid::parse_error_record(braid::error_record_text(*r), world, {r->code});
    if (!again || again->named != r->named || again->by != r->by || again->what != r->what) std::abort();
  }
  if (const auto p = braid::parse_position(v, 2)) {
    if (p->rank != 2 || p->what.empty() || p->what.size() > 64 || p->awaits.size() > 16) std::abort();
  }
  for (std::size_t count : {2u, 3u}) {
    int out[3] = {7, 7, 7};
    if (!braid::parse_ints(v, std::span<int>(out, count))) continue;
    // What parsed must be what the text says: printed back, it parses the same.
    std::string again = std::to_string(out[0]);
    for (std::size_t k = 1; k < count; ++k) again += " " + std::to_string(out[k]);
    int back[3] = {0, 0, 0};
    if (!braid::parse_ints(again, std::span<int>(back, count)) || !std::equal(out, out + count, back)) std::abort();
  }
  return 0;
}
