// Failure behaviour: timeouts, a rank killed mid-transfer or before it ever
// connected, a rank that left. Every survivor gets an error naming the dead
// rank within seconds, never a hang.
#include <catch2/catch.hpp>

#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <set>
#include <string>
#include <thread>

#include <fmt/core.h>

#include "src/runtime/context.hpp"
#include "src/runtime/peers.hpp"
#include "tests/mp/harness.hpp"

using namespace braid_test;
using braid::ErrorCode;
using Clock = std::chrono::steady_clock;

namespace {
double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}
}  // namespace

TEST_CASE("a blocking receive honours its timeout and names the peer", "[failure]") {
  auto res = run_ranks(2, [](int rank, int) {
    init_env();
    if (rank == 0) {
      std::vector<float> v(10);
      const auto t0 = Clock::now();
      auto e = expect_error([&] { braid::recv(braid::tensor(v), 1, {.timeout = std::chrono::milliseconds(300)}); },
                            ErrorCode::Timeout, "receive from rank 1");
      RANK_CHECK(e.peer() == 1);
      RANK_CHECK(seconds_since(t0) < 5.0);
      // The pair is still usable after a clean timeout.
      braid::recv(braid::tensor(v), 1, {.tag = 2});
      RANK_CHECK(v[0] == 4.0f);
      auto w = braid::irecv(braid::tensor(v), 1, {.timeout = std::chrono::milliseconds(200), .tag = 3});
      expect_error([&] { w.wait(); }, ErrorCode::Timeout, "rank 1");
    } else {
      std::vector<float> v(10, 4.0f);
      std::this_thread::sleep_for(std::chrono::milliseconds(600));
      braid::send(braid::tensor(v), 0, {.tag = 2});
    }
    braid::barrier();
  });
  INFO(describe(res));
  REQUIRE(all_ok(res));
}

TEST_CASE("a rank killed mid-transfer: every survivor learns within seconds", "[failure]") {
  auto res = run_ranks(3, [](int rank, int) {
    init_env();
    if (rank == 1) {
      // Stream 32 MiB messages until a timer kills this process: the death
      // lands in the middle of some transfer.
      std::thread([] {
        std::this_thread::sleep_for(std::chrono::milliseconds(500));
        ::raise(SIGKILL);
      }).detach();
      std::vector<char> big(32u << 20, 'x');
      for (;;) braid::send(braid::tensor(big), 0);
    }
    const auto t0 = Clock::now();
    if (rank == 0) {
      std::vector<char> big(32u << 20);
      auto e = expect_error([&] {
        for (;;) braid::recv(braid::tensor(big), 1);
      }, ErrorCode::PeerFailure, "rank 1");
      RANK_CHECK(e.peer() == 1);
    } else {
      // Rank 2 never talks to rank 1: it waits on rank 0, which never sends.
      // It must still learn of rank 1's death, through the store.
      int x = 0;
      auto e = expect_error([&] { braid::recv(braid::tensor(&x, 1), 0); }, ErrorCode::PeerFailure, "rank 1");
      RANK_CHECK(e.peer() == 1);
    }
    RANK_CHECK_MSG(seconds_since(t0) < 15.0, "took " << seconds_since(t0) << " s");
    // Later ops fail at once, naming the dead rank too.
    int y = 0;
    expect_error([&] { braid::send(braid::tensor(&y, 1), rank == 0 ? 2 : 0); }, ErrorCode::PeerFailure, "rank 1");
  });
  INFO(describe(res));
  REQUIRE(res[0].ok());
  REQUIRE(res[2].ok());
  REQUIRE((!res[1].exited && res[1].code == SIGKILL));
}

TEST_CASE("a collective whose group lost a member fails naming it, though its own peers live", "[failure]") {
  // A ring broadcast from rank 0: rank 0 sends 64 MiB to rank 1 only, and
  // rank 1 stays out of the call (alive, waiting in the store: its engine
  // reads nothing, so rank 0's sends stall once sockets or rings are full).
  // Rank 2, which rank 0 has talked to, is killed. Rank 0's own requests
  // never fail (their peer lives), but the call cannot complete without
  // rank 2: it must fail naming rank 2 once rank 0 knows of the death, not
  // time out after 60 s naming rank 1.
  auto res = run_ranks(3, [](int rank, int) {
    init_env();
    auto& st = *braid::context().store;
    std::vector<float> v(16 << 20, 1.0f);  // more than sockets and rings buffer
    braid::all_reduce(braid::tensor(v.data(), 16));  // every rank in: the group's window is made
    if (rank != 1) {  // rank 0 now knows rank 2 through its transport
      const int other = 2 - rank;
      braid::sendrecv(braid::tensor(v.data(), 1), other, braid::tensor(v.data() + 1, 1), other);
    }
    if (rank == 2) {
      st.wait({"test/kill"}, std::chrono::seconds(120));
      ::raise(SIGKILL);
    }
    if (rank == 1) {
      st.wait({"test/go"}, std::chrono::seconds(120));
      return;
    }
    auto w = braid::broadcast(braid::tensor(v), 0,
                              {.async_op = true, .timeout = std::chrono::seconds(60), .algorithm = "ring"});
    st.set("test/kill", braid::store::to_bytes(std::string("1")));
    auto e = expect_error([&] { w.wait(); }, ErrorCode::PeerFailure, "rank 2");
    RANK_CHECK_MSG(e.peer() == 2, e.what());
    st.set("test/go", braid::store::to_bytes(std::string("1")));
  });
  INFO(describe(res));
  REQUIRE(res[0].ok());
  REQUIRE(res[1].ok());
  REQUIRE((!res[2].exited && res[2].code == SIGKILL));
}

