#include "transports/dial.hpp"

#include <cerrno>
#include <cstdlib>

#include <fmt/core.h>

#include "src/common/errors.hpp"

namespace braid {

std::optional<net::SockAddr> listener_address(const std::string& address) {
  // A peer's record, from the store: the port must be all digits, 1..65535.
  const auto colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == address.size() || address.size() - colon > 6)
    return std::nullopt;
  int port = 0;
  for (std::size_t i = colon + 1; i < address.size(); ++i) {
    if (address[i] < '0' || address[i] > '9') return std::nullopt;
    port = port * 10 + (address[i] - '0');
  }
  if (port < 1 || port > 65535) return std::nullopt;
  try {
    return net::resolve(address.substr(0, colon), port);
  } catch (const Error&) {
    return std::nullopt;  // a host that does not resolve: as malformed
  }
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
