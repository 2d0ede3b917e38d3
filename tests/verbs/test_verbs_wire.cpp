// Hostile peers of the verbs transport (run with BRAID_TEST_BACKEND=verbs on
// an RDMA device: tests/verbs/run_in_vm.sh). Junk and forged requests on a
// rank's handshake listener are dropped quietly; a peer that completes the
// handshake with a hand-made queue pair and then sends malformed messages,
// or announces memory it does not let us read, becomes an error naming it.
// Never a crash, never a hang.
#include <catch2/catch.hpp>

#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cstring>

#include "src/common/socket.hpp"
#include "src/runtime/context.hpp"
#include "src/runtime/peers.hpp"
#include "tests/mp/harness.hpp"
#include "transports/verbs/handshake.hpp"
#include "transports/verbs/queue_pair.hpp"
#include "transports/verbs/verbs_wire.hpp"

using namespace braid_test;
using braid::ErrorCode;
namespace verbs = braid::verbs;

namespace {

std::uint64_t job_id() {
  const auto v = braid::store::to_string(braid::context().store->get("job"));
  return std::stoull(v.substr(0, v.find(' ')));
}

braid::Fd dial_verbs(int rank) {
  const auto addr = braid::read_peer_record(*braid::context().store, rank, braid::Millis(5000)).address("verbs");
  const auto colon = addr.rfind(':');
  return braid::net::connect_retry(braid::net::resolve(addr.substr(0, colon), std::stoi(addr.substr(colon + 1))),
                                   braid::Deadline::after(braid::Millis(5000)), "rank");
}

void put(const braid::Fd& fd, const void* p, std::size_t n) {
  braid::net::write_all(fd.get(), p, n, braid::Deadline::after(braid::Millis(5000)), "peer");
}

verbs::HelloFields fields(const verbs::QpEndpoint& e) {
  verbs::HelloFields f;
  f.job_id = job_id();
  f.rank = braid::get_rank();
  f.world_size = braid::get_world_size();
  f.endpoint = e;
  f.credits = 32;
  f.recv_bytes = 16448;
  return f;
}

// A hand-made endpoint: does the handshake like a real rank, then sends
// whatever bytes it is given.
struct Forger {
  std::unique_ptr<verbs::Device> dev;
  verbs::PdPtr pd;
  verbs::CqPtr cq;
  verbs::QpPtr qp;
  braid::Fd sock;
  std::vector<std::uint8_t> buf = std::vector<std::uint8_t>(1 << 16);
  verbs::MrPtr mr;

  explicit Forger(int target) {
    std::string why;
    dev = verbs::open_device(&why);
    RANK_CHECK_MSG(dev, why);
    pd.reset(ibv_alloc_pd(dev->ctx.get()));
    cq.reset(ibv_create_cq(dev->ctx.get(), 64, nullptr, nullptr, 0));
    qp = verbs::create_rc_qp(*dev, pd.get(), cq.get(), {16, 16});
    mr.reset(ibv_reg_mr(pd.get(), buf.data(), buf.size(), IBV_ACCESS_LOCAL_WRITE));
    RANK_CHECK(pd && cq && mr);
    const verbs::QpEndpoint local = verbs::local_endpoint(*dev, qp.get(), verbs::random_psn());
    sock = dial_verbs(target);
    const verbs::Hello req = verbs::make_hello(verbs::HelloKind::Request, fields(local));
    put(sock, &req, sizeof req);
    verbs::Hello ack{};
    braid::net::read_all(sock.get(), &ack, sizeof ack, braid::Deadline::after(braid::Millis(10000)), "target");
    const std::string bad = verbs::check_hello(ack, verbs::HelloKind::Accept, job_id(), braid::get_world_size(),
                                               braid::get_rank(), target);
    RANK_CHECK_MSG(bad.empty(), bad);
    verbs::connect_qp(qp.get(), *dev, local, verbs::fields_of(ack).endpoint);
  }

  void send_raw(const void* p, std::size_t n) {
    std::memcpy(buf.data(), p, n);
    ibv_sge sge{reinterpret_cast<std::uintptr_t>(buf.data()), static_cast<std::uint32_t>(n), mr->lkey};
    ibv_send_wr wr{};
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_SEND;
    wr.send_flags = IBV_SEND_SIGNALED;
    ibv_send_wr* bad = nullptr;
    RANK_CHECK(ibv_post_send(qp.get(), &wr, &bad) == 0);
    ibv_wc wc{};
    for (int i = 0; i < 100000 && ibv_poll_cq(cq.get(), 1, &wc) == 0; ++i) ::usleep(100);
    RANK_CHECK_MSG(wc.status == IBV_WC_SUCCESS, ibv_wc_status_str(wc.status));
  }
};

verbs::MsgHeader header(verbs::MsgType t, std::int64_t tag, std::uint64_t bytes) {
  verbs::MsgHeader h{};
  h.type = static_cast<std::uint8_t>(t);
  h.ctx = 0;  // point-to-point on the world group
  h.tag = tag;
  h.bytes = bytes;
  return h;
}

}  // namespace