TEST_CASE("a rank killed before it ever connected is detected", "[failure]") {
  auto res = run_ranks(2, [](int rank, int) {
    init_env();
    if (rank == 1) ::raise(SIGKILL);
    int x = 0;
    const auto t0 = Clock::now();
    auto e = expect_error([&] { braid::recv(braid::tensor(&x, 1), 1); }, ErrorCode::PeerFailure, "rank 1");
    RANK_CHECK(e.peer() == 1);
    RANK_CHECK_MSG(seconds_since(t0) < 10.0, "took " << seconds_since(t0) << " s");
  });
  INFO(describe(res));
  REQUIRE(res[0].ok());
}

TEST_CASE("a failure-log entry a stranger wrote cannot crash a rank", "[failure]") {
  // Anyone who reaches the store can append to its failure log. A rank
  // number past the job's (which once indexed the shm transport's peers) or
  // junk must end the job with an error saying so, never a crash.
  for (const char* record : {"1000\n", "-7\n", "banana", "2147483647999\n"}) {
    auto res = run_ranks(2, [record](int rank, int) {
      init_env();
      int x = rank;
      braid::all_reduce(braid::tensor(&x, 1));  // both connected, over the backend under test
      braid::barrier();
      if (rank == 0) {
        auto& st = *braid::context().store;
        const auto seq = st.add("failures", 1);
        st.set("failures/" + std::to_string(seq), braid::store::to_bytes(std::string(record)));
      }
      // Each rank's watchdog reads it within about a second while it waits.
      // The first rank to fail leaves, so the other may learn that first:
      // it then exits 3, and at least one rank must have read the record.
      try {
        braid::recv(braid::tensor(&x, 1), 1 - rank, {.timeout = std::chrono::seconds(20)});
        RANK_CHECK_MSG(false, "the receive succeeded");
      } catch (const braid::Error& e) {
        RANK_CHECK(e.code() == ErrorCode::PeerFailure);
        const std::string what = e.what();
        if (what.find("left the job") != std::string::npos) std::_Exit(3);
        RANK_CHECK_MSG(what.find("failure log holds a malformed entry") != std::string::npos, what);
        RANK_CHECK(e.peer() == -1);
      }
    });
    INFO("record '" << record << "': " << describe(res));
    int read_it = 0;
    for (const auto& r : res) {
      REQUIRE(r.exited);
      REQUIRE((r.code == 0 || r.code == 3));
      read_it += r.code == 0;
    }
    REQUIRE(read_it >= 1);
  }
}

TEST_CASE("a rank that leaves cleanly is not mistaken for a crash", "[failure]") {
  auto res = run_ranks(2, [](int rank, int) {
    init_env();
    int x = rank;
    if (rank == 1) {
      braid::send(braid::tensor(&x, 1), 0);
      braid::destroy_process_group();
      return;
    }
    braid::recv(braid::tensor(&x, 1), 1);
    RANK_CHECK(x == 1);
    // A later receive from the departed rank fails with a clear reason.
    auto e = expect_error([&] { braid::recv(braid::tensor(&x, 1), 1, {.timeout = std::chrono::seconds(20)}); },
                          ErrorCode::PeerFailure, "rank 1");
    RANK_CHECK(e.peer() == 1);
  });
  INFO(describe(res));
  REQUIRE(all_ok(res));
}

TEST_CASE("kill -9 at any moment leaves nothing of the job in /dev/shm", "[failure][shm]") {
  // Shared memory lives in anonymous memfds: nothing is ever named in
  // /dev/shm. Kill ranks at several points of set-up and traffic and check.
  // As root the ranks get a private, empty /dev/shm (a mount namespace), so
  // other programs on the machine cannot disturb the comparison.
  if (::geteuid() == 0 && ::unshare(CLONE_NEWNS) == 0 &&
      ::mount("none", "/", nullptr, MS_REC | MS_PRIVATE, nullptr) == 0 &&
      ::mount("braid-test-shm", "/dev/shm", "tmpfs", 0, "size=64m") == 0) {
    std::printf("kill -9 test: ranks use a private /dev/shm\n");
  } else {
    std::printf("kill -9 test: no private /dev/shm (not root?): comparing the shared one\n");
  }
  auto shm_entries = [] {
    std::set<std::string> names;
    for (const auto& e : std::filesystem::directory_iterator("/dev/shm")) names.insert(e.path().filename().string());
    return names;
  };
  const auto before = shm_entries();
  for (int when = 0; when < 4; ++when) {
    auto res = run_ranks(3, [when](int rank, int) {
      if (rank == 2 && when == 0) ::raise(SIGKILL);  // before init
      if (when == 0) {
        // The others wait for a rank that never comes: init times out.
        // (The host times out; the other may see the host's store go first.)
        try {
          braid::init_process_group({.backend = test_backend(), .timeout = std::chrono::seconds(3)});
          RANK_CHECK_MSG(false, "init succeeded without rank 2");
        } catch (const braid::Error& e) {
          RANK_CHECK_MSG(e.code() == braid::ErrorCode::Timeout || (rank != 0 && e.code() == braid::ErrorCode::Store), e.what());
        }
        return;
      }
      init_env();
      if (rank == 2 && when == 1) ::raise(SIGKILL);  // right after init
      std::vector<char> big(8u << 20, 'z');
      if (rank == 2 && when == 2) {
        std::thread([] {
          std::this_thread::sleep_for(std::chrono::milliseconds(50));
          ::raise(SIGKILL);
        }).detach();
      }
      try {
        for (int i = 0; i < 50; ++i) {
          auto w = braid::isend(braid::tensor(big), (rank + 1) % 3);
          braid::recv(braid::tensor(big), (rank + 2) % 3);
          w.wait();
          if (rank == 2 && when == 3 && i == 3) ::raise(SIGKILL);
        }
      } catch (const braid::Error& e) {
        RANK_CHECK_MSG(e.peer() == 2 || std::string(e.what()).find("rank 2") != std::string::npos, e.what());
        // Stay a moment, as a real job's survivors would: a survivor that
        // exited at once could be found gone by the other before rank 2 is.
        std::this_thread::sleep_for(std::chrono::seconds(1));
        return;
      }
      RANK_CHECK_MSG(false, "rank 2 died but the traffic completed");
    }, {.timeout_s = 90, .env = {}});
    INFO("kill point " << when << ": " << describe(res));
    REQUIRE((!res[2].exited && res[2].code == SIGKILL));
    REQUIRE(res[0].ok());
    REQUIRE(res[1].ok());
  }
  REQUIRE(shm_entries() == before);
}

