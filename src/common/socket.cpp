#include "src/common/socket.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "src/common/errors.hpp"

namespace braid::net {

std::string SockAddr::str() const {
  char host[INET6_ADDRSTRLEN] = "?";
  if (ss.ss_family == AF_INET) {
    auto* a = reinterpret_cast<const sockaddr_in*>(&ss);
    inet_ntop(AF_INET, &a->sin_addr, host, sizeof host);
    return fmt::format("{}:{}", host, ntohs(a->sin_port));
  }
  if (ss.ss_family == AF_INET6) {
    auto* a = reinterpret_cast<const sockaddr_in6*>(&ss);
    inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof host);
    return fmt::format("[{}]:{}", host, ntohs(a->sin6_port));
  }
  return "?";
}

int SockAddr::port() const {
  if (ss.ss_family == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in*>(&ss)->sin_port);
  if (ss.ss_family == AF_INET6)
    return ntohs(reinterpret_cast<const sockaddr_in6*>(&ss)->sin6_port);
  return -1;
}

SockAddr resolve(const std::string& host_in, int port) {
  if (port < 0 || port > 65535)
    fail(ErrorCode::InvalidArgument, "port {} is out of range: expected 0..65535", port);
  std::string host = host_in;
  if (host.size() > 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  const bool any = host.empty() || host == "*";
  if (any) hints.ai_flags = AI_PASSIVE;
  addrinfo* res = nullptr;
  std::string port_s = std::to_string(port);
  int rc = getaddrinfo(any ? nullptr : host.c_str(), port_s.c_str(), &hints, &res);
  if (rc != 0 || !res)
    fail(ErrorCode::InvalidArgument, "cannot resolve host '{}': {}", host, gai_strerror(rc));
  // Prefer IPv4: loopback names resolve to both and most hosts listen on v4.
  addrinfo* pick = res;
  for (addrinfo* p = res; p; p = p->ai_next)
    if (p->ai_family == AF_INET) {
      pick = p;
      break;
    }
  SockAddr out;
  std::memcpy(&out.ss, pick->ai_addr, pick->ai_addrlen);
  out.len = pick->ai_addrlen;
  freeaddrinfo(res);
  return out;
}

SockAddr local_address(int fd) {
  SockAddr a;
  a.len = sizeof a.ss;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&a.ss), &a.len) != 0)
    fail(ErrorCode::Transport, "getsockname failed: {}", errno_text());
  return a;
}

void set_nonblocking(int fd) {
  int fl = fcntl(fd, F_GETFL, 0);
  if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
    fail(ErrorCode::Transport, "fcntl(O_NONBLOCK) failed: {}", errno_text());
}

void set_nodelay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

static Fd make_listener(const SockAddr& addr, int backlog, bool tolerate_in_use) {
  Fd fd(::socket(addr.ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) fail(ErrorCode::Transport, "socket() failed: {}", errno_text());
  int one = 1;
  setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&addr.ss), addr.len) != 0) {
    int err = errno;
    if (tolerate_in_use && (err == EADDRINUSE || err == EADDRNOTAVAIL)) return Fd();
    fail(ErrorCode::Transport, "cannot bind {}: {}", addr.str(), errno_text(err));
  }
  if (::listen(fd.get(), backlog) != 0) {
    // With SO_REUSEADDR two sockets may both bind a port; the second to
    // listen loses here, which means the same as losing the bind.
    if (tolerate_in_use && errno == EADDRINUSE) return Fd();
    fail(ErrorCode::Transport, "listen on {} failed: {}", addr.str(), errno_text());
  }
  return fd;
}

Fd listen_on(const SockAddr& addr, int backlog) { return make_listener(addr, backlog, false); }
Fd try_listen_on(const SockAddr& addr, int backlog) { return make_listener(addr, backlog, true); }

Fd connect_once(const SockAddr& addr, Deadline deadline) {
  Fd fd(::socket(addr.ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd.valid()) return Fd();
  int rc = ::connect(fd.get(), reinterpret_cast<const sockaddr*>(&addr.ss), addr.len);
  if (rc != 0 && errno != EINPROGRESS) return Fd();
  if (rc != 0) {
    pollfd p{fd.get(), POLLOUT, 0};
    int n;
    do {
      n = ::poll(&p, 1, deadline.poll_ms());
    } while (n < 0 && errno == EINTR);
    if (n <= 0) {
      errno = n == 0 ? ETIMEDOUT : errno;
      return Fd();
    }
    int err = 0;
    socklen_t len = sizeof err;
    getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0) {
      errno = err;
      return Fd();
    }
  }
  if (connected_to_itself(fd.get())) {
    // Let go of the port at once (a reset: no TIME_WAIT), for its listener.
    linger now{1, 0};
    setsockopt(fd.get(), SOL_SOCKET, SO_LINGER, &now, sizeof now);
    errno = ECONNREFUSED;
    return Fd();
  }
  // Back to blocking mode: callers that want non-blocking set it themselves.
  int fl = fcntl(fd.get(), F_GETFL, 0);
  fcntl(fd.get(), F_SETFL, fl & ~O_NONBLOCK);
  set_nodelay(fd.get());
  return fd;
}

