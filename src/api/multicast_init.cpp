#include "src/api/multicast_init.hpp"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fmt/core.h>

#include <algorithm>
#include <cstring>
#include <set>
#include <sstream>

#include "src/common/errors.hpp"
#include "src/common/log.hpp"
#include "src/common/socket.hpp"
#include "src/common/thread_name.hpp"

namespace braid::detail {

namespace {

constexpr const char* kMagic = "braid-mc1";
constexpr auto kEvery = std::chrono::milliseconds(50);  // announcements, both kinds
constexpr std::size_t kMaxDatagram = 1024;

std::string strip_brackets(const std::string& h) {
  return h.size() >= 2 && h.front() == '[' && h.back() == ']' ? h.substr(1, h.size() - 2) : h;
}

std::uint64_t random_id() {
  std::uint64_t v = 0;
  while (v == 0)
    if (::getrandom(&v, sizeof v, 0) != static_cast<ssize_t>(sizeof v)) v = 0;
  return v;
}

}  // namespace

bool parse_announcement(const std::string& text, Announcement* a) {
  std::istringstream in(text);
  std::string magic, kind, id, rest;
  if (!(in >> magic >> kind >> a->world >> id) || magic != kMagic || kind.size() != 1) return false;
  a->kind = kind[0];
  if (a->kind != 'H' && a->kind != 'S') return false;
  if (a->world < 1 || a->world > (1 << 24) || id.size() != 16) return false;
  char* end = nullptr;
  a->id = std::strtoull(id.c_str(), &end, 16);
  if (*end != '\0' || a->id == 0) return false;
  if (a->kind == 'S' && (!(in >> a->port >> a->host) || a->port < 1 || a->port > 65535 || a->host.size() > 64))
    return false;
  in >> std::ws;
  std::getline(in, rest, '\0');
  const auto colon = rest.find(':');
  if (colon == std::string::npos || colon == 0 || colon > 4) return false;
  const std::string digits = rest.substr(0, colon);  // named: strtol's end points into it
  const long len = std::strtol(digits.c_str(), &end, 10);
  if (*end != '\0' || len < 0 || static_cast<std::size_t>(len) != rest.size() - colon - 1) return false;
  a->name = rest.substr(colon + 1);
  return true;
}

bool is_multicast_host(const std::string& host) {
  const std::string h = strip_brackets(host);
  in_addr v4{};
  if (::inet_pton(AF_INET, h.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 28) == 0xe;
  in6_addr v6{};
  if (::inet_pton(AF_INET6, h.c_str(), &v6) == 1) return v6.s6_addr[0] == 0xff;
  return false;
}

MulticastMeeting::MulticastMeeting(const std::string& host, int port, int world, const std::string& group_name)
    : host_(strip_brackets(host)), port_(port), world_(world), name_(group_name), id_(random_id()) {
  if (name_.size() > 512)
    fail(ErrorCode::InvalidArgument, "multicast init: group_name is {} characters long; at most 512 fit in an "
         "announcement", name_.size());
  sockaddr_in v4{};
  sockaddr_in6 v6{};
  if (::inet_pton(AF_INET, host_.c_str(), &v4.sin_addr) == 1) {
    family_ = AF_INET;
    v4.sin_family = AF_INET;
    v4.sin_port = htons(static_cast<std::uint16_t>(port));
    group_addr_.assign(reinterpret_cast<unsigned char*>(&v4), reinterpret_cast<unsigned char*>(&v4) + sizeof v4);
  } else if (::inet_pton(AF_INET6, host_.c_str(), &v6.sin6_addr) == 1) {
    family_ = AF_INET6;
    v6.sin6_family = AF_INET6;
    v6.sin6_port = htons(static_cast<std::uint16_t>(port));
    group_addr_.assign(reinterpret_cast<unsigned char*>(&v6), reinterpret_cast<unsigned char*>(&v6) + sizeof v6);
  } else {
    fail(ErrorCode::InvalidArgument, "multicast init: '{}' is not an IPv4 or IPv6 address", host);
  }
  const auto* group = reinterpret_cast<const sockaddr*>(group_addr_.data());
  const auto group_len = static_cast<socklen_t>(group_addr_.size());

  // The interface: BRAID_SOCKET_IFNAME's, else the route to the group.
  unsigned ifindex = 0;
  if (const char* spec = std::getenv("BRAID_SOCKET_IFNAME"); spec && *spec) {
    ifaddrs* ifs = nullptr;
    if (::getifaddrs(&ifs) == 0) {
      for (ifaddrs* i = ifs; i && local_.empty(); i = i->ifa_next) {
        if (!i->ifa_addr || i->ifa_addr->sa_family != family_ || !(i->ifa_flags & IFF_UP)) continue;
        if (!net::ifname_matches(spec, i->ifa_name)) continue;
        char text[INET6_ADDRSTRLEN] = {};
        const void* a = family_ == AF_INET
                            ? static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr)
                            : static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(i->ifa_addr)->sin6_addr);
        ::inet_ntop(family_, a, text, sizeof text);
        if (family_ == AF_INET6 && std::strncmp(text, "fe80", 4) == 0) continue;  // a store needs a scope-free address
        local_ = text;
        ifindex = ::if_nametoindex(i->ifa_name);
      }
      ::freeifaddrs(ifs);
    }
    if (local_.empty())
      fail(ErrorCode::InvalidArgument, "multicast init on {}: BRAID_SOCKET_IFNAME='{}' matches no interface that "
           "is up with an {} address", where(), spec, family_ == AF_INET ? "IPv4" : "IPv6");
  } else {
    Fd probe(::socket(family_, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    sockaddr_storage me{};
    socklen_t len = sizeof me;
    if (!probe.valid() || ::connect(probe.get(), group, group_len) != 0 ||
        ::getsockname(probe.get(), reinterpret_cast<sockaddr*>(&me), &len) != 0)
      fail(ErrorCode::InvalidArgument, "multicast init on {}: this host has no route to the group ({}): add one "
           "(ip route add 224.0.0.0/4 dev IF) or name the interface with BRAID_SOCKET_IFNAME", where(),
           errno_text());
    char text[INET6_ADDRSTRLEN] = {};
    const void* a = family_ == AF_INET ? static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(&me)->sin_addr)
                                       : static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(&me)->sin6_addr);
    ::inet_ntop(family_, a, text, sizeof text);
    local_ = text;
  }

