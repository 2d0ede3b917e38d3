#include "transports/tcp/congestion.hpp"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include "src/common/errors.hpp"

namespace braid::tcp {

namespace {

// A line of /proc/sys/net/ipv4/NAME, or what to say where it cannot be read.
std::string sysctl_line(const char* name) {
  std::ifstream f(std::string("/proc/sys/net/ipv4/") + name);
  std::string line;
  if (!f || !std::getline(f, line)) return "(unreadable)";
  return line;
}

}  // namespace

std::string congestion_from_env() {
  const char* v = std::getenv("BRAID_TCP_CONGESTION");
  return v ? std::string(v) : std::string();
}

void set_congestion(int fd, const std::string& name) {
  if (name.empty()) return;
  if (::setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name.data(), static_cast<socklen_t>(name.size())) == 0) return;
  const int err = errno;
  fail(ErrorCode::InvalidArgument,
       "BRAID_TCP_CONGESTION='{}' is not valid: the kernel refused it ({}); expected one of the congestion controls "
       "this process may choose, '{}' (net.ipv4.tcp_allowed_congestion_control; with CAP_NET_ADMIN any of '{}')",
       name, errno_text(err), sysctl_line("tcp_allowed_congestion_control"),
       sysctl_line("tcp_available_congestion_control"));
}

std::string congestion_of(int fd) {
  char name[32] = {};
  socklen_t len = sizeof name;
  if (::getsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name, &len) != 0) return {};
  return std::string(name, ::strnlen(name, len));
}

}  // namespace braid::tcp
