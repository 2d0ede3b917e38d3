// The store's protocol, client side: the replies a TcpStore reads (from a
// store, or from something posing as one), from a socket that answers every
// request with the input's bytes. Slow (a short timeout per incomplete
// reply), so a target of its own. The first byte: bit 1 says whether the
// job has a secret (the reply to Hello is then what is parsed first).
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <thread>

#include "src/common/socket.hpp"
#include "src/store/store.hpp"
#include "tests/fuzz/fuzz.hpp"

namespace {

namespace st = braid::store;

// A listener that answers each connection with the input's bytes, then closes.
void client(const std::uint8_t* d, std::size_t n) {
  braid::Fd listener = braid::net::listen_on(braid::net::resolve("127.0.0.1", 0));
  const int port = braid::net::local_address(listener.get()).port();
  std::thread answer([&] {
    for (int k = 0; k < 2; ++k) {  // the client may reconnect once
      pollfd p{listener.get(), POLLIN, 0};
      if (::poll(&p, 1, 20) <= 0) return;
      braid::Fd c(::accept(listener.get(), nullptr, nullptr));
      char buf[4096];
      (void)::recv(c.get(), buf, sizeof buf, MSG_DONTWAIT);
      (void)::send(c.get(), d, n, MSG_NOSIGNAL);
    }
  });
  fuzz::only_braid_errors("TcpStore", [&] {
    st::TcpStore s("127.0.0.1", port, st::Millis(20));
    (void)s.try_get("a");
    (void)s.add("n", 1);
  });
  answer.join();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* d, std::size_t n) {
  if (n == 0 || n > (1 << 16)) return 0;
  fuzz::job_secret(d[0] & 2);
  client(d + 1, n - 1);
  return 0;
}