// Hang diagnosis: a rank that never comes to a collective (stuck outside
// Braid, or stopped) is named by the others' timeouts as the one behind,
// with where everyone is.
// A rank that gave up on a call (a peer made no progress) and then left is
// not the culprit for a neighbour already in the next call, waiting on it:
// the one it waited on is (chaos: on tcp, 2 of 18 survivors of a stopped
// rank named a rank that had timed out and left instead). Rank 1 takes part
// in nothing after a first all_reduce; the first broadcast runs the chain
// 0 -> 1 -> 2, so rank 0's small message leaves at once while rank 2 waits
// on rank 1, times out and leaves; the second runs 2 -> 0 -> 1, so rank 0
// waits on the rank that left.
TEST_CASE("a rank that gave up and left is not named for the rank it waited on", "[failure]") {
  auto res = run_ranks(3, [](int rank, int) {
    init_env();
    auto& st = *braid::context().store;
    std::vector<float> v(16, 1.0f);
    braid::all_reduce(braid::tensor(v));  // everyone (on one host, this sets up the group's window)
    if (rank == 1) {  // alive, but in no call: until the others are done
      st.wait({"test/go"}, std::chrono::seconds(60));
      return;
    }
    const braid::OpOptions ring{.algorithm = "ring"};
    if (rank == 2) {
      auto e = expect_error([&] { braid::broadcast(braid::tensor(v), 0, {.timeout = std::chrono::milliseconds(1000), .algorithm = "ring"}); },
                            ErrorCode::Timeout, "timed out");
      RANK_CHECK_MSG(e.peer() == 1, e.what());
      braid::destroy_process_group();
      return;
    }
    braid::broadcast(braid::tensor(v), 0, ring);
    try {
      braid::broadcast(braid::tensor(v), 2, {.timeout = std::chrono::seconds(30), .algorithm = "ring"});
      RANK_CHECK_MSG(false, "broadcast #2 succeeded without rank 2");
    } catch (const braid::Error& e) {
      const std::string what = e.what();
      RANK_CHECK_MSG(e.peer() == 1, what);
      RANK_CHECK_MSG(what.find("rank 2") != std::string::npos &&
                         (what.find("gave up") != std::string::npos || what.find("giving up") != std::string::npos),
                     what);
    }
    st.set("test/go", braid::store::to_bytes(std::string("1")));
  });
  INFO(describe(res));
  REQUIRE(all_ok(res));
}

TEST_CASE("a receive from a rank that gave up on a collective and left names that collective's culprit", "[failure]") {
  // Rank 1 stays out of a broadcast (alive, in no call); rank 2 gives up on
  // it (naming rank 1) and leaves; rank 0, the root, is through it and waits
  // in a receive from rank 2,
  // whose leaving must not make rank 2 the culprit: rank 1 is.
  auto res = run_ranks(3, [](int rank, int) {
    init_env();
    auto& st = *braid::context().store;
    std::vector<float> v(16, 1.0f);
    braid::all_reduce(braid::tensor(v));
    if (rank == 1) {
      st.wait({"test/go"}, std::chrono::seconds(60));
      return;
    }
    if (rank == 2) {  // the chain 0 -> 1 -> 2: it waits on rank 1
      auto e = expect_error([&] { braid::broadcast(braid::tensor(v), 0, {.timeout = std::chrono::milliseconds(1000), .algorithm = "ring"}); },
                            ErrorCode::Timeout, "timed out");
      RANK_CHECK_MSG(e.peer() == 1, e.what());
      braid::destroy_process_group();
      return;
    }
    braid::broadcast(braid::tensor(v), 0, {.algorithm = "ring"});  // the root: its small send is done at once
    float x = 0;
    try {
      braid::recv(braid::tensor(&x, 1), 2, {.timeout = std::chrono::seconds(30)});
      RANK_CHECK_MSG(false, "the receive succeeded");
    } catch (const braid::Error& e) {
      const std::string what = e.what();
      RANK_CHECK_MSG(e.peer() == 1, what);
      RANK_CHECK_MSG(what.find("rank 2 left the job after giving up") != std::string::npos, what);
    }
    st.set("test/go", braid::store::to_bytes(std::string("1")));
  });
  INFO(describe(res));
  REQUIRE(all_ok(res));
}

