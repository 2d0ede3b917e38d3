// TCP frames and HELLO: bytes on a connection to a rank's TCP listener (a
// stranger, or a peer gone wrong), or bytes coming back on a connection the
// rank dialed (a listener that answers with AUTH, CTS, BYE, ...). A fresh
// transport per input, against a fake host (tests/transports/fake_host.hpp),
// with its progress loop turned by hand. The first byte: bit 0 picks the
// direction, bit 1 whether the job has a secret (the challenge-response).
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <memory>

#include "src/common/socket.hpp"
#include "tests/fuzz/fuzz.hpp"
#include "tests/transports/fake_host.hpp"
#include "transports/tcp/tcp_transport.hpp"

namespace {

constexpr std::size_t kMaxInput = 64 * 1024;  // fits a socket's buffer: one write, no blocking

void turn(braid::FakeHost& h, int rounds) {
  for (int i = 0; i < rounds; ++i) h.progress();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* d, std::size_t n) {
  if (n == 0 || n > kMaxInput) return 0;
  const bool dialed = d[0] & 1;
  fuzz::job_secret(d[0] & 2);
  ++d, --n;
  braid::FakeHost host(0);
  braid::TransportConfig cfg;
  cfg.rank = 0;
  cfg.world_size = 3;
  cfg.job_id = 0x1234;
  cfg.store_host = "127.0.0.1";
  fuzz::only_braid_errors("TcpTransport", [&] {
    host.t = std::make_unique<braid::TcpTransport>(host, cfg);
    braid::Fd other;
    if (dialed) {
      // A listener that plays rank 1: the transport dials it, and what it
      // reads back is the input.
      braid::Fd listener = braid::net::listen_on(braid::net::resolve("127.0.0.1", 0));
      braid::PeerInfo peer;
      peer.rank = 1;
      peer.address = braid::net::local_address(listener.get()).str();
      auto res = host.t->connect(peer, braid::Deadline::after(braid::Millis(2000)));
      if (res.status != braid::ConnectResult::Status::Connected) std::abort();
      host.t->adopt(1, std::move(res.dialed));
      other = braid::Fd(::accept(listener.get(), nullptr, nullptr));
    } else {
      const auto addr = host.t->address();
      const auto colon = addr.rfind(':');
      other = braid::net::connect_retry(braid::net::resolve(addr.substr(0, colon), std::stoi(addr.substr(colon + 1))),
                                        braid::Deadline::after(braid::Millis(2000)), "the transport");
    }
    if (n) (void)::send(other.get(), d, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    turn(host, 4);
    other.reset();  // and then the other end goes away
    turn(host, 2);
    host.t->shutdown();
  });
  host.t.reset();
  return 0;
}
