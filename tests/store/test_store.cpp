// Tests of the bootstrap stores: TcpStore (+ server), FileStore, PrefixStore.
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <thread>

#include "braid/error.hpp"
#include "src/common/socket.hpp"
#include "src/common/auth.hpp"
#include "src/store/store.hpp"
#include "src/store/store_wire.hpp"

using namespace braid::store;
using namespace std::chrono_literals;
using braid::ErrorCode;

namespace {

const std::string kHost = "127.0.0.1";

// Runs f, which must throw braid::Error, and returns that error.
template <class F>
braid::Error error_of(F&& f) {
  try {
    f();
  } catch (const braid::Error& e) {
    return e;
  }
  FAIL("expected a braid::Error");
  return braid::Error(ErrorCode::Internal, "unreachable");
}

bool contains(const braid::Error& e, const std::string& s) {
  return std::string(e.what()).find(s) != std::string::npos;
}

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

std::string temp_path(const std::string& tag) {
  static std::atomic<int> n{0};
  const char* dir = std::getenv("TMPDIR");
  return fmt::format("{}/braid_store_{}_{}_{}", dir && *dir ? dir : "/tmp", tag, getpid(), n++);
}

bool file_exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

// Removes the file if a failed test left it behind.
struct TempPath {
  std::string path;
  explicit TempPath(const std::string& tag) : path(temp_path(tag)) {}
  ~TempPath() { ::unlink(path.c_str()); }
};

struct TcpFixture {
  TcpStoreServer server{kHost, 0};
  std::shared_ptr<TcpStore> client(Millis timeout = 5s) {
    return std::make_shared<TcpStore>(kHost, server.port(), timeout);
  }
};

// The semantics every store shares. `s` is fresh apart from keys it does not use.
void check_semantics(Store& s) {
  const std::int64_t n0 = s.num_keys();

  s.set("alpha", to_bytes("one"));
  CHECK(to_string(s.get("alpha", 1s)) == "one");
  s.set("alpha", to_bytes("two"));
  CHECK(to_string(s.get("alpha")) == "two");
  const Bytes binary{0, 1, 255, 0, 7};
  s.set("bin", binary);
  CHECK(s.get("bin") == binary);
  s.set("empty", {});
  CHECK(s.get("empty").empty());

  CHECK_FALSE(s.try_get("missing").has_value());
  CHECK(s.try_get("alpha") == std::optional<Bytes>(to_bytes("two")));

  CHECK(s.add("ctr", 5) == 5);
  CHECK(s.add("ctr", -7) == -2);
  CHECK(to_string(s.get("ctr")) == "-2");  // counters are decimal text, as in torch
  s.set("text", to_bytes("abc"));
  auto bad_add = error_of([&] { s.add("text", 1); });
  CHECK(bad_add.code() == ErrorCode::InvalidArgument);
  CHECK(contains(bad_add, "text"));
  CHECK(s.add("ctr", 2) == 0);  // the store still works after a refused request

  CHECK(to_string(s.compare_set("cas", {}, to_bytes("first"))) == "first");
  CHECK(to_string(s.compare_set("cas", to_bytes("wrong"), to_bytes("second"))) == "first");
  CHECK(to_string(s.compare_set("cas", to_bytes("first"), to_bytes("second"))) == "second");
  CHECK(to_string(s.get("cas")) == "second");
  // torch: a missing key with a non-empty expected value answers `expected`, stores nothing.
  CHECK(to_string(s.compare_set("cas2", to_bytes("x"), to_bytes("y"))) == "x");
  CHECK_FALSE(s.try_get("cas2").has_value());

  CHECK(s.check({"alpha", "ctr"}));
  CHECK_FALSE(s.check({"alpha", "missing"}));
  CHECK(s.delete_key("bin"));
  CHECK_FALSE(s.delete_key("bin"));
  CHECK_FALSE(s.try_get("bin").has_value());

  // alpha, empty, ctr, text, cas
  CHECK(s.num_keys() == n0 + 5);

  s.wait({"alpha", "ctr"}, 1s);
  auto t0 = std::chrono::steady_clock::now();
  auto wait_err = error_of([&] { s.wait({"alpha", "nokey"}, 200ms); });
  CHECK(wait_err.code() == ErrorCode::Timeout);
  CHECK(contains(wait_err, "nokey"));
  CHECK(ms_since(t0) >= 150);
  CHECK(ms_since(t0) < 2000);

  t0 = std::chrono::steady_clock::now();
  auto get_err = error_of([&] { s.get("absent", 200ms); });
  CHECK(get_err.code() == ErrorCode::Timeout);
  CHECK(contains(get_err, "absent"));
  CHECK(ms_since(t0) >= 150);
  CHECK(ms_since(t0) < 2000);
  CHECK(to_string(s.get("alpha")) == "two");  // in step after the timeout

  CHECK(error_of([&] { s.set("", {}); }).code() == ErrorCode::InvalidArgument);
  CHECK(error_of([&] { s.get("", 10ms); }).code() == ErrorCode::InvalidArgument);
  CHECK(error_of([&] { s.check({"alpha", ""}); }).code() == ErrorCode::InvalidArgument);
  CHECK(error_of([&] { s.wait({""}, 10ms); }).code() == ErrorCode::InvalidArgument);
  CHECK(error_of([&] { s.get("alpha", -1ms); }).code() == ErrorCode::InvalidArgument);
  CHECK(error_of([&] { s.set(std::string(kMaxKeyLen + 1, 'k'), {}); }).code() ==
        ErrorCode::InvalidArgument);
}

// `waiter` blocks on keys that `setter`, another client of the same store, sets later.
void check_parked_get(Store& waiter, Store& setter) {
  std::jthread later([&] {
    std::this_thread::sleep_for(100ms);
    setter.set("late", to_bytes("here"));
    std::this_thread::sleep_for(50ms);
    setter.set("w1", {});
    setter.set("w2", {});
  });
  auto t0 = std::chrono::steady_clock::now();
  CHECK(to_string(waiter.get("late", 5s)) == "here");
  CHECK(ms_since(t0) >= 80);
  waiter.wait({"w1", "w2"}, 5s);
  CHECK(ms_since(t0) < 4000);
}

// 8 processes x 200 add() on one key; every child checks its results rise.
// The children are forked first, while this process has no threads (a fork
// beside a running server thread can inherit a held allocator lock, e.g.
// under ASan), and are told the server's port through a pipe once it is up.
struct ForkedAdders {
  static constexpr int kProcs = 8, kAdds = 200;
  std::vector<pid_t> kids;
  std::vector<braid::Fd> go;  // write ends: one int (a port, or 0) per child

