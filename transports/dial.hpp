// Dialing a peer's listener ("host:port" from its record), as the transports
// with a socket in their connect face (TCP, and verbs' handshake) do: one
// place that turns the outcomes into the connect face's answers.
#pragma once

#include <optional>

#include "src/common/fd.hpp"
#include "src/common/socket.hpp"
#include "transports/transport.hpp"

namespace braid {

// A listener's "host:port" (or "[v6]:port"), resolved; null if malformed.
std::optional<net::SockAddr> listener_address(const std::string& address);

struct Dialing {
  Fd fd;                                // the connected socket, when there is one
  std::optional<ConnectResult> failed;  // else: unavailable (malformed address) or refused
};

// Connects to peer.address by the deadline. A refusal means the peer's
// process is gone (ConnectResult::refused, naming `listener`); no answer by
// the deadline throws braid::Error(Timeout) naming the peer.
Dialing dial_listener(const PeerInfo& peer, const char* listener, Deadline deadline);

}  // namespace braid
