#include "src/runtime/peers.hpp"

#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <fstream>

#include <fmt/core.h>

#include "src/common/errors.hpp"
#include "src/common/fd.hpp"
#include "src/common/pidfd.hpp"

namespace braid {

std::string host_identity() {
  std::string boot;
  std::ifstream("/proc/sys/kernel/random/boot_id") >> boot;
  auto ino = [](const char* p) -> unsigned long long {
    struct stat st{};
    return ::stat(p, &st) == 0 ? static_cast<unsigned long long>(st.st_ino) : 0ULL;
  };
  // pid namespace: pids must mean the same processes; net namespace: ranks
  // in separate network namespaces are treated as separate hosts.
  return fmt::format("{}/uid{}/pidns{}/netns{}", boot, ::getuid(), ino("/proc/self/ns/pid"),
                     ino("/proc/self/ns/net"));
}

bool process_gone(int pid) {
  if (pid <= 0) return false;
  Fd fd(pidfd_open(pid));
  if (!fd.valid()) return errno == ESRCH;
  // A pidfd is readable once the process has exited, zombie or not.
  pollfd p{fd.get(), POLLIN, 0};
  return ::poll(&p, 1, 0) > 0;
}

std::string PeerRecord::address(const std::string& name) const {
  for (const auto& [n, a] : addresses)
    if (n == name) return a;
  return {};
}

// "identity|pid" then one "name=address" line per transport. The identity
// comes first, up to '|', so that readers of the host alone stop there.
void publish_peer_record(store::Store& s, int rank, const PeerRecord& r) {
  std::string v = fmt::format("{}|{}", r.host, r.pid);
  for (const auto& [n, a] : r.addresses) v += fmt::format("\n{}={}", n, a);
  s.set(fmt::format("host/{}", rank), store::to_bytes(v));
}

PeerRecord read_peer_record(store::Store& s, int rank, Millis timeout) {
  const std::string v = store::to_string(s.get(fmt::format("host/{}", rank), timeout));
  PeerRecord r;
  const auto bar = v.find('|');
  const auto nl = v.find('\n');
  if (bar == std::string::npos || (nl != std::string::npos && bar > nl))
    fail(ErrorCode::Store, "the store holds a malformed host record for rank {}: '{}'", rank, v);
  r.host = v.substr(0, bar);
  r.pid = std::atoi(v.c_str() + bar + 1);
  for (auto pos = nl; pos != std::string::npos;) {
    const auto next = v.find('\n', pos + 1);
    const std::string line = v.substr(pos + 1, next == std::string::npos ? std::string::npos : next - pos - 1);
    const auto eq = line.find('=');
    if (eq != std::string::npos) r.addresses.emplace_back(line.substr(0, eq), line.substr(eq + 1));
    pos = next;
  }
  return r;
}

}  // namespace braid