  ForkedAdders(const std::function<std::unique_ptr<Store>(int)>& make) {
    for (int i = 0; i < kProcs; ++i) {
      int p[2];
      REQUIRE(::pipe(p) == 0);
      pid_t pid = fork();
      REQUIRE(pid >= 0);
      if (pid == 0) {
        ::close(p[1]);
        for (auto& fd : go) ::close(fd.get());  // the siblings' pipes
        _exit(child(p[0], make));
      }
      ::close(p[0]);
      kids.push_back(pid);
      go.emplace_back(p[1]);
    }
  }

  static int child(int fd, const std::function<std::unique_ptr<Store>(int)>& make) {
    try {
      int port = 0;
      pollfd pf{fd, POLLIN, 0};
      if (::poll(&pf, 1, 10000) != 1 || ::read(fd, &port, sizeof port) != sizeof port) return 3;
      auto s = make(port);
      std::int64_t last = 0;
      for (int j = 0; j < kAdds; ++j) {
        std::int64_t v = s->add("counter", 1);
        if (v <= last) return 2;
        last = v;
      }
      return 0;
    } catch (...) {
      return 1;
    }
  }

  // Lets the children run, waits for them, and checks the total through `parent`.
  void run(int port, Store& parent) {
    for (auto& fd : go) REQUIRE(::write(fd.get(), &port, sizeof port) == sizeof port);
    for (pid_t pid : kids) {
      int status = 0;
      REQUIRE(waitpid(pid, &status, 0) == pid);
      CHECK(WIFEXITED(status));
      CHECK(WEXITSTATUS(status) == 0);
    }
    kids.clear();
    CHECK(parent.add("counter", 0) == kProcs * kAdds);
  }

  ~ForkedAdders() {  // a failed REQUIRE must not leave children waiting
    go.clear();
    for (pid_t pid : kids) waitpid(pid, nullptr, 0);
  }
};

// 4 threads x 100 add() through one store object.
void check_threads_add(Store& s) {
  {
    std::vector<std::jthread> threads;
    for (int t = 0; t < 4; ++t)
      threads.emplace_back([&] {
        for (int i = 0; i < 100; ++i) s.add("threads", 1);
      });
  }
  CHECK(s.add("threads", 0) == 400);
}

// A raw connection to the server, for sending malformed frames.
braid::Fd raw_connect(int port) {
  return braid::net::connect_retry(braid::net::resolve(kHost, port), braid::Deadline::after(2s),
                                   "test store server");
}

void send_raw(int fd, const Bytes& b) {
  braid::net::write_all(fd, b.data(), b.size(), braid::Deadline::after(2s), "test store server");
}

// True if the server closes the connection within 2 s.
bool closed_by_server(int fd) {
  auto deadline = braid::Deadline::after(2s);
  char buf[256];
  while (!deadline.expired()) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, deadline.poll_ms()) <= 0) continue;
    ssize_t n = ::recv(fd, buf, sizeof buf, MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno == ECONNRESET)) return true;
  }
  return false;
}

Bytes header(std::uint32_t magic, std::uint16_t code, std::uint32_t nfields, std::uint32_t body) {
  Bytes b;
  wire::put_le(b, magic, 4);
  wire::put_le(b, wire::kVersion, 2);
  wire::put_le(b, code, 2);
  wire::put_le(b, nfields, 4);
  wire::put_le(b, body, 4);
  return b;
}