TEST_CASE("a large send to a rank that gave up and left fails at once, naming that rank's culprit", "[failure]") {
  // Rank 0 announces 4 MiB to rank 1, which never posts the receive: it
  // gives up on an all_reduce that rank 2 stays out of, and leaves. The
  // send waits for a reply (CTS, FIN) that will never come: it must fail
  // when rank 1 goes, not at its 60 s deadline, and name rank 2, the cause.
  auto res = run_ranks(3, [](int rank, int) {
    init_env();
    auto& st = *braid::context().store;
    std::vector<float> v(16, 1.0f);
    braid::all_reduce(braid::tensor(v));
    if (rank == 2) {
      st.wait({"test/go"}, std::chrono::seconds(120));
      return;
    }
    std::vector<float> big(rank == 0 ? 1 << 20 : 0, 2.0f);
    braid::Work w;
    if (rank == 0) w = braid::isend(braid::tensor(big), 1, {.timeout = std::chrono::seconds(60), .tag = 5});
    auto e = expect_error([&] { braid::all_reduce(braid::tensor(v), braid::ReduceOp::Sum, {.timeout = std::chrono::milliseconds(1000), .algorithm = "ring"}); },
                          ErrorCode::Timeout, "timed out");
    RANK_CHECK_MSG(e.peer() == 2, e.what());
    if (rank == 1) {
      braid::destroy_process_group();
      return;
    }
    try {
      w.wait();
      RANK_CHECK_MSG(false, "the send succeeded");
    } catch (const braid::Error& x) {
      const std::string what = x.what();
      RANK_CHECK_MSG(x.code() == ErrorCode::PeerFailure, what);  // not its deadline
      RANK_CHECK_MSG(x.peer() == 2, what);
      RANK_CHECK_MSG(what.find("rank 1 left the job") != std::string::npos, what);
    }
    st.set("test/go", braid::store::to_bytes(std::string("1")));
  });
  INFO(describe(res));
  REQUIRE(all_ok(res));
}

TEST_CASE("a rank that timed out and left on its error says whom it gave up on", "[failure]") {
  // The leaver times out receiving from rank 2 (which stays out) and leaves
  // on that error without destroy_process_group; the waiter, receiving from
  // the leaver, learns only that it left. Its goodbye must say it gave up on
  // rank 2 (a timeout names no failure, and a point-to-point op leaves no
  // record in the store), so that the waiter names rank 2, not a rank that
  // merely left. Leaver 0 hosts the store and takes it along; leaver 1 does not.
  for (int leaver : {0, 1}) {
    int out[2];
    REQUIRE(::pipe(out) == 0);
    auto res = run_ranks(3, [&](int rank, int) {
      init_env();
      float x = 1.0f;
      auto one = braid::tensor(&x, 1);
      braid::all_reduce(one);  // every pair connected
      if (rank == leaver) {
        auto e = expect_error([&] { braid::recv(one, 2, {.timeout = std::chrono::milliseconds(1000)}); },
                              ErrorCode::Timeout, "rank 2");
        RANK_CHECK_MSG(e.peer() == 2, e.what());
      } else if (rank != 2) {
        auto e = expect_error([&] { braid::recv(one, leaver, {.timeout = std::chrono::seconds(30)}); },
                              ErrorCode::PeerFailure, "rank 2");
        RANK_CHECK_MSG(e.peer() == 2, e.what());
        char byte = 1;
        RANK_CHECK(::write(out[1], &byte, 1) == 1);
      } else {
        char byte = 0;
        RANK_CHECK(::read(out[0], &byte, 1) == 1);  // until the waiter has its error
      }
      braid::take_context().reset();  // leaves as a rank returning from main on an error does
    });
    ::close(out[0]);
    ::close(out[1]);
    INFO("leaver " << leaver << ": " << describe(res));
    REQUIRE(all_ok(res));
  }
}

TEST_CASE("a one-sided read of a buffer its owner let go of on giving up names the owner's culprit", "[failure]") {
  // Shared memory, a peer_read all_gather (each rank reads the others'
  // inputs in place, by process_vm_readv). Rank 1 enters, signals its
  // buffer ready, times out waiting on rank 2 (which stays out), and frees
  // its input; rank 0 enters only then, finds rank 1's signal, and reads a
  // buffer that is gone (EFAULT). Its error must be rank 1's reason, not a
  // failed copy naming rank 1 (seen in chaos: a survivor named another that
  // had given up on a kill and let go of its buffers).
  int freed[2], done[2];
  REQUIRE(::pipe(freed) == 0);
  REQUIRE(::pipe(done) == 0);
  auto res = run_ranks(3, [&](int rank, int world) {
    init_env("shm");
    {  // the group's window, which every rank opens on its first one-sided call
      std::vector<float> a(4, 1.0f), all(4 * static_cast<std::size_t>(world));
      braid::all_gather_into_tensor(braid::tensor(all), braid::tensor(a), {.algorithm = "peer_read"});
    }
    char byte = 1;
    if (rank == 2) {
      RANK_CHECK(::read(done[0], &byte, 1) == 1);  // until rank 0 has its error
    } else {
      const std::size_t n = 1 << 20;  // 4 MiB of float: its own mapping, unmapped when freed
      auto in = std::make_unique<std::vector<float>>(n, 1.0f);
      std::vector<float> out(n * static_cast<std::size_t>(world));
      if (rank == 0) RANK_CHECK(::read(freed[0], &byte, 1) == 1);
      braid::OpOptions o{.timeout = std::chrono::milliseconds(rank == 1 ? 1000 : 20000), .algorithm = "peer_read"};
      // Rank 1 names one of the two it waited on; rank 0 must give rank 1's
      // reason (a timeout), not a failed copy of rank 1's memory.
      (void)expect_error([&] { braid::all_gather_into_tensor(braid::tensor(out), braid::tensor(*in), o); },
                            ErrorCode::Timeout, rank == 1 ? "timed out" : "rank 1 gave up on this call");
      in.reset();
      if (rank == 1) RANK_CHECK(::write(freed[1], &byte, 1) == 1);
      const char both[2] = {1, 1};  // for ranks 1 and 2
      if (rank == 0) RANK_CHECK(::write(done[1], both, 2) == 2);
      if (rank == 1) RANK_CHECK(::read(done[0], &byte, 1) == 1);  // alive until rank 0 has read
    }
    braid::take_context().reset();
  });
  for (int fd : {freed[0], freed[1], done[0], done[1]}) ::close(fd);
  INFO(describe(res));
  REQUIRE(all_ok(res));
}