  fd_ = ::socket(family_, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd_ < 0) fail(ErrorCode::Internal, "multicast init: socket: {}", errno_text());
  const int one = 1;
  ::setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  ::setsockopt(fd_, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one);  // several processes per host share the port
  int ok;
  if (family_ == AF_INET) {
    ip_mreqn m{};
    m.imr_multiaddr = reinterpret_cast<const sockaddr_in*>(group)->sin_addr;
    m.imr_ifindex = static_cast<int>(ifindex);
    ok = ::setsockopt(fd_, IPPROTO_IP, IP_ADD_MEMBERSHIP, &m, sizeof m);
    if (ok == 0 && ifindex) ok = ::setsockopt(fd_, IPPROTO_IP, IP_MULTICAST_IF, &m, sizeof m);
    if (ok == 0) ok = ::setsockopt(fd_, IPPROTO_IP, IP_MULTICAST_LOOP, &one, sizeof one);
  } else {
    ipv6_mreq m{};
    m.ipv6mr_multiaddr = reinterpret_cast<const sockaddr_in6*>(group)->sin6_addr;
    m.ipv6mr_interface = ifindex;
    ok = ::setsockopt(fd_, IPPROTO_IPV6, IPV6_JOIN_GROUP, &m, sizeof m);
    if (ok == 0 && ifindex) ok = ::setsockopt(fd_, IPPROTO_IPV6, IPV6_MULTICAST_IF, &ifindex, sizeof ifindex);
    if (ok == 0) ok = ::setsockopt(fd_, IPPROTO_IPV6, IPV6_MULTICAST_LOOP, &one, sizeof one);
  }
  if (ok != 0 || ::bind(fd_, group, group_len) != 0) {
    const std::string why = errno_text();
    ::close(fd_);
    fd_ = -1;
    fail(ErrorCode::InvalidArgument, "multicast init on {}: cannot join the group here ({}); name the interface "
         "with BRAID_SOCKET_IFNAME, or use env:// or tcp://HOST:PORT", where(), why);
  }
}