Bytes request(wire::Op op, const std::vector<std::string>& fields) {
  std::vector<wire::Field> f;
  for (const auto& s : fields) f.push_back(wire::field(s));
  Bytes out;
  wire::encode(out, static_cast<std::uint16_t>(op), f);
  return out;
}

}  // namespace

TEST_CASE("TcpStore semantics", "[store][tcp]") {
  TcpFixture fx;
  auto s = fx.client();
  check_semantics(*s);
}

TEST_CASE("FileStore semantics", "[store][file]") {
  TempPath tmp("sem");
  FileStore s(tmp.path, 5s);
  check_semantics(s);
}

TEST_CASE("PrefixStore semantics over TcpStore and FileStore", "[store][prefix]") {
  SECTION("tcp") {
    TcpFixture fx;
    PrefixStore s("job", fx.client());
    check_semantics(s);
  }
  SECTION("file") {
    TempPath tmp("prefix");
    PrefixStore s("job", std::make_shared<FileStore>(tmp.path, 5s));
    check_semantics(s);
  }
}

TEST_CASE("A parked GET/WAIT is answered when another client sets the key", "[store]") {
  SECTION("tcp") {
    TcpFixture fx;
    auto a = fx.client(), b = fx.client();
    check_parked_get(*a, *b);
  }
  SECTION("file") {
    TempPath tmp("parked");
    FileStore a(tmp.path, 5s), b(tmp.path, 5s);
    check_parked_get(a, b);
  }
  SECTION("prefix over tcp") {
    TcpFixture fx;
    PrefixStore a("p", fx.client()), b("p", fx.client());
    check_parked_get(a, b);
  }
}

TEST_CASE("TcpStore carries large values and refuses oversized ones", "[store][tcp]") {
  TcpFixture fx;
  auto a = fx.client(), b = fx.client();
  Bytes big(8 << 20);
  for (std::size_t i = 0; i < big.size(); ++i) big[i] = static_cast<std::uint8_t>(i * 131 + 7);
  a->set("big", big);
  CHECK(b->get("big") == big);
  CHECK(to_string(b->compare_set("big", big, to_bytes("small"))) == "small");
  auto e = error_of([&] { a->set("huge", Bytes(kMaxValueLen + 1)); });
  CHECK(e.code() == ErrorCode::InvalidArgument);
  CHECK_FALSE(a->check({"huge"}));
}

TEST_CASE("The store's bounds: keys, bytes and connections", "[store][tcp]") {
  // Small bounds, read when the server starts.
  ::setenv("BRAID_STORE_MAX_KEYS", "5", 1);
  ::setenv("BRAID_STORE_MAX_BYTES", "4096", 1);
  ::setenv("BRAID_STORE_MAX_CONNECTIONS", "3", 1);
  TcpFixture fx;
  ::unsetenv("BRAID_STORE_MAX_KEYS");
  ::unsetenv("BRAID_STORE_MAX_BYTES");
  ::unsetenv("BRAID_STORE_MAX_CONNECTIONS");
  auto a = fx.client();
  for (int i = 0; i < 5; ++i) a->set("k" + std::to_string(i), to_bytes("v"));
  auto e = error_of([&] { a->set("k5", to_bytes("v")); });
  CHECK(e.code() == ErrorCode::Store);
  CHECK_THAT(e.what(), Catch::Contains("BRAID_STORE_MAX_KEYS"));
  CHECK(error_of([&] { a->add("counter", 1); }).code() == ErrorCode::Store);
  a->set("k4", to_bytes("replaced"));  // a key it holds can still change
  CHECK(to_string(a->get("k4")) == "replaced");
  CHECK(a->delete_key("k4"));  // and deleting makes room
  a->set("k5", to_bytes("v"));
  // Bytes: a value that would pass the total, then one that fits.
  e = error_of([&] { a->set("k0", Bytes(4090)); });  // 5 keys of 2 + 4 values of 1 already
  CHECK(e.code() == ErrorCode::Store);
  CHECK_THAT(e.what(), Catch::Contains("BRAID_STORE_MAX_BYTES"));
  a->set("k0", Bytes(3000));
  CHECK(a->get("k0").size() == 3000);
  // Connections: a holds one; two more fit, the fourth is refused at once.
  auto b = fx.client(), c = fx.client();
  b->set("k1", to_bytes("b"));
  c->set("k2", to_bytes("c"));
  e = error_of([&] { fx.client(2s)->get("k1"); });
  CHECK(e.code() == ErrorCode::Store);
  CHECK_THAT(e.what(), Catch::Contains("BRAID_STORE_MAX_CONNECTIONS"));
  // The store goes on serving the others.
  CHECK(to_string(b->get("k2")) == "c");
  CHECK(a->num_keys() == 5);
}