TEST_CASE("a call waiting for a peer to finish an earlier one names whom that peer waits on", "[failure]") {
  // Shared memory, small direct gathers to rank 0 through the window's fast
  // boxes: a leaf writes its box and goes on. Rank 3 stays out, so rank 0
  // waits on it in the first gather; rank 2 runs ahead until a gather needs
  // its boxes back, which waits for rank 0 to finish the earlier call. Its
  // timeout must name rank 3, whom rank 0 waits on, not rank 0.
  int done[2];
  REQUIRE(::pipe(done) == 0);
  auto res = run_ranks(4, [&](int rank, int world) {
    init_env("shm");
    std::vector<float> a(4, 1.0f), all(4 * static_cast<std::size_t>(world));
    std::vector<braid::Tensor> blocks;
    for (int q = 0; q < world; ++q) blocks.push_back(braid::tensor(all.data() + 4 * q, 4));
    braid::all_reduce(braid::tensor(a));  // the group's window, opened by every rank
    const braid::OpOptions direct{.timeout = std::chrono::milliseconds(rank == 2 ? 1500 : 4000), .algorithm = "direct"};
    char byte = 1;
    if (rank == 1) braid::gather(braid::tensor(a), nullptr, 0, direct);  // a leaf: done at once
    if (rank == 3 || rank == 1) {
      RANK_CHECK(::read(done[0], &byte, 1) == 1);  // until rank 2 has its error
    } else if (rank == 0) {
      (void)expect_error([&] { braid::gather(braid::tensor(a), &blocks, 0, direct); }, ErrorCode::Timeout, "");
    } else {
      auto e = expect_error(
          [&] {
            for (int i = 0; i < 64; ++i) braid::gather(braid::tensor(a), nullptr, 0, direct);
          },
          ErrorCode::Timeout, "timed out");
      RANK_CHECK_MSG(e.peer() == 3, e.what());
      const char two[2] = {1, 1};  // for ranks 1 and 3
      RANK_CHECK(::write(done[1], two, 2) == 2);
    }
    braid::take_context().reset();
  });
  ::close(done[0]);
  ::close(done[1]);
  INFO(describe(res));
  REQUIRE(all_ok(res));
}

TEST_CASE("a send that gives up mid-transfer does not declare its live receiver failed", "[failure]") {
  // Rank 1 is stuck receiving from rank 2, which stays out, and takes
  // nothing from rank 0, whose send to it times out with bytes of it on the
  // way: over shared memory a 1 MiB message announced (an RTS: rank 1 is to
  // copy it out of rank 0's memory); over TCP an eager frame half written
  // into a socket rank 1 stopped reading (its unexpected messages reached
  // their bound). The stream to rank 1 is out of step. That used to log
  // rank 1 as the job's failure, so that rank 1 ("rank 1 (this rank) was
  // declared failed") and every other survivor named it, not the rank it
  // was stuck on (chaos: a stopped rank's host-mates). Rank 0's error must
  // name rank 2, whom rank 1 waits on; rank 1 must time out naming rank 2;
  // rank 0 refuses later sends to rank 1 rather than reuse a broken stream;
  // and over shared memory the withdrawn message is not delivered when
  // rank 1 finally posts its receive (rank 0 may have reused the memory).
  for (const char* backend : {"shm", "tcp"}) {
    int done[2];
    REQUIRE(::pipe(done) == 0);
    auto res = run_ranks(3, [&](int rank, int) {
      const bool shm = std::string(backend) == "shm";
      if (!shm) ::setenv("BRAID_MAX_UNEXPECTED_BYTES", "65536", 1);  // rank 1 stops reading rank 0 soon
      init_env(backend);
      float x = 1.0f;
      braid::all_reduce(braid::tensor(&x, 1));  // every pair connected
      std::vector<float> big(shm ? 1u << 18 : 1u << 14, static_cast<float>(rank + 1));  // 1 MiB, 64 KiB
      char byte = 1;
      if (rank == 0) {
        const braid::OpOptions o{.timeout = std::chrono::milliseconds(800), .tag = 7};
        auto e = expect_error(
            [&] {
              for (int i = 0; i < (shm ? 1 : 4096); ++i) braid::send(braid::tensor(big), 1, o);
            },
            ErrorCode::Timeout, "rank 1 waits in turn on rank 2");
        RANK_CHECK_MSG(e.peer() == 2, e.what());  // diagnosed: the end of the chain of waits
        // Bytes of the timed-out send on the wire leave the stream out of
        // step, and later sends are refused. Over TCP its frame may not have
        // started (the socket filled up at the end of the one before): it
        // was withdrawn whole, the stream is in step, and a later send waits
        // like any other for rank 1, which reads nothing (once in about 20
        // runs this send waited out the 60 s default timeout: this fits).
        int y = 0;
        try {
          braid::send(braid::tensor(&y, 1), 1, {.timeout = std::chrono::milliseconds(1000), .tag = 8});
          RANK_CHECK_MSG(false, "a send to rank 1 succeeded");
        } catch (const braid::Error& x) {
          const bool refused = x.code() == ErrorCode::Transport && std::string(x.what()).find("out of step") != std::string::npos;
          RANK_CHECK_MSG(refused || (!shm && x.code() == ErrorCode::Timeout), x.what());
        }
        RANK_CHECK(::read(done[0], &byte, 1) == 1);  // until rank 1 is through
      } else if (rank == 1) {
        int y = 0;
        auto e = expect_error([&] { braid::recv(braid::tensor(&y, 1), 2, {.timeout = std::chrono::milliseconds(3000)}); },
                              ErrorCode::Timeout, "rank 2");
        RANK_CHECK_MSG(e.peer() == 2, e.what());
        if (shm)
          (void)expect_error(
              [&] { braid::recv(braid::tensor(big), 0, {.timeout = std::chrono::milliseconds(3000), .tag = 7}); },
              ErrorCode::Transport, "withdrew");
        const char two[2] = {1, 1};  // for ranks 0 and 2
        RANK_CHECK(::write(done[1], two, 2) == 2);
      } else {
        RANK_CHECK(::read(done[0], &byte, 1) == 1);
      }
      braid::take_context().reset();
    });
    ::close(done[0]);
    ::close(done[1]);
    INFO(backend << ": " << describe(res));
    REQUIRE(all_ok(res));
  }
}

