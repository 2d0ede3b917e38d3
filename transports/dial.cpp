#include "transports/dial.hpp"

#include <cerrno>
#include <cstdlib>

#include <fmt/core.h>

#include "src/common/errors.hpp"

namespace braid {

std::optional<net::SockAddr> listener_address(const std::string& address) {
  const auto colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0) return std::nullopt;
  return net::resolve(address.substr(0, colon), std::atoi(address.c_str() + colon + 1));
}

Dialing dial_listener(const PeerInfo& peer, const char* listener, Deadline deadline) {
  Dialing d;
  const auto sa = listener_address(peer.address);
  if (!sa) {
    d.failed = ConnectResult::unavailable(fmt::format("malformed {} address '{}'", listener, peer.address));
    return d;
  }
  d.fd = net::connect_once(*sa, deadline);
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
