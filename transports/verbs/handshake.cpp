#include "transports/verbs/handshake.hpp"

#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include <fmt/core.h>

#include "transports/verbs/verbs_wire.hpp"

namespace braid::verbs {

namespace {
constexpr std::uint16_t kMaxCredits = 4096;
constexpr std::uint32_t kMaxRecvBytes = 1u << 20;
}  // namespace

Hello make_hello(HelloKind kind, const HelloFields& f) {
  Hello h{};
  h.magic = kHelloMagic;
  h.version = kHelloVersion;
  h.kind = static_cast<std::uint8_t>(kind);
  h.job_id = f.job_id;
  h.rank = f.rank;
  h.world_size = f.world_size;
  std::memcpy(h.gid, f.endpoint.gid.data(), 16);
  h.qpn = f.endpoint.qpn;
  h.psn = f.endpoint.psn;
  h.lid = f.endpoint.lid;
  h.mtu = f.endpoint.mtu;
  h.ethernet = f.endpoint.ethernet;
  h.credits = f.credits;
  h.rd_atom = f.endpoint.rd_atom;
  h.recv_bytes = f.recv_bytes;
  return h;
}

std::string check_hello(const Hello& h, HelloKind kind, std::uint64_t job_id, int world_size, int my_rank,
                        int expected_rank) {
  if (h.magic != kHelloMagic || h.version != kHelloVersion)
    return fmt::format("not a Braid verbs hello (magic {:#x}, version {})", h.magic, h.version);
  if (h.kind != static_cast<std::uint8_t>(kind)) return fmt::format("unexpected hello kind {}", h.kind);
  if (h.job_id != job_id || h.world_size != world_size)
    return fmt::format("from another job (job {:#x}, world {})", h.job_id, h.world_size);
  if (h.rank < 0 || h.rank >= world_size || h.rank == my_rank) return fmt::format("bad rank {}", h.rank);
  if (expected_rank >= 0 && h.rank != expected_rank)
    return fmt::format("answered as rank {}, expected rank {}", h.rank, expected_rank);
  if (std::string bad = check_endpoint(fields_of(h).endpoint); !bad.empty()) return bad;
  if (h.credits == 0 || h.credits > kMaxCredits) return fmt::format("bad credit count {}", h.credits);
  if (h.recv_bytes < sizeof(MsgHeader) || h.recv_bytes > kMaxRecvBytes)
    return fmt::format("bad receive buffer size {}", h.recv_bytes);
  return {};
}

HelloFields fields_of(const Hello& h) {
  HelloFields f;
  f.job_id = h.job_id;
  f.rank = h.rank;
  f.world_size = h.world_size;
  std::memcpy(f.endpoint.gid.data(), h.gid, 16);
  f.endpoint.qpn = h.qpn;
  f.endpoint.psn = h.psn;
  f.endpoint.lid = h.lid;
  f.endpoint.mtu = h.mtu;
  f.endpoint.ethernet = h.ethernet;
  f.endpoint.rd_atom = h.rd_atom;
  f.credits = h.credits;
  f.recv_bytes = h.recv_bytes;
  return f;
}

std::string proof_label(bool acceptor, std::uint64_t job_id, int dialer, int acceptor_rank) {
  return fmt::format("braid verbs {} job {:#x} dialer {} acceptor {}", acceptor ? "acceptor" : "dialer", job_id, dialer,
                     acceptor_rank);
}

HelloReader::Result HelloReader::read_from(int fd) {
  while (got_ < want_) {
    const ssize_t n = ::recv(fd, reinterpret_cast<char*>(buf_) + got_, want_ - got_, 0);
    if (n == 0) return Result::Closed;
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return Result::More;
      err_ = errno;
      return Result::Failed;
    }
    got_ += static_cast<std::size_t>(n);
  }
  if (want_ >= sizeof h_) std::memcpy(&h_, buf_, sizeof h_);
  return Result::Done;
}

}  // namespace braid::verbs
