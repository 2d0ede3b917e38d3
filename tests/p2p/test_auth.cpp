// Authenticated jobs (BRAID_JOB_TOKEN): a process with another secret, or
// none, is refused by the store within seconds with an error that names
// BRAID_JOB_TOKEN, and the job goes on; a stranger who knows a rank's TCP
// listener and the job id (the worst case) still cannot pose as a rank there.
#include <catch2/catch.hpp>

#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include <fmt/core.h>

#include "src/common/auth.hpp"
#include "src/common/socket.hpp"
#include "src/runtime/context.hpp"
#include "src/runtime/peers.hpp"
#include "tests/mp/harness.hpp"
#include "transports/tcp/wire.hpp"

using namespace braid_test;
using braid::ErrorCode;
namespace wire = braid::wire;

namespace {

const char* kToken = "BRAID_JOB_TOKEN=the-job-secret-0123456789";

// The job's all_reduce, checked: the members still work after an intrusion.
void sum_check(int rank, int world) {
  std::vector<float> v(1000, static_cast<float>(rank + 1));
  braid::all_reduce(braid::tensor(v), braid::ReduceOp::Sum);
  const float want = static_cast<float>(world * (world + 1) / 2);
  for (float x : v) RANK_CHECK(x == want);
}

braid::Fd dial_rank(int rank) {
  auto& c = braid::context();
  const auto addr = braid::read_peer_record(*c.store, rank, braid::Millis(5000)).address("tcp");
  const auto colon = addr.rfind(':');
  return braid::net::connect_retry(braid::net::resolve(addr.substr(0, colon), std::stoi(addr.substr(colon + 1))),
                                   braid::Deadline::after(braid::Millis(5000)), "rank");
}

void put(const braid::Fd& fd, const void* p, std::size_t n) {
  braid::net::write_all(fd.get(), p, n, braid::Deadline::after(braid::Millis(5000)), "rank 1");
}

// Writes what a stranger sends after the frame that gets it refused: the rank
// may close the connection before these bytes arrive (EPIPE or ECONNRESET
// here), which is the outcome the test wants, not a failure of the writer.
void offer(const braid::Fd& fd, const void* p, std::size_t n) {
  const char* c = static_cast<const char*>(p);
  while (n > 0) {
    const ssize_t w = ::send(fd.get(), c, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && (errno == EPIPE || errno == ECONNRESET)) return;
    RANK_CHECK_MSG(w > 0, "writing to rank 1 failed: " << std::strerror(errno));
    if (w <= 0) return;
    c += w;
    n -= static_cast<std::size_t>(w);
  }
}

// Reads exactly n bytes, or fewer where the other end closes first; gives up
// after 20 s (a test failure: the rank neither answered nor closed).
std::size_t take(const braid::Fd& fd, void* p, std::size_t n) {
  timeval tv{20, 0};
  ::setsockopt(fd.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  std::size_t got = 0;
  while (got < n) {
    const ssize_t r = ::recv(fd.get(), static_cast<char*>(p) + got, n - got, 0);
    if (r == 0 || (r < 0 && errno == ECONNRESET)) break;
    RANK_CHECK_MSG(r > 0, "the rank neither answered nor closed the connection: " << std::strerror(errno));
    got += static_cast<std::size_t>(r);
  }
  return got;
}

std::uint64_t job_id() {
  const auto v = braid::store::to_string(braid::context().store->get("job"));
  return std::stoull(v.substr(0, v.find(' ')));
}

}  // namespace

TEST_CASE("a process with another secret, or none, cannot join the job, which goes on", "[auth][join]") {
  // Processes 0 and 1 are the job; process 2 tries to join it as rank 1,
  // first with another secret, then with none.
  auto res = run_ranks(3, [](int rank, int) {
    // The job stays up until the intruder has made both tries (it cannot
    // say so through the store: it is refused there), so that its second
    // try meets the job's store, not a closed port (a slow run, under ASan,
    // once had the job gone by then).
    const std::string done = fmt::format("/tmp/braid-auth-intruder-{}", std::getenv("MASTER_PORT"));
    if (rank < 2) {
      ::setenv("WORLD_SIZE", "2", 1);
      init_env();
      sum_check(rank, 2);
      braid::barrier();
      sum_check(rank, 2);
      if (rank == 0) {
        const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
        while (::access(done.c_str(), F_OK) != 0 && std::chrono::steady_clock::now() < until)
          std::this_thread::sleep_for(std::chrono::milliseconds(10));  // polling a file, not a sync by time
        ::unlink(done.c_str());
      }
      braid::barrier();
      braid::destroy_process_group();
      return;
    }
    ::setenv("RANK", "1", 1);
    ::setenv("WORLD_SIZE", "2", 1);
    struct Done {
      std::string path;
      ~Done() {
        if (FILE* f = std::fopen(path.c_str(), "w")) std::fclose(f);
      }
    } signal_done{done};
    for (const char* token : {"another-secret", ""}) {
      ::setenv("BRAID_JOB_TOKEN", token, 1);
      const auto t0 = std::chrono::steady_clock::now();
      braid::InitOptions o;
      o.backend = test_backend();
      o.timeout = braid::Millis(60000);
      expect_error([&] { braid::init_process_group(o); }, ErrorCode::Store, "authentication failed");
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      // Refused within seconds, not at the end of the 60 s timeout.
      RANK_CHECK_MSG(s < 15, "refused after " << s << " s");
      RANK_CHECK(!braid::is_initialized());
    }
  }, {.timeout_s = 120, .env = {kToken}});
  INFO(describe(res));
  REQUIRE(all_ok(res));
}

TEST_CASE("the error names BRAID_JOB_TOKEN", "[auth][join]") {
  auto res = run_ranks(2, [](int rank, int) {
    if (rank == 1) ::setenv("BRAID_JOB_TOKEN", "not-the-one", 1);
    braid::InitOptions o;
    o.backend = test_backend();
    o.timeout = braid::Millis(rank == 0 ? 3000 : 60000);
    if (rank == 1) {
      auto e = expect_error([&] { braid::init_process_group(o); }, ErrorCode::Store, "BRAID_JOB_TOKEN");
      RANK_CHECK(std::string(e.what()).find("secret") != std::string::npos);
    } else {
      // Nobody joins rank 0 (the store refused rank 1): its init times out.
      expect_error([&] { braid::init_process_group(o); }, ErrorCode::Timeout, "");
    }
  }, {.timeout_s = 60, .env = {kToken}});
  INFO(describe(res));
  REQUIRE(all_ok(res));
}

TEST_CASE("a stranger on a rank's TCP listener cannot pose as a rank without the secret", "[auth][listener]") {
  auto res = run_ranks(2, [](int rank, int world) {
    init_env("tcp");
    sum_check(rank, world);
    if (rank == 0) {
      const auto job = static_cast<std::int64_t>(job_id());
      {  // HELLO as rank 0 without a nonce, then a message: dropped unread
        auto fd = dial_rank(1);
        auto hello = wire::make_header(wire::FrameType::Hello, 0, job, 0, 0, 2);
        auto eager = wire::make_header(wire::FrameType::Eager, 0, 0, 4);
        const int forged = -7;
        offer(fd, &hello, sizeof hello);
        offer(fd, &eager, sizeof eager);
        offer(fd, &forged, sizeof forged);
        char c;
        RANK_CHECK(take(fd, &c, 1) == 0);  // closed, nothing answered
      }
      {  // HELLO with a nonce: the rank proves itself (AUTH); a wrong PROOF is refused
        auto fd = dial_rank(1);
        auto hello = wire::make_header(wire::FrameType::Hello, 0, job, braid::auth::kNonceBytes, 0, 2);
        const auto nonce = braid::auth::fresh_nonce();
        put(fd, &hello, sizeof hello);
        put(fd, nonce.data(), nonce.size());
        wire::FrameHeader h{};
        std::uint8_t body[64];
        RANK_CHECK(take(fd, &h, sizeof h) == sizeof h);
        RANK_CHECK(h.type == static_cast<std::uint8_t>(wire::FrameType::Auth));
        RANK_CHECK(h.bytes == sizeof body);
        RANK_CHECK(take(fd, body, sizeof body) == sizeof body);
        auto proof = wire::make_header(wire::FrameType::Proof, 0, 0, braid::auth::kMacBytes);
        const braid::auth::Mac wrong{};
        offer(fd, &proof, sizeof proof);
        offer(fd, wrong.data(), wrong.size());
        auto eager = wire::make_header(wire::FrameType::Eager, 0, 0, 4);
        const int forged = -7;
        offer(fd, &eager, sizeof eager);
        offer(fd, &forged, sizeof forged);
        char c;
        RANK_CHECK(take(fd, &c, 1) == 0);
      }
      // Only now the real message: rank 1 has waited for it all along (and
      // so kept serving its listener), and must get this one.
      int real = 42;
      braid::send(braid::tensor(&real, 1), 1);
    } else {
      int x = 0;
      braid::recv(braid::tensor(&x, 1), 0);
      RANK_CHECK_MSG(x == 42, "received " << x);
    }
    sum_check(rank, world);
  }, {.timeout_s = 120, .env = {kToken}});
  INFO(describe(res));
  REQUIRE(all_ok(res));
}
