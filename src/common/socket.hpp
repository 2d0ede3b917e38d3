// Small, blocking-with-deadline socket helpers used by the bootstrap store and
// by connection set-up. The data path of the TCP transport is non-blocking and
// lives in transports/tcp.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <cstddef>
#include <string>

#include "src/common/fd.hpp"
#include "src/common/time.hpp"

namespace braid::net {

struct SockAddr {
  sockaddr_storage ss{};
  socklen_t len = 0;
  std::string str() const;  // "host:port" / "[v6]:port"
  int port() const;
};

// Resolves HOST (name, IPv4 or IPv6 literal; "" or "*" = any) and PORT.
SockAddr resolve(const std::string& host, int port);
// Address bound to `fd` (getsockname).
SockAddr local_address(int fd);

void set_nonblocking(int fd);
void set_nodelay(int fd);

// Listens on addr with SO_REUSEADDR; throws braid::Error on failure.
Fd listen_on(const SockAddr& addr, int backlog = 512);
// As listen_on, but returns an invalid Fd if the port is taken (EADDRINUSE).
Fd try_listen_on(const SockAddr& addr, int backlog = 512);

// Connects, retrying refused/unreachable attempts with back-off until the
// deadline (the listener may not be up yet). `what` names the target in errors.
// With `refused_is_final` a refusal ends it at once (ErrorCode::Transport):
// for a listener that was up before, a refusal means it is gone, while a
// lost SYN (a full backlog) is still waited out.
Fd connect_retry(const SockAddr& addr, Deadline deadline, const std::string& what, bool refused_is_final = false);
// One attempt, bounded by the deadline; returns an invalid Fd and sets errno.
// A socket that connected to itself counts as refused (connected_to_itself).
Fd connect_once(const SockAddr& addr, Deadline deadline);
// Whether a connected socket's two ends are one address and port: a connect
// to a local port nobody listens on that drew that very port as its own
// ephemeral port meets itself (TCP's simultaneous open). It then holds the
// port that its listener, starting a moment later, needs.
bool connected_to_itself(int fd);

// Blocking transfers on a socket of either mode, bounded by the deadline.
// Throw braid::Error (Timeout, PeerFailure on EOF, Transport otherwise).
void write_all(int fd, const void* data, std::size_t len, Deadline deadline,
               const std::string& what);
void read_all(int fd, void* data, std::size_t len, Deadline deadline, const std::string& what);

// The IPv4/IPv6 address to advertise, honouring BRAID_SOCKET_IFNAME with
// NCCL's grammar: a comma list of interface-name prefixes, "^" to exclude,
// "=" for exact names. Without it: the first non-loopback interface that is
// up, else loopback. `fallback_host` is used when the store host is loopback,
// so a single-host job stays on loopback.
std::string advertised_address(const std::string& store_host);
// Whether interface `name` is one BRAID_SOCKET_IFNAME's `spec` selects
// (NCCL's grammar: a comma-separated list of name prefixes; a leading '^'
// excludes them, '=' makes them exact names).
bool ifname_matches(const std::string& spec, const char* name);

}  // namespace braid::net