TEST_CASE("TcpStore stays in step after a timed-out GET or WAIT", "[store][tcp]") {
  TcpFixture fx;
  auto a = fx.client(), b = fx.client();
  CHECK(error_of([&] { a->get("x", 150ms); }).code() == ErrorCode::Timeout);
  CHECK(error_of([&] { a->wait({"x", "y"}, 150ms); }).code() == ErrorCode::Timeout);
  b->set("x", to_bytes("vx"));
  b->set("y", to_bytes("vy"));
  // A late reply to the abandoned GET must not be taken for these answers.
  CHECK(to_string(a->get("y")) == "vy");
  CHECK(to_string(a->get("x")) == "vx");
  CHECK(a->num_keys() == 2);
}

TEST_CASE("TcpStore client waits for a server that starts later", "[store][tcp]") {
  int port = 0;
  {
    TcpStoreServer probe(kHost, 0);
    port = probe.port();
  }
  std::unique_ptr<TcpStoreServer> server;
  std::jthread starter([&] {
    std::this_thread::sleep_for(150ms);
    server = TcpStoreServer::try_create(kHost, port);
  });
  TcpStore c(kHost, port, 5s);
  starter.join();
  REQUIRE(server != nullptr);
  c.set("k", to_bytes("v"));
  CHECK(to_string(c.get("k")) == "v");
}

TEST_CASE("TcpStoreServer::try_create returns nullptr on a taken port", "[store][tcp]") {
  TcpStoreServer s(kHost, 0);
  CHECK(s.port() > 0);
  CHECK(TcpStoreServer::try_create(kHost, s.port()) == nullptr);
  CHECK(error_of([&] { TcpStoreServer again(kHost, s.port()); }).code() == ErrorCode::Transport);
}

TEST_CASE("Concurrent add() from 8 processes", "[store][fork]") {
  SECTION("tcp") {
    ForkedAdders adders([](int port) { return std::make_unique<TcpStore>(kHost, port, 10s); });
    TcpFixture fx;
    adders.run(fx.server.port(), *fx.client());
  }
  SECTION("file") {
    TempPath tmp("procs");
    const std::string path = tmp.path;
    ForkedAdders adders([path](int) { return std::make_unique<FileStore>(path, 10s); });
    FileStore parent(path, 10s);
    adders.run(0, parent);
    CHECK(file_exists(path));  // the parent still uses it
  }
}

TEST_CASE("Concurrent add() from threads through one store", "[store]") {
  SECTION("tcp") {
    TcpFixture fx;
    check_threads_add(*fx.client());
  }
  SECTION("file") {
    TempPath tmp("threads");
    FileStore s(tmp.path, 5s);
    check_threads_add(s);
  }
}