bool connected_to_itself(int fd) {
  sockaddr_storage mine{}, theirs{};
  socklen_t ml = sizeof mine, tl = sizeof theirs;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&mine), &ml) != 0 ||
      getpeername(fd, reinterpret_cast<sockaddr*>(&theirs), &tl) != 0)
    return false;
  return ml == tl && std::memcmp(&mine, &theirs, ml) == 0;
}

Fd connect_retry(const SockAddr& addr, Deadline deadline, const std::string& what, bool refused_is_final) {
  auto backoff = std::chrono::milliseconds(1);
  int last = 0;
  for (;;) {
    Fd fd = connect_once(addr, deadline);
    if (fd.valid()) return fd;
    last = errno;
    if (refused_is_final && last == ECONNREFUSED)
      throw Error(ErrorCode::Transport, fmt::format("{} at {} refused the connection (nothing listens there now)",
                                                    what, addr.str()));
    if (deadline.expired()) break;
    std::this_thread::sleep_for(std::min(backoff, std::chrono::milliseconds(deadline.poll_ms())));
    backoff = std::min(backoff * 2, std::chrono::milliseconds(100));
  }
  throw Error(ErrorCode::Timeout,
              fmt::format("timed out connecting to {} at {}: last error: {}", what, addr.str(),
                          errno_text(last)));
}

static void wait_fd(int fd, short events, Deadline deadline, const std::string& what) {
  pollfd p{fd, events, 0};
  for (;;) {
    int n = ::poll(&p, 1, deadline.poll_ms());
    if (n > 0) return;
    if (n < 0 && errno == EINTR) continue;
    if (n == 0) fail(ErrorCode::Timeout, "timed out waiting for {}", what);
    fail(ErrorCode::Transport, "poll on {} failed: {}", what, errno_text());
  }
}

void write_all(int fd, const void* data, std::size_t len, Deadline deadline,
               const std::string& what) {
  auto* p = static_cast<const char*>(data);
  while (len > 0) {
    ssize_t n = ::send(fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      p += n;
      len -= static_cast<std::size_t>(n);
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      wait_fd(fd, POLLOUT, deadline, what);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    fail(ErrorCode::PeerFailure, "write to {} failed: {}", what, errno_text());
  }
}

void read_all(int fd, void* data, std::size_t len, Deadline deadline, const std::string& what) {
  auto* p = static_cast<char*>(data);
  while (len > 0) {
    ssize_t n = ::recv(fd, p, len, MSG_DONTWAIT);
    if (n > 0) {
      p += n;
      len -= static_cast<std::size_t>(n);
      continue;
    }
    if (n == 0) fail(ErrorCode::PeerFailure, "{} closed the connection", what);
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      wait_fd(fd, POLLIN, deadline, what);
      continue;
    }
    if (errno == EINTR) continue;
    fail(ErrorCode::PeerFailure, "read from {} failed: {}", what, errno_text());
  }
}

bool ifname_matches(const std::string& spec_in, const char* name) {
  // NCCL grammar: "^" excludes, "=" exact; comma-separated list of prefixes.
  std::string spec = spec_in;
  bool exclude = false, exact = false;
  if (!spec.empty() && spec[0] == '^') exclude = true, spec.erase(0, 1);
  if (!spec.empty() && spec[0] == '=') exact = true, spec.erase(0, 1);
  bool hit = false;
  size_t pos = 0;
  while (pos <= spec.size()) {
    size_t comma = spec.find(',', pos);
    std::string item = spec.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    if (!item.empty()) {
      if (exact ? item == name : std::strncmp(name, item.c_str(), item.size()) == 0) hit = true;
    }
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return exclude ? !hit : hit;
}

std::string advertised_address(const std::string& store_host) {
  const char* spec = std::getenv("BRAID_SOCKET_IFNAME");
  ifaddrs* ifs = nullptr;
  if (getifaddrs(&ifs) != 0) return "127.0.0.1";
  std::string chosen, loopback;
  for (ifaddrs* i = ifs; i; i = i->ifa_next) {
    if (!i->ifa_addr || !(i->ifa_flags & IFF_UP)) continue;
    int fam = i->ifa_addr->sa_family;
    if (fam != AF_INET && fam != AF_INET6) continue;
    char host[INET6_ADDRSTRLEN];
    const void* src = fam == AF_INET
                          ? static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr)
                          : static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(i->ifa_addr)->sin6_addr);
    inet_ntop(fam, src, host, sizeof host);
    if (fam == AF_INET6 && std::strncmp(host, "fe80", 4) == 0) continue;  // link-local needs scope
    if (spec && *spec) {
      if (ifname_matches(spec, i->ifa_name) && chosen.empty()) chosen = host;
      continue;
    }
    if (i->ifa_flags & IFF_LOOPBACK) {
      if (loopback.empty() && fam == AF_INET) loopback = host;
    } else if (chosen.empty() && fam == AF_INET) {
      chosen = host;
    }
  }
  freeifaddrs(ifs);
  if (spec && *spec) {
    if (chosen.empty())
      fail(ErrorCode::InvalidArgument,
           "BRAID_SOCKET_IFNAME='{}' matches no interface that is up with an address", spec);
    return chosen;
  }
  // A job whose store is on loopback runs on one host: stay on loopback.
  if (store_host == "127.0.0.1" || store_host == "localhost" || store_host == "::1")
    return loopback.empty() ? "127.0.0.1" : loopback;
  return chosen.empty() ? (loopback.empty() ? "127.0.0.1" : loopback) : chosen;
}

}  // namespace braid::net