TEST_CASE("a rank whose every socket to a peer is mid-frame says goodbye to it on a new one", "[failure]") {
  // TCP. Rank 0's send to rank 1 gives up half written (rank 1, stuck
  // receiving from rank 2, stopped reading rank 0 at its unexpected-bytes
  // bound), and rank 0 leaves on that error, which names rank 2 (whom rank
  // 1 waits on). Its one socket to rank 1 cannot carry a goodbye; without
  // one, rank 1 read the socket's end as rank 0's death and named rank 0.
  // Rank 0 now dials rank 1 afresh to say whom it gave up on: rank 1's
  // error must name rank 2, long before its own 20 s timeout. With a job
  // secret, the new socket proves it first, as every socket does.
  for (const char* token : {"", "the-job-secret-0123456789"}) {
    int done[2];
    REQUIRE(::pipe(done) == 0);
    auto res = run_ranks(3, [&](int rank, int) {
      ::setenv("BRAID_MAX_UNEXPECTED_BYTES", "65536", 1);
      if (*token) ::setenv("BRAID_JOB_TOKEN", token, 1);
      init_env("tcp");
      float x = 1.0f;
      braid::all_reduce(braid::tensor(&x, 1));  // every pair connected
      std::vector<float> big(1u << 14, 1.0f);  // 64 KiB: eager
      char byte = 1;
      if (rank == 0) {
        const braid::OpOptions o{.timeout = std::chrono::milliseconds(800), .tag = 7};
        auto e = expect_error(
            [&] {
              for (int i = 0; i < 4096; ++i) braid::send(braid::tensor(big), 1, o);
            },
            ErrorCode::Timeout, "rank 1 waits in turn on rank 2");
        RANK_CHECK_MSG(e.peer() == 2, e.what());
      } else if (rank == 1) {
        int y = 0;
        const auto t0 = Clock::now();
        auto e = expect_error([&] { braid::recv(braid::tensor(&y, 1), 2, {.timeout = std::chrono::seconds(20)}); },
                              ErrorCode::PeerFailure, "rank 2");
        RANK_CHECK_MSG(e.peer() == 2, e.what());
        RANK_CHECK_MSG(seconds_since(t0) < 15.0, "took " << seconds_since(t0) << " s");
        RANK_CHECK(::write(done[1], &byte, 1) == 1);
      } else {
        RANK_CHECK(::read(done[0], &byte, 1) == 1);  // until rank 1 has its error
      }
      braid::take_context().reset();  // leaves as a rank returning from main on an error does
    });
    ::close(done[0]);
    ::close(done[1]);
    INFO((*token ? "with a secret: " : "") << describe(res));
    REQUIRE(all_ok(res));
  }
}

// Rank 1 stays alive, in no call; rank 2 runs `give_up`, which must time
// out naming rank 1, then returns from main on its error (its context
// destroyed, no destroy_process_group) and signals; only then rank 0 runs
// `survive`, which waits on rank 2, and must fail naming rank 1 (`survived`:
// what it means if it succeeds). `first` runs on every rank before that.
static void check_leaver_not_named(const std::function<void(std::vector<float>&)>& first,
                                   const std::function<void(std::vector<float>&)>& give_up,
                                   const std::function<void(std::vector<float>&)>& survive, const char* survived) {
  int gone[2];
  REQUIRE(::pipe(gone) == 0);
  auto res = run_ranks(3, [&](int rank, int) {
    init_env();
    auto& st = *braid::context().store;
    std::vector<float> v(16, 1.0f);
    first(v);
    if (rank == 1) {  // alive, but in no call: until rank 0 is done
      st.wait({"test/go"}, std::chrono::seconds(60));
      return;
    }
    char byte = 1;
    if (rank == 2) {
      auto e = expect_error([&] { give_up(v); }, ErrorCode::Timeout, "timed out");
      RANK_CHECK_MSG(e.peer() == 1, e.what());
      braid::take_context().reset();
      RANK_CHECK(::write(gone[1], &byte, 1) == 1);
      return;
    }
    RANK_CHECK(::read(gone[0], &byte, 1) == 1);
    try {
      survive(v);
      RANK_CHECK_MSG(false, survived);
    } catch (const braid::Error& e) {
      RANK_CHECK_MSG(e.peer() == 1, e.what());
    }
    st.set("test/go", braid::store::to_bytes(std::string("1")));
  });
  ::close(gone[0]);
  ::close(gone[1]);
  INFO(describe(res));
  REQUIRE(all_ok(res));
}