TEST_CASE("Malformed requests close only their connection", "[store][tcp]") {
  TcpFixture fx;
  const int port = fx.server.port();
  auto good = fx.client();
  good->set("before", to_bytes("1"));

  SECTION("garbage") {
    auto fd = raw_connect(port);
    send_raw(fd.get(), Bytes(64, 0xAB));
    CHECK(closed_by_server(fd.get()));
  }
  SECTION("huge body length") {
    auto fd = raw_connect(port);
    send_raw(fd.get(), header(wire::kMagic, 1, 2, 0xFFFFFFFFu));
    CHECK(closed_by_server(fd.get()));
  }
  SECTION("huge field count") {
    auto fd = raw_connect(port);
    send_raw(fd.get(), header(wire::kMagic, 1, 1u << 30, 64));
    CHECK(closed_by_server(fd.get()));
  }
  SECTION("unknown op") {
    auto fd = raw_connect(port);
    send_raw(fd.get(), header(wire::kMagic, 99, 0, 0));
    CHECK(closed_by_server(fd.get()));
  }
  SECTION("fields overrun the body") {
    auto fd = raw_connect(port);
    Bytes b = header(wire::kMagic, static_cast<std::uint16_t>(wire::Op::Get), 1, 8);
    wire::put_le(b, 100, 4);  // a 100-byte field in an 8-byte body
    wire::put_le(b, 0, 4);
    send_raw(fd.get(), b);
    CHECK(closed_by_server(fd.get()));
  }
  SECTION("wrong field count for the op") {
    auto fd = raw_connect(port);
    send_raw(fd.get(), request(wire::Op::Set, {"only-a-key"}));
    CHECK(closed_by_server(fd.get()));
  }
  SECTION("oversized key") {
    auto fd = raw_connect(port);
    send_raw(fd.get(), request(wire::Op::Get, {std::string(kMaxKeyLen + 1, 'k')}));
    CHECK(closed_by_server(fd.get()));
  }
  SECTION("truncated frame, then close") {
    auto fd = raw_connect(port);
    Bytes b = request(wire::Op::Set, {"trunc", std::string(1000, 'v')});
    b.resize(b.size() / 2);
    send_raw(fd.get(), b);
  }
  SECTION("a half-sent frame held open does not block others") {
    auto fd = raw_connect(port);
    send_raw(fd.get(), Bytes{0x42, 0x52});  // half a magic
    CHECK(to_string(good->get("before", 1s)) == "1");
  }
  SECTION("a parked GET whose client leaves") {
    {
      auto fd = raw_connect(port);
      send_raw(fd.get(), request(wire::Op::Get, {"orphan"}));
      std::this_thread::sleep_for(50ms);  // let the server park it
    }
    std::this_thread::sleep_for(50ms);
    good->set("orphan", to_bytes("nobody listens"));
  }
  SECTION("pipelined requests wait behind a parked GET, in order") {
    auto fd = raw_connect(port);
    Bytes both = request(wire::Op::Get, {"pipe"});
    Bytes second = request(wire::Op::TryGet, {"before"});
    both.insert(both.end(), second.begin(), second.end());
    send_raw(fd.get(), both);
    pollfd p{fd.get(), POLLIN, 0};
    CHECK(::poll(&p, 1, 100) == 0);  // nothing until "pipe" exists
    good->set("pipe", to_bytes("piped"));
    for (const char* want : {"piped", "1"}) {
      std::uint8_t h[wire::kHeaderSize];
      braid::net::read_all(fd.get(), h, sizeof h, braid::Deadline::after(2s), "server");
      auto decoded = wire::decode_header(h);
      REQUIRE(decoded.has_value());
      CHECK(decoded->code == static_cast<std::uint16_t>(wire::Status::Ok));
      REQUIRE(decoded->nfields == 1);
      Bytes body(decoded->body_len);
      braid::net::read_all(fd.get(), body.data(), body.size(), braid::Deadline::after(2s), "server");
      CHECK(std::string(body.begin() + 4, body.end()) == want);
    }
  }
  SECTION("a well-formed raw request is answered") {
    auto fd = raw_connect(port);
    send_raw(fd.get(), request(wire::Op::TryGet, {"before"}));
    std::uint8_t h[wire::kHeaderSize];
    braid::net::read_all(fd.get(), h, sizeof h, braid::Deadline::after(2s), "server");
    auto decoded = wire::decode_header(h);
    REQUIRE(decoded.has_value());
    CHECK(decoded->code == static_cast<std::uint16_t>(wire::Status::Ok));
    CHECK(decoded->nfields == 1);
  }
  // The server survived and serves old and new clients.
  CHECK(to_string(good->get("before", 1s)) == "1");
  auto fresh = fx.client(1s);
  fresh->set("after", to_bytes("2"));
  CHECK(to_string(good->get("after", 1s)) == "2");
}

