#include "transports/dial.hpp"

#include <cerrno>
#include <cstdlib>

#include <fmt/core.h>

#include "src/common/errors.hpp"
#include "src/common/socket.hpp"

namespace braid {

Dialing dial_listener(const PeerInfo& peer, const char* listener, Deadline deadline) {
  Dialing d;
  // "host:port" or "[v6]:port"
  const auto colon = peer.address.rfind(':');
  if (colon == std::string::npos || colon == 0) {
    d.failed = ConnectResult::unavailable(fmt::format("malformed {} address '{}'", listener, peer.address));
    return d;
  }
  const net::SockAddr sa = net::resolve(peer.address.substr(0, colon), std::atoi(peer.address.c_str() + colon + 1));
  d.fd = net::connect_once(sa, deadline);
  if (d.fd.valid()) return d;
  const int err = errno;
  if (err == ECONNREFUSED || err == ECONNRESET) {
    d.failed = ConnectResult::refused(fmt::format(
        "its {} at {} refused the connection (the process exited or was killed)", listener, peer.address));
    return d;
  }
  throw Error(ErrorCode::Timeout,
              fmt::format("could not connect to rank {} at {}: {}", peer.rank, peer.address, errno_text(err)),
              peer.rank);
}

}  // namespace braid
