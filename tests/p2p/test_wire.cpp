// Hostile bytes on a rank's listener: junk, truncated frames, a HELLO from
// another job, and frames that lie about their length or type. The rank must
// never crash or write out of bounds; strangers are dropped quietly, and a
// peer that sends a malformed frame becomes an error naming that peer.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstring>

#include "src/common/socket.hpp"
#include "src/runtime/context.hpp"
#include "tests/mp/harness.hpp"
#include "src/runtime/peers.hpp"
#include "transports/tcp/wire.hpp"

using namespace braid_test;
using braid::ErrorCode;
namespace wire = braid::wire;

namespace {

braid::Fd dial_rank(int rank) {
  auto& c = braid::context();
  const auto addr = braid::read_peer_record(*c.store, rank, braid::Millis(5000)).address("tcp");
  const auto colon = addr.rfind(':');
  auto fd = braid::net::connect_retry(braid::net::resolve(addr.substr(0, colon), std::stoi(addr.substr(colon + 1))),
                                      braid::Deadline::after(braid::Millis(5000)), "rank");
  return fd;
}

void put(const braid::Fd& fd, const void* p, std::size_t n) {
  braid::net::write_all(fd.get(), p, n, braid::Deadline::after(braid::Millis(5000)), "rank 1");
}

std::uint64_t job_id() {
  const auto v = braid::store::to_string(braid::context().store->get("job"));
  return std::stoull(v.substr(0, v.find(' ')));
}

// A connection that says HELLO as `as_rank` of this job, then sends `frame`.
void forge(const wire::FrameHeader& frame, int as_rank) {
  auto fd = dial_rank(1);
  auto hello = wire::make_header(wire::FrameType::Hello, 0, static_cast<std::int64_t>(job_id()), 0,
                                 static_cast<std::uint64_t>(as_rank), 2);
  put(fd, &hello, sizeof hello);
  put(fd, &frame, sizeof frame);
  ::usleep(200000);
}

}  // namespace

TEST_CASE("strangers on the listener are dropped and the job goes on", "[wire]") {
  auto res = run_ranks(2, [](int rank, int) {
    init_env();
    if (rank == 0) {
      {  // junk
        auto fd = dial_rank(1);
        char junk[100];
        for (int i = 0; i < 100; ++i) junk[i] = static_cast<char>(i * 37);
        put(fd, junk, sizeof junk);
      }
      {  // half a header, then gone
        auto fd = dial_rank(1);
        char half[20] = {};
        put(fd, half, sizeof half);
      }
      {  // connect and leave
        auto fd = dial_rank(1);
      }
      {  // a HELLO from another job
        auto fd = dial_rank(1);
        auto hello = wire::make_header(wire::FrameType::Hello, 0, 12345, 0, 0, 2);
        put(fd, &hello, sizeof hello);
        auto f = wire::make_header(wire::FrameType::Eager, 0, 0, 8);
        put(fd, &f, sizeof f);
      }
      {  // a HELLO claiming a rank that does not exist
        auto fd = dial_rank(1);
        auto hello = wire::make_header(wire::FrameType::Hello, 0, static_cast<std::int64_t>(job_id()), 0, 7, 2);
        put(fd, &hello, sizeof hello);
      }
    }
    braid::barrier();
    pair_still_works(rank);
  });
  INFO(describe(res));
  REQUIRE(all_ok(res));
}

TEST_CASE("a malformed frame from a peer is an error naming it, never a crash", "[wire]") {
  struct Bad {
    const char* what;
    wire::FrameHeader frame;
    const char* expect;
  };
  const Bad cases[] = {
      {"oversized eager frame", wire::make_header(wire::FrameType::Eager, 0, 0, std::uint64_t(1) << 40), "eager frame of"},
      {"bad magic", [] { auto h = wire::make_header(wire::FrameType::Eager, 0, 0, 4); h.magic = 0xdeadbeef; return h; }(), "malformed frame"},
      {"unknown type", [] { auto h = wire::make_header(wire::FrameType::Eager, 0, 0, 0); h.type = 99; return h; }(), "unknown type"},
      {"data for no request", wire::make_header(wire::FrameType::Data, 0, 0, 1 << 20, 5, 77), "closed without goodbye"},
  };
  for (const auto& bad : cases) {
    auto res = run_ranks(2, [&bad](int rank, int) {
      init_env();
      if (rank == 0) {
        forge(bad.frame, 0);  // then the forged connection closes
        int x = 0;
        // Rank 1 aborts the job; rank 0 hears of it through the store.
        expect_error([&] { braid::recv(braid::tensor(&x, 1), 1); }, ErrorCode::PeerFailure, "rank 0");
      } else {
        int x = 0;
        auto e = expect_error([&] { braid::recv(braid::tensor(&x, 1), 0); }, ErrorCode::PeerFailure, bad.expect);
        RANK_CHECK(e.peer() == 0);
      }
    }, {.timeout_s = 60, .env = {}});
    INFO(bad.what << ": " << describe(res));
    REQUIRE(all_ok(res));
  }
}