TEST_CASE("A port served by something that is not a Braid store fails within seconds, saying so", "[store][tcp]") {
  // A listener in this process: it accepts, reads what it is sent, then
  // either answers like a web server or says nothing at all.
  braid::Fd lsock = braid::net::listen_on(braid::net::resolve(kHost, 0));
  const int port = braid::net::local_address(lsock.get()).port();
  std::atomic<bool> answer{true};
  std::jthread fake([&](std::stop_token stop) {
    std::vector<braid::Fd> held;
    while (!stop.stop_requested()) {
      pollfd p{lsock.get(), POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      braid::Fd c(::accept(lsock.get(), nullptr, nullptr));
      char buf[256];
      (void)::recv(c.get(), buf, sizeof buf, 0);
      if (answer) {
        const char reply[] = "HTTP/1.0 400 Bad Request\r\n\r\n";
        (void)::send(c.get(), reply, sizeof reply - 1, MSG_NOSIGNAL);
      } else {
        held.push_back(std::move(c));  // silent, connection open
      }
    }
  });
  SECTION("one that answers something else") {
    auto t0 = std::chrono::steady_clock::now();
    auto e = error_of([&] { TcpStore c(kHost, port, 30s); });
    CHECK(e.code() == ErrorCode::Store);
    CHECK(contains(e, "is not a Braid store"));
    CHECK(contains(e, "HTTP/1.0"));
    CHECK(contains(e, "MASTER_PORT"));
    CHECK(ms_since(t0) < 2000);
  }
  SECTION("one that never answers: at most the probe's limit, not the whole timeout") {
    answer = false;
    auto e = error_of([&] { TcpStore c(kHost, port, 1500ms); });
    CHECK(e.code() == ErrorCode::Store);
    CHECK(contains(e, "did not answer a request within"));
    CHECK(contains(e, "stopped or stuck"));  // as a store whose host got SIGSTOP looks
  }
}

// The runtime's store calls in the middle of a collective run under a
// CallCap: a store that does not answer (its host stopped) must not hold them
// for the store's whole timeout, nor may another thread's call that waits on
// it, holding the connection.
TEST_CASE("A call cap bounds a TcpStore call, waiting for the connection included", "[store][tcp]") {
  TcpStoreServer server(kHost, 0);
  TcpStore c(kHost, server.port(), 60s);
  c.set("k", to_bytes("v"));
  {
    braid::store::CallCap cap(braid::Deadline::after(300ms));
    auto t0 = std::chrono::steady_clock::now();
    auto e = error_of([&] { (void)c.get("never", 60s); });  // parked: no answer comes
    CHECK(e.code() == ErrorCode::Timeout);
    CHECK(ms_since(t0) < 3000);
  }
  // Another thread parks a GET (holding the connection) for up to 60 s.
  std::atomic<bool> parked_done{false};
  std::jthread parked([&] {
    try {
      (void)c.get("later", 60s);
    } catch (const braid::Error&) {
    }
    parked_done = true;
  });
  // Until that thread holds the connection a capped call succeeds; from
  // then on it must fail within about its cap, not the parked call's 60 s.
  bool timed_out = false;
  double took_ms = 0;
  for (auto until = std::chrono::steady_clock::now() + 10s; !timed_out && std::chrono::steady_clock::now() < until;) {
    braid::store::CallCap cap(braid::Deadline::after(300ms));
    auto t0 = std::chrono::steady_clock::now();
    try {
      (void)c.try_get("k");
    } catch (const braid::Error& e) {
      REQUIRE(e.code() == ErrorCode::Timeout);
      CHECK(std::string(e.what()).find("another call of this process") != std::string::npos);
      timed_out = true;
      took_ms = ms_since(t0);
    }
  }
  CHECK(timed_out);
  CHECK(took_ms < 3000);
  // The parked call is answered once its key exists; uncapped calls work.
  TcpStore other(kHost, server.port(), 10s);
  other.set("later", to_bytes("x"));
  parked.join();
  CHECK(parked_done);
  CHECK(to_string(c.get("k")) == "v");
}

TEST_CASE("A client whose server died gets ErrorCode::Store", "[store][tcp]") {
  auto server = std::make_unique<TcpStoreServer>(kHost, 0);
  const int port = server->port();
  const std::string where = fmt::format("{}:{}", kHost, port);
  TcpStore c(kHost, port, 1s);
  c.set("k", to_bytes("v"));

  SECTION("on the open connection, then on reconnecting") {
    server.reset();
    auto t0 = std::chrono::steady_clock::now();
    auto e = error_of([&] { c.set("k2", to_bytes("v")); });
    CHECK(e.code() == ErrorCode::Store);
    CHECK(contains(e, "unreachable"));
    CHECK(contains(e, where));
    CHECK(ms_since(t0) < 1500);

    t0 = std::chrono::steady_clock::now();
    auto again = error_of([&] { c.try_get("k"); });
    CHECK(again.code() == ErrorCode::Store);
    CHECK(contains(again, where));
    CHECK(ms_since(t0) < 1500);
  }
  SECTION("a client with a long timeout gives up on reconnecting within seconds, then at once") {
    // The store served it: one that refuses connections now is gone, not
    // starting (a rank's teardown waited minutes for its host's store).
    TcpStore patient(kHost, port, 60s);
    patient.set("k3", to_bytes("v"));
    server.reset();
    auto t0 = std::chrono::steady_clock::now();
    auto e = error_of([&] { (void)patient.delete_key("k3"); });
    CHECK(e.code() == ErrorCode::Store);
    CHECK(contains(e, where));
    CHECK(ms_since(t0) < 10000);
    // The first call failed on its open connection; this one reconnects,
    // and a refusal ends that at once (nothing listens on the port now),
    // where a lost SYN would be retried for a few seconds.
    t0 = std::chrono::steady_clock::now();
    auto again = error_of([&] { (void)patient.add("n", 1); });
    CHECK(again.code() == ErrorCode::Store);
    CHECK(contains(again, "unreachable"));
    CHECK(contains(again, "nothing listens there now"));
    CHECK(ms_since(t0) < 10000);
    t0 = std::chrono::steady_clock::now();
    auto last = error_of([&] { (void)patient.try_get("k"); });
    CHECK(last.code() == ErrorCode::Store);
    CHECK(contains(last, "it is gone"));
    CHECK(ms_since(t0) < 500);
  }
  SECTION("while parked in a GET") {
    std::atomic<double> stop_ms{-1};  // Catch's CHECK is for the test's own thread only
    std::jthread killer([&] {
      std::this_thread::sleep_for(100ms);
      auto t0 = std::chrono::steady_clock::now();
      server.reset();
      stop_ms = ms_since(t0);
    });
    auto t0 = std::chrono::steady_clock::now();
    auto e = error_of([&] { c.get("never", 5s); });
    CHECK(e.code() == ErrorCode::Store);
    CHECK(ms_since(t0) < 2000);  // noticed at once, not at the 5 s timeout
    killer.join();
    CHECK(stop_ms < 1000);  // the destructor stops its thread promptly
  }
  SECTION("at construction") {
    server.reset();
    auto e = error_of([&] { TcpStore late(kHost, port, 200ms); });
    CHECK(e.code() == ErrorCode::Store);
    CHECK(contains(e, where));
  }
}

TEST_CASE("PrefixStores with different prefixes do not see each other", "[store][prefix]") {
  TcpFixture fx;
  auto base = fx.client();
  PrefixStore a("a", base), b("b", base);
  a.set("k", to_bytes("A"));
  b.set("k", to_bytes("B"));
  CHECK(to_string(a.get("k")) == "A");
  CHECK(to_string(b.get("k")) == "B");
  CHECK(to_string(base->get("a/k")) == "A");
  a.set("only_a", {});
  CHECK_FALSE(b.try_get("only_a").has_value());
  CHECK_FALSE(b.check({"only_a"}));
  CHECK_FALSE(b.delete_key("only_a"));
  CHECK(a.check({"only_a"}));
  CHECK(b.add("n", 1) == 1);
  CHECK(a.add("n", 10) == 10);
  auto e = error_of([&] { b.get("only_a", 100ms); });
  CHECK(e.code() == ErrorCode::Timeout);
  CHECK(contains(e, "only_a"));

  PrefixStore nested("outer", std::make_shared<PrefixStore>("a", base));
  nested.set("x", to_bytes("n"));
  CHECK(to_string(base->get("a/outer/x")) == "n");

  CHECK(error_of([&] { PrefixStore bad("", base); }).code() == ErrorCode::InvalidArgument);
  CHECK(error_of([&] { PrefixStore bad("p", nullptr); }).code() == ErrorCode::InvalidArgument);
}

TEST_CASE("FileStore removes its file when the last user closes", "[store][file]") {
  TempPath tmp("refcount");
  auto a = std::make_unique<FileStore>(tmp.path, 2s);
  auto b = std::make_unique<FileStore>(tmp.path, 2s);
  a->set("k", to_bytes("v"));
  CHECK(file_exists(tmp.path));
  a.reset();
  CHECK(file_exists(tmp.path));
  CHECK(to_string(b->get("k")) == "v");
  CHECK(b->num_keys() == 1);  // the user count is not a key
  b.reset();
  CHECK_FALSE(file_exists(tmp.path));

  FileStore fresh(tmp.path, 2s);  // starts afresh
  CHECK_FALSE(fresh.try_get("k").has_value());
  CHECK(fresh.num_keys() == 0);
}

TEST_CASE("FileStores in two processes see each other's writes", "[store][file][fork]") {
  TempPath tmp("twoproc");
  FileStore parent(tmp.path, 5s);
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    int rc = 0;
    try {
      FileStore s(tmp.path, 5s);
      s.set("from_child", to_bytes("c"));
      if (to_string(s.get("from_parent", 5s)) != "p") rc = 2;
    } catch (...) {
      rc = 1;
    }
    _exit(rc);
  }
  parent.set("from_parent", to_bytes("p"));
  CHECK(to_string(parent.get("from_child", 5s)) == "c");
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  CHECK(file_exists(tmp.path));  // the child's close left the parent's file
}

