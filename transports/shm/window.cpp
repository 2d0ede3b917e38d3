// shm::Window's set-up: creating this rank's block, publishing it, and
// mapping every peer's (window.hpp says what a block holds).
#include "transports/shm/window.hpp"

#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "src/common/error_record.hpp"
#include "src/common/errors.hpp"
#include "src/common/log.hpp"
#include "src/common/pidfd.hpp"
#include "transports/await_record.hpp"
#include "transports/record_text.hpp"
#include "transports/shm/window_layout.hpp"

namespace braid::shm {

namespace {
constexpr std::uint64_t kWindowMagic = 0x314e4957444952ULL;  // "RIDWIN1"

// Every member's record ("pid fd"), own included. Each member publishes its
// own under prefix<rank>; the group's first member reads them all and
// publishes them as one key, prefix "all", which the others read: a
// member's store operations stay the same few whatever the group's size
// (bench/store_ops.sh). Where the first member fails while gathering, it
// writes "!" and its error there instead (error_record.hpp), so the others
// fail as it did, naming the member it waited for, not it.
std::vector<std::string> gather_records(store::Store& store, const std::string& prefix, const std::string& own,
                                        const std::vector<int>& world, int me, Deadline deadline,
                                        const std::function<void(int)>& check_alive) {
  const int n = static_cast<int>(world.size());
  auto wr = [&](int q) { return world[static_cast<std::size_t>(q)]; };
  store.set(prefix + std::to_string(me), store::to_bytes(own));
  auto never_published = [&](int q) {
    fail_peer(ErrorCode::Timeout, wr(q),
              "one-sided window: rank {} did not publish its shared-memory block before the deadline (a rank that "
              "passed other counts than this one may run the call as messages instead)",
              wr(q));
  };
  std::vector<std::string> records(static_cast<std::size_t>(n));
  records[static_cast<std::size_t>(me)] = own;
  if (me == 0) {
    try {
      for (int q = 1; q < n; ++q)
        records[static_cast<std::size_t>(q)] = store::to_string(await_record(
            store, prefix + std::to_string(q), deadline, [&] { check_alive(wr(q)); },
            [&] { never_published(q); }));
    } catch (const Error& e) {
      // Tell the others whom this member waited for, then fail as it does.
      try {
        store.set(prefix + "all",
                  store::to_bytes("!" + error_record_text({e.code(), e.peer() >= 0 ? e.peer() : wr(0), wr(0), e.what()})));
      } catch (const Error&) {
      }
      throw;
    }
    std::string all;
    for (const auto& r : records) all += r + '\n';
    store.set(prefix + "all", store::to_bytes(all));
    return records;
  }
  const std::string all = store::to_string(await_record(
      store, prefix + "all", deadline, [&] { check_alive(wr(0)); },
      [&] {
        // The first member's deadline is about ours: rather than wait for
        // its verdict, look which member has not published (on this path
        // only, one request per member).
        for (int q = 1; q < n; ++q)
          if (!store.try_get(prefix + std::to_string(q))) never_published(q);
        fail_peer(ErrorCode::Timeout, wr(0),
                  "one-sided window: rank {} did not publish the group's shared-memory blocks before the deadline",
                  wr(0));
      }));
  if (!all.empty() && all[0] == '!') {  // "!" and the first member's error (error_record.hpp)
    const int bound = *std::max_element(world.begin(), world.end()) + 1;
    const auto f = parse_error_record(std::string_view(all).substr(1), bound, {ErrorCode::Timeout, ErrorCode::PeerFailure});
    if (!f || std::find(world.begin(), world.end(), f->named) == world.end())
      fail_peer(ErrorCode::PeerFailure, wr(0), "one-sided window: rank {} failed while gathering the group's records", wr(0));
    throw Error(f->code, f->what, f->named);
  }
  std::size_t pos = 0;
  for (int q = 0; q < n; ++q) {
    const auto nl = all.find('\n', pos);
    if (nl == std::string::npos)
      fail_peer(ErrorCode::Transport, wr(0), "one-sided window: rank {} published {} of the group's {} blocks", wr(0), q, n);
    if (q != me) records[static_cast<std::size_t>(q)] = all.substr(pos, nl - pos);
    pos = nl + 1;
  }
  return records;
}

}  // namespace

Window::Window(store::Store& store, std::uint32_t group_id, std::vector<int> world, int me, Deadline deadline,
               const std::function<void(int)>& check_alive)
    : onesided::Window(std::move(world), me), peers_(world_.size()), sent_(world_.size(), 0) {
  const int n = size();
  block_bytes_ = block_size(n);
  own_fd_ = Fd(::memfd_create("braid-window", MFD_CLOEXEC));
  if (!own_fd_.valid()) fail(ErrorCode::Transport, "one-sided window: memfd_create failed: {}", errno_text());
  if (::ftruncate(own_fd_.get(), static_cast<off_t>(block_bytes_)) != 0)
    fail(ErrorCode::Transport, "one-sided window: sizing {} bytes failed: {}", block_bytes_, errno_text());
  own_ = ::mmap(nullptr, block_bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, own_fd_.get(), 0);
  if (own_ == MAP_FAILED) {
    own_ = nullptr;
    fail(ErrorCode::Transport, "one-sided window: mmap failed: {}", errno_text());
  }
  // A fresh memfd reads as zeros: every count starts at 0.
  auto* h = new (own_) Header{};
  h->magic = kWindowMagic;
  h->group = group_id;
  h->rank = static_cast<std::uint32_t>(me);
  h->nranks = static_cast<std::uint32_t>(n);
  h->pid = ::getpid();
  const std::vector<std::string> records =
      gather_records(store, fmt::format("os/{}/", group_id), fmt::format("{} {}", ::getpid(), own_fd_.get()), world_,
                     me, deadline, check_alive);

  for (int q = 0; q < n; ++q) {
    if (q == me) continue;
    Peer& p = peers_[static_cast<std::size_t>(q)];
    const std::string& v = records[static_cast<std::size_t>(q)];
    int rec_ints[2] = {0, -1};
    if (!parse_ints(v, rec_ints) || rec_ints[0] <= 0 || rec_ints[1] < 0)
      fail_peer(ErrorCode::Transport, world_rank(q), "one-sided window: rank {} published '{}'; expected 'pid fd'",
                world_rank(q), v.substr(0, 100));
    const int pid = rec_ints[0], fd = rec_ints[1];
    p.pid = pid;
    p.pidfd = Fd(pidfd_open(pid));
    if (!p.pidfd.valid())
      fail_peer(ErrorCode::PeerFailure, world_rank(q), "rank {} is gone (pidfd_open of pid {}: {})", world_rank(q), pid,
                errno_text());
    Fd blk(pidfd_getfd(p.pidfd.get(), fd));
    if (!blk.valid()) {
      // The peer may have given up (another rank died) and closed its block:
      // give the abort it published a moment to reach us, so the error names
      // the root cause rather than this symptom.
      const int err = errno;
      for (int i = 0; i < 15 && !deadline.expired(); ++i) {
        check_alive(world_rank(q));
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
      errno = err;
    }
    if (!blk.valid())
      fail_peer(ErrorCode::Transport, world_rank(q),
                "one-sided window: cannot take rank {}'s memory (pidfd_getfd: {}; needs the same user)", world_rank(q),
                errno_text());
    struct stat st{};
    if (::fstat(blk.get(), &st) != 0 || static_cast<std::size_t>(st.st_size) != block_bytes_)
      fail_peer(ErrorCode::Transport, world_rank(q), "one-sided window: rank {}'s block has the wrong size",
                world_rank(q));
    p.block = ::mmap(nullptr, block_bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, blk.get(), 0);
    if (p.block == MAP_FAILED) {
      p.block = nullptr;
      fail(ErrorCode::Transport, "one-sided window: mapping rank {}'s block failed: {}", world_rank(q), errno_text());
    }
    p.block_bytes = block_bytes_;
    const Header* ph = header(q);
    if (ph->magic != kWindowMagic || ph->group != group_id || ph->rank != static_cast<std::uint32_t>(q) ||
        ph->nranks != static_cast<std::uint32_t>(n))
      fail_peer(ErrorCode::Transport, world_rank(q), "one-sided window: rank {}'s block is not this group's",
                world_rank(q));
  }
  std::vector<const onesided::LedgerBlock*> ledgers(static_cast<std::size_t>(n), nullptr);
  for (int q = 0; q < n; ++q)
    if (q != me) ledgers[static_cast<std::size_t>(q)] = &header(q)->ledger;
  ledger_.bind(&h->ledger, std::move(ledgers), nullptr);  // peers read our block in place
  BRAID_INFO("one-sided window for group {} ({} ranks) mapped", group_id, n);
}

Window::~Window() {
  for (Peer& p : peers_) {
    for (PeerMap& m : p.maps) ::munmap(m.local, m.size);
    if (p.block) ::munmap(p.block, p.block_bytes);
  }
  if (own_) ::munmap(own_, block_bytes_);
  if (scratch_.size) shared_free(reinterpret_cast<void*>(scratch_.base));
  for (Retired& r : retired_) shared_free(reinterpret_cast<void*>(r.a.base));
}

Window::Header* Window::header(int rank) const {
  return static_cast<Header*>(rank == me_ ? own_ : peers_[static_cast<std::size_t>(rank)].block);
}

}  // namespace braid::shm