TEST_CASE("a rank that gave up and exited unseen is not named for the rank it waited on", "[failure]") {
  // As above, but rank 2 returns from main on its error, and no goodbye of
  // its reaches rank 0, which it never sent to: rank 0 finds its process
  // gone (chaos: a host-mate of a stopped rank timed out, exited, and a
  // survivor named it "its process is gone"). Its record of giving up in
  // the store must still name rank 1.
  check_leaver_not_named(
      // everyone (on one host, through the group's window)
      [](std::vector<float>& v) { braid::all_reduce(braid::tensor(v)); },
      // rank 2 waits on rank 1 (a ring from root 1: 1 -> 2 -> 0)
      [](std::vector<float>& v) {
        braid::broadcast(braid::tensor(v), 1, {.timeout = std::chrono::milliseconds(1000), .algorithm = "ring"});
      },
      [](std::vector<float>& v) {
        braid::broadcast(braid::tensor(v), 1, {.timeout = std::chrono::seconds(30), .algorithm = "ring"});
      },
      "broadcast succeeded without ranks 1 and 2");
}

TEST_CASE("a rank that gave up and exited unseen with no window leaves its word in the store", "[failure]") {
  // As above, with nothing shared but the store: no collective ran (no
  // group window), rank 2 never sent to rank 0 (its memory is not mapped
  // there, and no goodbye of its reaches rank 0). Rank 0 waits on rank 2
  // alone, and finds its process gone (chaos, shared memory: a host-mate of
  // a stopped rank timed out, exited, and a survivor named it). Its last
  // word, in the store, must make rank 0 name rank 1.
  check_leaver_not_named(
      [](std::vector<float>&) {},
      [](std::vector<float>& v) { braid::recv(braid::tensor(v), 1, {.timeout = std::chrono::milliseconds(1000)}); },
      [](std::vector<float>& v) { braid::recv(braid::tensor(v), 2, {.timeout = std::chrono::seconds(30)}); },
      "a receive from rank 2 succeeded after it exited");
}

TEST_CASE("a rank that left after the store's host died is not named for it", "[failure]") {
  // Rank 0 hosts the store and is killed; rank 1, which waits on it, learns
  // of it and leaves; rank 2 waits on rank 1 only (it never talks to rank 0,
  // so it sees rank 1 go first). With the store gone, the failure log that
  // would tell rank 2 why rank 1 left is gone: rank 1's goodbye (shm, tcp)
  // or its word in shared memory must say it, and rank 2 name rank 0.
  auto res = run_ranks(3, [](int rank, int) {
    init_env();
    auto& st = *braid::context().store;
    float x = 1.0f;
    auto one = braid::tensor(&x, 1);
    if (rank == 0) {
      braid::send(one, 1);
      st.wait({"test/rank1-waits"}, std::chrono::seconds(30));
      ::raise(SIGKILL);
    }
    if (rank == 1) {
      braid::recv(one, 0);
      braid::send(one, 2);
      auto w = braid::irecv(one, 0, {.tag = 1});
      st.set("test/rank1-waits", braid::store::to_bytes(std::string("1")));
      auto e = expect_error([&] { w.wait(); }, ErrorCode::PeerFailure, "rank 0");
      RANK_CHECK_MSG(e.peer() == 0, e.what());
      try {
        braid::destroy_process_group();  // leaves: its goodbye goes out
      } catch (const braid::Error&) {  // the store is gone: said so, and left all the same
      }
      return;
    }
    braid::recv(one, 1);
    try {
      braid::recv(one, 1, {.timeout = std::chrono::seconds(20), .tag = 1});
      RANK_CHECK_MSG(false, "the receive from rank 1 succeeded");
    } catch (const braid::Error& e) {
      RANK_CHECK_MSG(e.peer() == 0, e.what());
    }
    try {
      braid::destroy_process_group();
    } catch (const braid::Error&) {
    }
  });
  INFO(describe(res));
  REQUIRE((!res[0].exited && res[0].code == SIGKILL));
  REQUIRE(res[1].ok());
  REQUIRE(res[2].ok());
}

