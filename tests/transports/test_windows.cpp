// Every one-sided window alone, through the face of transports/one_sided.hpp
// only: no engine, no plans. The same cases run over each kind this build
// can run here (shm always; verbs where an RDMA device is usable, which the
// verbs VM stage requires with BRAID_TEST_REQUIRE_VERBS):
//   - get and put of a described buffer, and of Scratch;
//   - signals are counted, and a waiter's sleep ends when one arrives;
//   - a failure mark reaches the peer with its text;
//   - a peer that dies is seen as gone.
// Rank 0 lives in this process; rank 1 is a thread, or for the death case a
// child process. They meet through a file store, as ranks meet in a job.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "braid/error.hpp"
#include "braid/version.hpp"
#include "src/store/store.hpp"
#include "transports/one_sided.hpp"
#include "transports/registry.hpp"

using namespace braid;

namespace {

constexpr auto kTimeout = std::chrono::milliseconds(20000);

std::vector<std::string> window_kinds() {
  std::vector<std::string> k{"shm"};
#if BRAID_HAVE_VERBS
  // Usable only where an RDMA device is: try one window of one rank.
  static const bool have_device = [] {
    try {
      char dir[] = "/tmp/braid-win-probe-XXXXXX";
      if (!::mkdtemp(dir)) return false;
      store::FileStore s(std::string(dir) + "/store", kTimeout);
      auto w = transports::make_window("verbs", s, 1, {0}, 0, Deadline::after(kTimeout), [](int) {});
      return w != nullptr;
    } catch (const Error& e) {
      if (e.code() != ErrorCode::NotSupported) throw;
      return false;
    }
  }();
  if (have_device) k.push_back("verbs");
  else if (std::getenv("BRAID_TEST_REQUIRE_VERBS"))
    FAIL("BRAID_TEST_REQUIRE_VERBS is set (the verbs VM stage) but no RDMA device is usable");
  else if (static bool said = false; !said) {
    said = true;
    WARN("verbs: no usable RDMA device here; its window cases did not run (the verbs VM stage runs them)");
  }
#endif
  return k;
}

std::string fresh_store_path() {
  char dir[] = "/tmp/braid-win-XXXXXX";
  REQUIRE(::mkdtemp(dir) != nullptr);
  return std::string(dir) + "/store";
}

// Two ranks' windows of one kind, made at once (each waits for the other).
struct WindowPair {
  std::unique_ptr<store::FileStore> s0, s1;
  std::shared_ptr<onesided::Window> w0, w1;
  WindowPair(const std::string& kind, std::uint32_t group) {
    const std::string path = fresh_store_path();
    s0 = std::make_unique<store::FileStore>(path, kTimeout);
    s1 = std::make_unique<store::FileStore>(path, kTimeout);
    std::exception_ptr err;
    std::thread t([&] {
      try {
        w1 = transports::make_window(kind, *s1, group, {0, 1}, 1, Deadline::after(kTimeout), [](int) {});
      } catch (...) {
        err = std::current_exception();
      }
    });
    w0 = transports::make_window(kind, *s0, group, {0, 1}, 0, Deadline::after(kTimeout), [](int) {});
    t.join();
    if (err) std::rethrow_exception(err);
  }
};

std::vector<std::uint8_t> pattern(std::size_t n, unsigned seed) {
  std::vector<std::uint8_t> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<std::uint8_t>((i * 131 + seed * 7) & 0xff);
  return v;
}

// Until `peer`'s signals reach `count`, through sleep_until; false after 10 s.
bool await_signals(onesided::Window& w, int peer, std::uint32_t count) {
  const Deadline d = Deadline::after(std::chrono::milliseconds(10000));
  while (!d.expired())
    if (w.sleep_until([&] { return w.received(peer) >= count; }, 10) || w.received(peer) >= count) return true;
  return false;
}

}  // namespace

TEST_CASE("each window alone: get and put of a described buffer and of Scratch, then a signal") {
  for (const std::string& kind : window_kinds()) {
    DYNAMIC_SECTION(kind) {
      WindowPair p(kind, 11);
      onesided::Window& a = *p.w0;
      onesided::Window& b = *p.w1;
      CHECK(std::string(a.transport()) == kind);
      // Rank 1 describes its Output (parity 0, which 1) and a Scratch
      // region; rank 0 reads both, then writes into the Output.
      for (const std::size_t n : {std::size_t{8}, std::size_t{4096}, std::size_t{3} << 20}) {
        INFO(n << " bytes");
        std::vector<std::uint8_t> theirs = pattern(n, 1), mine(n, 0);
        onesided::BufDesc sd;
        REQUIRE(b.ledger().writable_after(n, 1) <= 1);
        char* scratch = b.scratch(0, n, 0, &sd);
        REQUIRE(scratch != nullptr);
        std::memcpy(scratch, pattern(n, 2).data(), n);
        b.ledger().publish(0, 1, b.describe(theirs.data(), n));
        b.ledger().publish(0, 2, sd);
        b.signal(0);
        REQUIRE(await_signals(a, 1, a.ledger().consumed()[1] + 1));
        ++a.ledger().consumed()[1];

        const onesided::BufDesc d = a.ledger().peer_desc(1, 0, 1);
        REQUIRE(d.bytes == n);
        if (char* direct = a.map(1, d, d.addr, n)) std::memcpy(mine.data(), direct, n);
        else a.get(1, d, d.addr, mine.data(), n);
        CHECK(mine == theirs);
        const onesided::BufDesc s = a.ledger().peer_desc(1, 0, 2);
        a.get(1, s, s.addr + 1, mine.data(), n - 1);  // an offset inside it
        CHECK(std::memcmp(mine.data(), pattern(n, 2).data() + 1, n - 1) == 0);

        const std::vector<std::uint8_t> sent = pattern(n, 3);
        a.put(1, d, d.addr, sent.data(), n);
        a.signal(1);  // after the put: rank 1 sees the bytes once it sees the signal
        REQUIRE(await_signals(b, 0, b.ledger().consumed()[0] + 1));
        ++b.ledger().consumed()[0];
        CHECK(theirs == sent);
        // Both completed one more call: the next round may reuse parity 0.
        a.ledger().completed(a.ledger().consumed()[1]);
        b.ledger().completed(b.ledger().consumed()[0]);
      }
    }
  }
}