TEST_CASE("FileStore reports a corrupt or truncated file", "[store][file]") {
  TempPath tmp("corrupt");
  SECTION("foreign file") {
    std::ofstream(tmp.path) << "this is not a store file";
    auto e = error_of([&] { FileStore s(tmp.path, 200ms); });
    CHECK(e.code() == ErrorCode::Store);
    CHECK(contains(e, "corrupt"));
    CHECK(contains(e, tmp.path));
  }
  SECTION("truncated record") {
    FileStore s(tmp.path, 200ms);
    s.set("key", to_bytes("some value"));
    struct stat st {};
    REQUIRE(::stat(tmp.path.c_str(), &st) == 0);
    REQUIRE(::truncate(tmp.path.c_str(), st.st_size - 3) == 0);
    auto e = error_of([&] { s.try_get("key"); });
    CHECK(e.code() == ErrorCode::Store);
    CHECK(contains(e, "corrupt"));
  }
}

TEST_CASE("Store constructors reject bad arguments", "[store]") {
  CHECK(error_of([] { FileStore s("", 1s); }).code() == ErrorCode::InvalidArgument);
  CHECK(error_of([] { FileStore s(temp_path("neg"), -1ms); }).code() == ErrorCode::InvalidArgument);
  CHECK(error_of([] { TcpStore s(kHost, 70000, 1s); }).code() == ErrorCode::InvalidArgument);
  CHECK(error_of([] { TcpStoreServer s(kHost, -1); }).code() == ErrorCode::InvalidArgument);
}

namespace {
// Sets (or, with nullptr, unsets) BRAID_JOB_TOKEN for this scope: servers
// and clients read it when they are made.
struct Token {
  explicit Token(const char* v) { v ? ::setenv("BRAID_JOB_TOKEN", v, 1) : ::unsetenv("BRAID_JOB_TOKEN"); }
  ~Token() { ::unsetenv("BRAID_JOB_TOKEN"); }
};
}  // namespace