MulticastMeeting::~MulticastMeeting() {
  stop_ = true;
  if (announcer_.joinable()) announcer_.join();
  if (fd_ >= 0) ::close(fd_);
}

std::string MulticastMeeting::where() const {
  return fmt::format("{}{}{}:{} (group_name '{}')", family_ == AF_INET6 ? "[" : "", host_,
                     family_ == AF_INET6 ? "]" : "", port_, name_);
}

void MulticastMeeting::send(const std::string& text) {
  if (::sendto(fd_, text.data(), text.size(), 0, reinterpret_cast<const sockaddr*>(group_addr_.data()),
               static_cast<socklen_t>(group_addr_.size())) < 0 &&
      errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
    fail(ErrorCode::InvalidArgument, "multicast init on {}: cannot send to the group ({}): multicast does not "
         "get out of this host; name the interface with BRAID_SOCKET_IFNAME, or use env:// or tcp://HOST:PORT",
         where(), errno_text());
}

void MulticastMeeting::meet(std::chrono::steady_clock::time_point deadline) {
  using Clock = std::chrono::steady_clock;
  const std::string tail = fmt::format("{}:{}", name_.size(), name_);
  const std::string hello = fmt::format("{} H {} {:016x} {}", kMagic, world_, id_, tail);
  std::set<std::uint64_t> heard{id_};
  auto last = Clock::now() - kEvery;
  char buf[kMaxDatagram + 1];
  for (;;) {
    const auto now = Clock::now();
    if (now >= deadline)
      fail(ErrorCode::Timeout, "multicast init on {}: heard {} of the {} processes of the world before the "
           "timeout, and no store: multicast may not get through between the hosts (a switch or firewall that "
           "drops it, another interface: BRAID_SOCKET_IFNAME), or fewer processes were started; env:// or "
           "tcp://HOST:PORT need no multicast", where(), heard.size(), world_);
    if (now - last >= kEvery) {
      send(hello);
      last = now;
    }
    pollfd p{fd_, POLLIN, 0};
    const auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(last + kEvery - Clock::now());
    ::poll(&p, 1, static_cast<int>(std::max<long>(0, wait.count())) + 1);
    for (;;) {
      const ssize_t n = ::recv(fd_, buf, kMaxDatagram, 0);
      if (n <= 0) break;
      Announcement a;
      if (!parse_announcement(std::string(buf, static_cast<std::size_t>(n)), &a) || a.name != name_) continue;
      if (a.world != world_)
        fail(ErrorCode::InvalidArgument, "multicast init on {}: processes disagree on world_size: {} here, {} "
             "announced by another; every process must pass the same (or give each job its own group_name)",
             where(), world_, a.world);
      if (a.kind == 'S') {
        store_host_ = a.host;
        store_port_ = a.port;
        return;
      }
      heard.insert(a.id);
      if (static_cast<int>(heard.size()) > world_)
        fail(ErrorCode::InvalidArgument, "multicast init on {}: more than world_size = {} processes announced "
             "themselves; two jobs share the address, port and group_name: give each its own group_name",
             where(), world_);
    }
    if (static_cast<int>(heard.size()) == world_ && *heard.begin() == id_) {
      // Rank 0: the store on a port of its own, on the interface toward the group.
      server_ = store::TcpStoreServer::try_create(local_, 0);
      if (!server_) fail(ErrorCode::Store, "multicast init on {}: rank 0 could not host the store on {}", where(), local_);
      store_host_ = local_;
      store_port_ = server_->port();
      ids_.assign(heard.begin(), heard.end());
      BRAID_INFO("multicast init on {}: {} processes heard; this one is rank 0, store on {}:{}", where(), world_,
                 store_host_, store_port_);
      return;
    }
  }
}

void MulticastMeeting::keep_announcing() {
  const std::string store = fmt::format("{} S {} {:016x} {} {} {}:{}", kMagic, world_, id_, store_port_, store_host_,
                                        name_.size(), name_);
  announcer_ = std::thread([this, store] {
    while (!stop_) {
      try {
        send(store);
      } catch (const Error&) {
        return;  // the others time out saying so
      }
      std::this_thread::sleep_for(kEvery);
    }
  });
  name_thread(announcer_, "braid-mcast");
}

}  // namespace braid::detail