TEST_CASE("strangers on the verbs listener are dropped and the job goes on", "[verbs][wire]") {
  auto res = run_ranks(2, [](int rank, int) {
    init_env();
    if (rank == 0) {
      {  // junk the size of a hello
        auto fd = dial_verbs(1);
        char junk[64];
        for (int i = 0; i < 64; ++i) junk[i] = static_cast<char>(i * 37);
        put(fd, junk, sizeof junk);
      }
      {  // half a hello, then gone
        auto fd = dial_verbs(1);
        char half[20] = {};
        put(fd, half, sizeof half);
      }
      {  // connect and leave
        auto fd = dial_verbs(1);
      }
      verbs::QpEndpoint e;
      e.qpn = 77;
      e.mtu = IBV_MTU_1024;
      e.rd_atom = 1;
      {  // a request from another job
        auto fd = dial_verbs(1);
        auto f = fields(e);
        f.job_id ^= 1;
        const auto h = verbs::make_hello(verbs::HelloKind::Request, f);
        put(fd, &h, sizeof h);
      }
      {  // a request claiming a rank that does not exist
        auto fd = dial_verbs(1);
        auto f = fields(e);
        f.rank = 7;
        const auto h = verbs::make_hello(verbs::HelloKind::Request, f);
        put(fd, &h, sizeof h);
      }
      {  // a request with an impossible queue pair
        auto fd = dial_verbs(1);
        auto f = fields(e);
        f.endpoint.qpn = 1u << 30;
        const auto h = verbs::make_hello(verbs::HelloKind::Request, f);
        put(fd, &h, sizeof h);
      }
      ::usleep(200000);
    }
    braid::barrier();
    pair_still_works(rank);
  });
  INFO(describe(res));
  REQUIRE(all_ok(res));
}

