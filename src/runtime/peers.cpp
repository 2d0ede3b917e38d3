#include "src/runtime/peers.hpp"

#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <string_view>

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

bool process_stopped(int pid) {
  if (pid <= 0) return false;
  std::ifstream f(fmt::format("/proc/{}/stat", pid));
  std::string line;
  if (!std::getline(f, line)) return false;
  // "pid (comm) S ...": comm may hold spaces and parentheses; the state
  // follows the last ')'.
  const auto close = line.rfind(')');
  if (close == std::string::npos || close + 2 >= line.size()) return false;
  const char state = line[close + 2];
  return state == 'T' || state == 't';
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
  return parse_peer_record(store::to_string(s.get(fmt::format("host/{}", rank), timeout)), rank);
}

std::optional<std::uint64_t> decimal(std::string_view t, std::size_t max_digits) {
  if (t.empty() || t.size() > max_digits) return std::nullopt;
  std::uint64_t v = 0;
  for (char c : t) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + static_cast<std::uint64_t>(c - '0');
  }
  return v;
}

PeerRecord parse_peer_record(const std::string& v, int rank) {
  PeerRecord r;
  const auto bar = v.find('|');
  const auto nl = v.find('\n');
  const auto pid = bar == std::string::npos || (nl != std::string::npos && bar > nl)
                       ? std::nullopt
                       : decimal(std::string_view(v).substr(bar + 1, nl == std::string::npos ? std::string::npos : nl - bar - 1), 10);
  if (!pid || *pid == 0 || *pid > 0x7fffffff)
    fail(ErrorCode::Store, "the store holds a malformed host record for rank {}: '{}' (expected 'identity|pid' "
         "then 'name=address' lines)", rank, v.substr(0, 200));
  r.host = v.substr(0, bar);
  r.pid = static_cast<int>(*pid);
  for (auto pos = nl; pos != std::string::npos;) {
    const auto next = v.find('\n', pos + 1);
    const std::string line = v.substr(pos + 1, next == std::string::npos ? std::string::npos : next - pos - 1);
    const auto eq = line.find('=');
    if (eq != std::string::npos) r.addresses.emplace_back(line.substr(0, eq), line.substr(eq + 1));
    pos = next;
  }
  return r;
}

JobRecord parse_job_record(const std::string& v) {
  const auto sp = v.find(' ');
  const auto id = sp == std::string::npos ? std::nullopt : decimal(std::string_view(v).substr(0, sp), 20);
  const auto world = sp == std::string::npos ? std::nullopt : decimal(std::string_view(v).substr(sp + 1), 8);
  // 20 digits can pass 2^64: the text must be what printing the number gives.
  if (!id || !world || *world < 1 || *world > (1u << 24) || std::to_string(*id) != v.substr(0, sp))
    fail(ErrorCode::Store, "the store holds a malformed job record '{}' (expected '<job id> <world size>')",
         v.substr(0, 200));
  return {*id, static_cast<int>(*world)};
}

std::optional<int> abort_rank(const std::string& v, int world_size) {
  const std::string_view digits = std::string_view(v).substr(0, v.find('\n'));
  if (digits == "-1") return -1;
  const auto r = decimal(digits, 9);
  if (!r || *r >= static_cast<std::uint64_t>(world_size)) return std::nullopt;
  return static_cast<int>(*r);
}

}  // namespace braid