TEST_CASE("a goodbye naming the frozen store's host is believed without the store", "[failure]") {
  // Rank 0 hosts the store and stops: the store freezes. Rank 1 (timeout
  // 3 s) finds it frozen, aborts and leaves, its goodbye naming rank 0.
  // Rank 2 (timeout 60 s) learns of it only from that goodbye, after rank 1
  // has gone. Its error must name rank 0 at once, not after waiting out its
  // 60 s on a store that will not answer (chaos, rank 0 stopped over TCP:
  // such a publish made a survivor's error 3 s late).
  int left[2];  // rank 1 writes a byte once it has left
  REQUIRE(::pipe(left) == 0);
  auto res = run_ranks(3, [&](int rank, int) {
    braid::init_process_group({.backend = test_backend(), .init_method = "env://",
                               .timeout = rank == 1 ? std::chrono::seconds(3) : std::chrono::seconds(60)});
    auto& st = *braid::context().store;
    float x = 1.0f;
    auto one = braid::tensor(&x, 1);
    if (rank == 0) {
      st.set("test/pid0", braid::store::to_bytes(std::to_string(::getpid())));
      st.wait({"test/ready"}, std::chrono::seconds(30));
      ::raise(SIGSTOP);  // rank 2 kills it at the end
      return;
    }
    if (rank == 1) {
      braid::send(one, 2);
      auto w = braid::irecv(one, 0, {.tag = 1});
      auto e = expect_error([&] { w.wait(); }, ErrorCode::PeerFailure, "rank 0");
      RANK_CHECK_MSG(e.peer() == 0, e.what());
      try {
        braid::destroy_process_group();  // its goodbye goes out, naming rank 0
      } catch (const braid::Error&) {
      }
      RANK_CHECK(::write(left[1], "x", 1) == 1);
      return;
    }
    braid::recv(one, 1);
    const int pid0 = std::stoi(braid::store::to_string(st.get("test/pid0")));
    st.set("test/ready", braid::store::to_bytes(std::string("1")));
    // Out of Braid until rank 1 has left (a waiter in Braid would itself ask
    // the frozen store, and wait out its 60 s there first).
    pollfd p{left[0], POLLIN, 0};
    RANK_CHECK_MSG(::poll(&p, 1, 40000) == 1, "rank 1 never left");
    const auto t1 = Clock::now();
    try {
      braid::recv(one, 1, {.timeout = std::chrono::seconds(60), .tag = 2});
      RANK_CHECK_MSG(false, "a receive from rank 1 succeeded after it left");
    } catch (const braid::Error& e) {
      RANK_CHECK_MSG(e.peer() == 0, e.what());
      RANK_CHECK_MSG(seconds_since(t1) < 20, fmt::format("{:.1f} s: {}", seconds_since(t1), e.what()));
    }
    ::kill(pid0, SIGKILL);
  }, {.timeout_s = 120, .env = {}});
  ::close(left[0]);
  ::close(left[1]);
  INFO(describe(res));
  REQUIRE((!res[0].exited && res[0].code == SIGKILL));
  REQUIRE(res[1].ok());
  REQUIRE(res[2].ok());
}

// A timeout's diagnosis prefers a stopped process on this host among the
// ranks furthest behind: it has to tell a stopped rank from one that simply
// has not published a position.
TEST_CASE("a stopped process is told from a running one", "[failure]") {
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    for (;;) ::pause();
  }
  auto becomes = [&](bool stopped) {
    for (auto until = Clock::now() + std::chrono::seconds(10); Clock::now() < until;) {
      if (braid::process_stopped(child) == stopped) return true;
      sched_yield();
    }
    return false;
  };
  CHECK(becomes(false));
  ::kill(child, SIGSTOP);
  CHECK(becomes(true));
  ::kill(child, SIGCONT);
  CHECK(becomes(false));
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  CHECK_FALSE(braid::process_stopped(child));  // reaped: no /proc entry
  CHECK_FALSE(braid::process_stopped(-1));
}

TEST_CASE("a collective's timeout says who is where", "[failure][hang]") {
  auto res = run_ranks(4, [](int rank, int) {
    init_env();
    auto& st = *braid::context().store;
    std::vector<float> v(1 << 18, 1.0f);  // 1 MiB
    braid::all_reduce(braid::tensor(v));  // call #1, everyone
    if (rank == 2) {  // skips call #2: waits until the others have timed out in it
      st.wait({"test/go"}, std::chrono::seconds(60));
      return;
    }
    auto e = expect_error([&] { braid::all_reduce(braid::tensor(v), braid::ReduceOp::Sum, {.timeout = std::chrono::milliseconds(1500)}); },
                          ErrorCode::Timeout, "all_reduce #2 timed out");
    const std::string what = e.what();
    RANK_CHECK_MSG(e.peer() == 2, what);
    if (what.find("ranks 0, 1, 3 wait in all_reduce #2 (1 MiB)") == std::string::npos) {
      std::fprintf(stderr, "[rank %d] %s\n", rank, what.c_str());
      RANK_CHECK(false);
    }
    RANK_CHECK_MSG(what.find("rank 2 ") != std::string::npos, what);
    // braid-info reads the live job: the same positions, rank 2 behind.
    if (rank == 0 && std::getenv("BRAID_INFO")) {
      const std::string cmd = fmt::format("{} --job 127.0.0.1:{} 2>&1", std::getenv("BRAID_INFO"), std::getenv("MASTER_PORT"));
      std::string out;
      if (FILE* p = ::popen(cmd.c_str(), "r")) {
        char buf[512];
        while (std::fgets(buf, sizeof buf, p)) out += buf;
        RANK_CHECK_MSG(::pclose(p) == 0, out);
      }
      RANK_CHECK_MSG(out.find("4 ranks") != std::string::npos, out);
      RANK_CHECK_MSG(out.find("ranks 0, 1, 3 wait in all_reduce #2 (1 MiB)") != std::string::npos, out);
      RANK_CHECK_MSG(out.find("Behind the others: rank 2") != std::string::npos, out);
    }
    if (st.add("test/timed_out", 1) == 3) st.set("test/go", braid::store::to_bytes(std::string("1")));
  });
  INFO(describe(res));
  REQUIRE(all_ok(res));
}