TEST_CASE("with a secret, a stranger on the verbs listener cannot pose as a rank", "[verbs][wire][auth]") {
  // The job has a secret: the handshake proves it both ways (handshake.hpp).
  // Rank 0 plays a stranger who knows rank 1's verbs listener and the job id
  // but not the secret: a request without a nonce is dropped; one with a
  // nonce gets ACCEPT and the listener's proof, and its wrong proof is
  // refused (the connection closes, no READY). Then the real pair works.
  auto res = run_ranks(2, [](int rank, int) {
    init_env();
    if (rank == 0) {
      verbs::QpEndpoint e;
      e.qpn = 77;
      e.mtu = IBV_MTU_1024;
      e.rd_atom = 1;
      const auto h = verbs::make_hello(verbs::HelloKind::Request, fields(e));
      {  // no nonce: the listener waits for it, then the stranger leaves
        auto fd = dial_verbs(1);
        put(fd, &h, sizeof h);
      }
      {
        auto fd = dial_verbs(1);
        const std::uint8_t nonce[verbs::kProofBytes] = {1, 2, 3};
        put(fd, &h, sizeof h);
        put(fd, nonce, sizeof nonce);
        std::uint8_t ack[sizeof(verbs::Hello) + 2 * verbs::kProofBytes];
        braid::net::read_all(fd.get(), ack, sizeof ack, braid::Deadline::after(braid::Millis(10000)), "rank 1");
        verbs::Hello a{};
        std::memcpy(&a, ack, sizeof a);
        RANK_CHECK(verbs::check_hello(a, verbs::HelloKind::Accept, job_id(), 2, 0, 1).empty());
        const std::uint8_t wrong[verbs::kProofBytes] = {};
        put(fd, wrong, sizeof wrong);
        char c;
        timeval tv{20, 0};
        ::setsockopt(fd.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        RANK_CHECK(::recv(fd.get(), &c, 1, 0) <= 0);  // closed without READY
      }
      int go = 1;
      braid::send(braid::tensor(&go, 1), 1);
    } else {
      // Waiting in a receive keeps this rank's transports progressing (a
      // barrier may run as a one-sided plan that never looks at them).
      int go = 0;
      braid::recv(braid::tensor(&go, 1), 0);
      RANK_CHECK(go == 1);
    }
    pair_still_works(rank);
  }, {.timeout_s = 120, .env = {"BRAID_JOB_TOKEN=verbs-wire-secret"}});
  INFO(describe(res));
  REQUIRE(all_ok(res));
}

TEST_CASE("malformed verbs messages are an error naming the sender, never a crash", "[verbs][wire]") {
  struct Bad {
    const char* what;
    std::vector<std::uint8_t> bytes;
    const char* expect;
    bool vanish = false;  // destroy the forged QP right after sending
  };
  auto raw = [](const verbs::MsgHeader& h, std::size_t extra = 0) {
    std::vector<std::uint8_t> v(sizeof h + extra, 0x5a);
    std::memcpy(v.data(), &h, sizeof h);
    return v;
  };
  std::vector<Bad> cases;
  cases.push_back({"shorter than a header", std::vector<std::uint8_t>(10, 1), "a message of 10 bytes"});
  cases.push_back({"eager length lies", raw(header(verbs::MsgType::Eager, 5, 1000), 10), "an eager header of 1000"});
  {
    auto h = header(verbs::MsgType::Eager, 5, 0);
    h.type = 99;
    cases.push_back({"unknown type", raw(h), "unknown type 99"});
  }
  {
    auto h = header(verbs::MsgType::Credit, 0, 0);
    h.credits = 5000;
    cases.push_back({"credits never lent", raw(h), "never lent"});
  }
  cases.push_back({"FIN the wrong way", raw(header(verbs::MsgType::Fin, 0, 0)), "FIN on the connection it dialed"});
  {
    auto h = header(verbs::MsgType::Rts, 5, 100000);
    h.addr = 0x1000;
    h.rkey = 0xdeadbeef;
    h.token = 1;
    cases.push_back({"memory it does not let us read", raw(h), "RDMA READ failed"});
    // Its adapter stops answering (the QP is gone, the process and its
    // socket stay). On hardware the READ exhausts its retries; Soft-RoCE
    // (kernel 6.1) never completes it, so the receive's own deadline must
    // end the wait, naming the peer, and stop the READ.
    cases.push_back({"a queue pair that vanished", raw(h), "retry counter exceeded", true});
  }
  for (const auto& bad : cases) {
    auto res = run_ranks(2, [&bad, &raw](int rank, int) {
      init_env();
      if (rank == 0) {
        Forger f(1);
        // A well-formed message first: the forged connection really works.
        const std::int32_t hello = 1234;
        auto good = raw(header(verbs::MsgType::Eager, 4, sizeof hello), sizeof hello);
        std::memcpy(good.data() + sizeof(verbs::MsgHeader), &hello, sizeof hello);
        f.send_raw(good.data(), good.size());
        f.send_raw(bad.bytes.data(), bad.bytes.size());
        if (bad.vanish) f.qp.reset();
        // Rank 1 aborts the job naming us; we hear of it through the store.
        int x = 0;
        expect_error([&] { braid::recv(braid::tensor(&x, 1), 1); }, ErrorCode::PeerFailure, "rank 0");
      } else {
        std::int32_t x = 0;
        braid::recv(braid::tensor(&x, 1), 0, {.tag = 4});
        RANK_CHECK(x == 1234);
        std::vector<char> big(100000);
        if (bad.vanish) {
          try {
            braid::recv(braid::tensor(big), 0, {.timeout = std::chrono::seconds(5), .tag = 5});
            RANK_CHECK_MSG(false, "the receive succeeded");
          } catch (const braid::Error& e) {
            const std::string w = e.what();
            // Or the READ reached rank 0's queue pair before it was gone,
            // and its adapter refused the forged key: as well an error
            // naming the peer (seen once in CI, 2026-11-28).
            RANK_CHECK_MSG((e.code() == ErrorCode::Timeout && w.find("rank 0") != std::string::npos) ||
                               (e.code() == ErrorCode::PeerFailure && (w.find(bad.expect) != std::string::npos ||
                                                                       w.find("refused access") != std::string::npos)),
                           w);
            RANK_CHECK(e.peer() == 0);
          }
          return;
        }
        auto e = expect_error([&] { braid::recv(braid::tensor(big), 0, {.tag = 5}); }, ErrorCode::PeerFailure,
                              bad.expect);
        RANK_CHECK(e.peer() == 0);
      }
    }, {.timeout_s = 60, .env = {}});
    INFO(bad.what << ": " << describe(res));
    REQUIRE(all_ok(res));
  }
}