TEST_CASE("each window alone: a range outside what the peer described is refused, naming it") {
  for (const std::string& kind : window_kinds()) {
    DYNAMIC_SECTION(kind) {
      if (kind == "shm") continue;  // mapped or read with process_vm_readv: the kernel checks
      WindowPair p(kind, 12);
      std::vector<std::uint8_t> buf(4096), mine(8192);
      onesided::BufDesc sd;
      (void)p.w1->scratch(0, 0, 0, &sd);
      onesided::BufDesc d = p.w1->describe(buf.data(), buf.size());
      try {
        p.w0->get(1, d, d.base + d.size - 8, mine.data(), 16);
        FAIL("a read past the registration was let through");
      } catch (const Error& e) {
        CHECK(e.peer() == 1);
        CHECK(std::string(e.what()).find("outside its registered memory") != std::string::npos);
      }
    }
  }
}

TEST_CASE("each window alone: signals are counted and a failure mark carries its text") {
  for (const std::string& kind : window_kinds()) {
    DYNAMIC_SECTION(kind) {
      WindowPair p(kind, 13);
      for (int i = 0; i < 5; ++i) p.w0->signal(1);
      REQUIRE(await_signals(*p.w1, 0, 5));
      CHECK(p.w1->received(0) == 5);
      onesided::Failure f;
      CHECK_FALSE(p.w1->ledger().peer_failed(0, &f));
      p.w0->ledger().doing(true, 42, 7);
      p.w0->ledger().mark_failed({3, 1, "rank 0 gave up: a test said so", 42});
      const Deadline d = Deadline::after(std::chrono::milliseconds(10000));
      while (!p.w1->ledger().peer_failed(0, &f) && !d.expired()) p.w1->sleep_until([] { return false; }, 1);
      REQUIRE(p.w1->ledger().peer_failed(0, &f));
      CHECK(f.why == "rank 0 gave up: a test said so");
      CHECK(f.code == 3);
      CHECK(f.about == 1);
      CHECK(f.call == 42);
      CHECK(p.w1->ledger().peer_doing(0, true) == 42);
      CHECK(p.w1->ledger().peer_doing_shape(0) == 7);
    }
  }
}

TEST_CASE("each window alone: a peer that dies is seen as gone") {
  for (const std::string& kind : window_kinds()) {
    DYNAMIC_SECTION(kind) {
      const std::string path = fresh_store_path();
      const pid_t child = ::fork();
      REQUIRE(child >= 0);
      if (child == 0) {
        try {
          store::FileStore s(path, kTimeout);
          auto w = transports::make_window(kind, s, 14, {0, 1}, 1, Deadline::after(kTimeout), [](int) {});
          w->signal(0);  // "I am up"
          for (;;) ::pause();
        } catch (...) {
          ::_exit(3);
        }
      }
      store::FileStore s(path, kTimeout);
      // What the runtime's check does for a peer on this host: its process.
      auto check_alive = [child](int rank) {
        if (::kill(child, 0) != 0) throw Error(ErrorCode::PeerFailure, "rank 1: its process is gone", rank);
      };
      auto w = transports::make_window(kind, s, 14, {0, 1}, 0, Deadline::after(kTimeout), check_alive);
      REQUIRE(await_signals(*w, 1, 1));
      CHECK_FALSE(w->peer_gone(1));
      REQUIRE(::kill(child, SIGKILL) == 0);
      int status = 0;
      REQUIRE(::waitpid(child, &status, 0) == child);
      // shm: its pidfd says so. verbs: a probe READ fails once the QP's
      // retries run out, or the host's check throws naming the peer
      // (window.hpp, "Liveness").
      const Deadline d = Deadline::after(std::chrono::milliseconds(15000));
      bool gone = false;
      try {
        while (!(gone = w->peer_gone(1)) && !d.expired()) w->sleep_until([] { return false; }, 10);
      } catch (const Error& e) {
        CHECK(e.peer() == 1);
        gone = true;
      }
      CHECK(gone);
    }
  }
}