TEST_CASE("A store with the job's secret serves only clients that prove it, and the other way round", "[store][tcp][auth]") {
  if (!braid::auth::available()) {
    WARN("built without libcrypto: a secret is refused outright (checked below)");
    Token t("s");
    CHECK(error_of([] { TcpStoreServer s(kHost, 0); }).code() == ErrorCode::NotSupported);
    return;
  }
  std::unique_ptr<TcpStoreServer> server;
  {
    Token t("the-secret");
    server = std::make_unique<TcpStoreServer>(kHost, 0);
  }
  const int port = server->port();
  std::shared_ptr<TcpStore> member;
  {
    Token t("the-secret");
    member = std::make_shared<TcpStore>(kHost, port, 5s);
    member->set("k", to_bytes("v"));
  }
  for (const char* other : {"another-secret", "", static_cast<const char*>(nullptr)}) {
    Token t(other);
    auto t0 = std::chrono::steady_clock::now();
    auto e = error_of([&] { TcpStore c(kHost, port, 30s); });
    INFO("token " << (other ? other : "(unset)") << ": " << e.what());
    CHECK(e.code() == ErrorCode::Store);
    CHECK(contains(e, "authentication failed"));
    CHECK(contains(e, "BRAID_JOB_TOKEN"));
    CHECK(ms_since(t0) < 5000);  // refused at once, not at the 30 s timeout
  }
  // A stranger's raw requests get nothing: an error naming the token, then EOF.
  {
    braid::Fd fd = braid::net::connect_retry(braid::net::resolve(kHost, port),
                                             braid::Deadline::after(Millis(2000)), "store");
    braid::store::Bytes frame;
    const std::string key = "k";
    braid::store::wire::encode(frame, static_cast<std::uint16_t>(braid::store::wire::Op::Get),
                               {braid::store::wire::field(key)});
    braid::net::write_all(fd.get(), frame.data(), frame.size(), braid::Deadline::after(Millis(2000)), "store");
    std::string got;
    char buf[512];
    for (ssize_t n; (n = ::recv(fd.get(), buf, sizeof buf, 0)) > 0;) got.append(buf, static_cast<std::size_t>(n));
    CHECK(got.find("BRAID_JOB_TOKEN") != std::string::npos);
    // One reply, an Error (not the value), and then the connection closed.
    REQUIRE(got.size() >= braid::store::wire::kHeaderSize);
    const auto h = braid::store::wire::decode_header(reinterpret_cast<const std::uint8_t*>(got.data()));
    REQUIRE(h);
    CHECK(h->code == static_cast<std::uint16_t>(braid::store::wire::Status::Error));
    CHECK(got.size() == braid::store::wire::kHeaderSize + h->body_len);
  }
  // The member's connection was never disturbed.
  CHECK(to_string(member->get("k", 1s)) == "v");
  // And a client with the secret does not join a store that lacks it.
  TcpStoreServer open_store(kHost, 0);
  Token t("the-secret");
  auto e = error_of([&] { TcpStore c(kHost, open_store.port(), 5s); });
  CHECK(e.code() == ErrorCode::Store);
  CHECK(contains(e, "authentication failed"));
  CHECK(contains(e, "without a secret"));
}

TEST_CASE("A request that arrives with the client's end of stream is still served", "[store][tcp]") {
  TcpFixture f;
  {
    braid::Fd fd = braid::net::connect_retry(braid::net::resolve(kHost, f.server.port()),
                                             braid::Deadline::after(Millis(2000)), "store");
    braid::store::Bytes frame;
    const std::string key = "fire-and-forget", value = "set";
    braid::store::wire::encode(frame, static_cast<std::uint16_t>(braid::store::wire::Op::Set),
                               {braid::store::wire::field(key), braid::store::wire::field(value)});
    braid::net::write_all(fd.get(), frame.data(), frame.size(), braid::Deadline::after(Millis(2000)), "store");
  }  // closed at once, without reading the reply
  CHECK(to_string(f.client()->get("fire-and-forget", 5s)) == "set");
}

TEST_CASE("A FileStore's file is readable by its user only", "[store][file]") {
  TempPath p("mode");
  braid::store::FileStore s(p.path, 1s);
  s.set("k", to_bytes("v"));
  struct stat st {};
  REQUIRE(::stat(p.path.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
}

TEST_CASE("A serving tcp_store released first stays up while another member still uses it", "[store][tcp]") {
  int port = -1;
  {  // a free port: bound, read back, released
    braid::Fd l = braid::net::listen_on(braid::net::resolve(kHost, 0));
    port = braid::net::local_address(l.get()).port();
  }
  auto host = braid::store::tcp_store(kHost, port, true, 5s);
  auto member = braid::store::tcp_store(kHost, port, false, 5s);
  std::atomic<bool> released{false};
  std::thread t([&] {
    host.reset();  // its server lingers while `member` is connected (at most 5 s here)
    released = true;
  });
  member->set("k", to_bytes("v"));
  CHECK(to_string(member->get("k", 1s)) == "v");
  CHECK_FALSE(released.load());
  member.reset();  // the last client goes: the host's release returns
  t.join();
  CHECK(released.load());
}
