// Unit checks of the verbs transport's parts.
//
// The pure parts (BRAID_IB_HCA parsing, GID choice, credit accounting, the
// handshake's validation) run everywhere. The device parts need an RDMA
// device: without one the program says so and exits 77 (skip). With one
// (tests/verbs/run_in_vm.sh runs it under Soft-RoCE) it connects two queue
// pairs to each other inside this process and proves with real transfers
// that SEND and RDMA READ move the right bytes, and that the registration
// cache never serves a stale registration when memory is freed and reused at
// the same address.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "braid/error.hpp"
#include "transports/verbs/device.hpp"
#include "transports/verbs/eager.hpp"
#include "transports/verbs/handshake.hpp"
#include "transports/verbs/queue_pair.hpp"
#include "transports/verbs/reg_cache.hpp"

using namespace braid::verbs;

namespace {

int g_failures = 0;
#define CHECK(cond)                                                          \
  do {                                                                       \
    if (!(cond)) {                                                           \
      std::fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
      ++g_failures;                                                          \
    }                                                                        \
  } while (0)

// --- pure ------------------------------------------------------------------

void hca_spec() {
  auto s = parse_hca_spec("mlx5_0:1,mlx5_1");
  CHECK(s.items.size() == 2 && s.items[0].port == 1 && s.items[1].port == 0);
  CHECK(hca_selected(s, "mlx5_0", 1));
  CHECK(!hca_selected(s, "mlx5_0", 2));
  CHECK(hca_selected(s, "mlx5_1", 2));
  CHECK(hca_selected(s, "mlx5_10", 1));  // prefixes, as NCCL
  CHECK(!hca_selected(s, "rxe0", 1));
  auto ex = parse_hca_spec("^mlx5_1");
  CHECK(ex.exclude && hca_selected(ex, "mlx5_0", 1) && !hca_selected(ex, "mlx5_1", 1));
  auto exact = parse_hca_spec("=mlx5_1");
  CHECK(exact.exact && hca_selected(exact, "mlx5_1", 1) && !hca_selected(exact, "mlx5_10", 1));
  CHECK(hca_selected(parse_hca_spec(""), "anything", 3));
  bool threw = false;
  try {
    parse_hca_spec("mlx5_0:x");
  } catch (const braid::Error& e) {
    threw = e.code() == braid::ErrorCode::InvalidArgument && std::strstr(e.what(), "BRAID_IB_HCA");
  }
  CHECK(threw);
}

GidEntry gid(int index, const char* text_tail, GidType t) {
  GidEntry e;
  e.index = index;
  e.type = t;
  if (std::string(text_tail) == "v4") {
    e.gid[10] = e.gid[11] = 0xff;
    e.gid[12] = 10, e.gid[13] = 77, e.gid[15] = 1;
  } else if (std::string(text_tail) == "ll") {
    e.gid[0] = 0xfe, e.gid[1] = 0x80, e.gid[15] = 7;
  } else {  // global IPv6
    e.gid[0] = 0x20, e.gid[1] = 0x01, e.gid[15] = 9;
  }
  return e;
}

void gid_choice() {
  // Soft-RoCE: link-local v2 at 0, IPv4-mapped v2 at 1.
  CHECK(choose_gid_index({gid(0, "ll", GidType::RoCEv2), gid(1, "v4", GidType::RoCEv2)}) == 1);
  // mlx5 style: v1 and v2 of each address.
  CHECK(choose_gid_index({gid(0, "ll", GidType::RoCEv1), gid(1, "ll", GidType::RoCEv2), gid(2, "v4", GidType::RoCEv1),
                          gid(3, "v4", GidType::RoCEv2)}) == 3);
  CHECK(choose_gid_index({gid(0, "ll", GidType::RoCEv2), gid(4, "g6", GidType::RoCEv2)}) == 4);
  CHECK(choose_gid_index({gid(0, "ll", GidType::RoCEv1), gid(2, "v4", GidType::RoCEv1)}) == 2);
  CHECK(choose_gid_index({gid(0, "ll", GidType::IB)}) == -1);
  CHECK(choose_gid_index({}) == -1);
  RawGid v4 = gid(0, "v4", GidType::RoCEv2).gid;
  CHECK(gid_is_ipv4_mapped(v4) && !gid_is_link_local(v4));
  CHECK(gid_text(v4) == "0000:0000:0000:0000:0000:ffff:0a4d:0001");
}

void credits() {
  Credits c;
  c.start(4, 3, 2);
  for (int i = 0; i < 4; ++i) {
    CHECK(c.can_send());
    c.spend();
  }
  CHECK(!c.can_send());
  CHECK(!c.give_back(5));  // more than ever lent: a protocol violation
  CHECK(c.give_back(3));
  CHECK(c.available() == 3);
  CHECK(!c.give_back(2));  // 3 + 2 > 4
  CHECK(c.consumed_one() && !c.should_return());
  CHECK(c.consumed_one() && c.should_return());
  CHECK(c.take_owed() == 2 && c.owed() == 0);
  CHECK(c.consumed_one() && c.consumed_one() && c.consumed_one());
  CHECK(!c.consumed_one());  // a fourth unreturned message: we lent only 3
  CHECK(receive_depth(32, 8) == 38);
}

void hello() {
  HelloFields f;
  f.job_id = 42;
  f.rank = 1;
  f.world_size = 4;
  f.endpoint.qpn = 0x123;
  f.endpoint.psn = 0xabcdef;
  f.endpoint.mtu = IBV_MTU_1024;
  f.endpoint.ethernet = 1;
  f.endpoint.rd_atom = 16;
  f.credits = 32;
  f.recv_bytes = 16448;
  Hello h = make_hello(HelloKind::Request, f);
  CHECK(check_hello(h, HelloKind::Request, 42, 4, 0, -1).empty());
  CHECK(!check_hello(h, HelloKind::Accept, 42, 4, 0, -1).empty());
  CHECK(!check_hello(h, HelloKind::Request, 43, 4, 0, -1).empty());  // another job
  CHECK(!check_hello(h, HelloKind::Request, 42, 4, 1, -1).empty());  // from myself
  CHECK(!check_hello(h, HelloKind::Request, 42, 4, 0, 2).empty());   // not who we dialed
  Hello bad = h;
  bad.qpn = 0;
  CHECK(!check_hello(bad, HelloKind::Request, 42, 4, 0, -1).empty());
  bad = h;
  bad.recv_bytes = 8;
  CHECK(!check_hello(bad, HelloKind::Request, 42, 4, 0, -1).empty());
  bad = h;
  bad.magic ^= 1;
  CHECK(!check_hello(bad, HelloKind::Request, 42, 4, 0, -1).empty());
  const HelloFields g = fields_of(h);
  CHECK(g.endpoint.qpn == 0x123 && g.endpoint.psn == 0xabcdef && g.credits == 32 && g.recv_bytes == 16448);
}

// --- on a device ---------------------------------------------------------------

struct Pair {
  std::unique_ptr<Device> dev;
  PdPtr pd;
  CqPtr cq;
  QpPtr a, b;
};

bool wait_one(ibv_cq* cq, ibv_wc* wc) {
  for (int i = 0; i < 2000000; ++i) {
    const int n = ibv_poll_cq(cq, 1, wc);
    if (n < 0) return false;
    if (n == 1) return true;
    if (i > 1000) usleep(10);
  }
  return false;
}

// RDMA READ of `len` bytes at (addr, rkey) into `dst` through QP b.
bool read_remote(Pair& p, void* dst, std::uint32_t lkey, std::uint64_t addr, std::uint32_t rkey, std::size_t len) {
  ibv_sge sge{reinterpret_cast<std::uintptr_t>(dst), static_cast<std::uint32_t>(len), lkey};
  ibv_send_wr wr{};
  wr.wr_id = 7;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_READ;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.rdma.remote_addr = addr;
  wr.wr.rdma.rkey = rkey;
  ibv_send_wr* bad = nullptr;
  if (ibv_post_send(p.b.get(), &wr, &bad)) return false;
  ibv_wc wc{};
  if (!wait_one(p.cq.get(), &wc)) return false;
  if (wc.status != IBV_WC_SUCCESS) std::fprintf(stderr, "READ: %s\n", ibv_wc_status_str(wc.status));
  return wc.status == IBV_WC_SUCCESS;
}

void loopback_send(Pair& p) {
  // b receives into a ring buffer, a sends from a slot: the eager path's parts.
  RecvRing ring(p.pd.get(), 2, 256);
  SendSlots slots(p.pd.get(), 2, 256);
  CHECK(ring.post(p.b.get(), 1, 11) == 0);
  const std::uint32_t s = slots.take(5);
  CHECK(s != SendSlots::kNone);
  std::memcpy(slots.buffer(s), "hello, verbs", 13);
  ibv_sge sge{reinterpret_cast<std::uintptr_t>(slots.buffer(s)), 13, slots.lkey()};
  ibv_send_wr wr{};
  wr.wr_id = 12;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_SEND;
  wr.send_flags = IBV_SEND_SIGNALED;
  ibv_send_wr* bad = nullptr;
  CHECK(ibv_post_send(p.a.get(), &wr, &bad) == 0);
  int got = 0;
  for (int i = 0; i < 2; ++i) {
    ibv_wc wc{};
    CHECK(wait_one(p.cq.get(), &wc));
    CHECK(wc.status == IBV_WC_SUCCESS);
    if (wc.wr_id == 11) {
      CHECK(wc.byte_len == 13);
      CHECK(std::memcmp(ring.buffer(1), "hello, verbs", 13) == 0);
      ++got;
    }
  }
  CHECK(got == 1);
  slots.release_owned_by(5);
  CHECK(slots.take(6) != SendSlots::kNone);
}

// The cache must never hand out a registration of pages that are gone.
void stale_registrations(Pair& p, RegCache::Validation mode) {
  const char* name = mode == RegCache::Validation::PageFrames ? "page frames" : "in use only";
  RegCache cache(p.pd.get(), mode);
  const std::size_t len = 1 << 20;
  std::vector<char> local(len);
  MrPtr local_mr(ibv_reg_mr(p.pd.get(), local.data(), len, IBV_ACCESS_LOCAL_WRITE));
  CHECK(local_mr != nullptr);

  void* x = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  CHECK(x != MAP_FAILED);
  std::memset(x, 'A', len);
  auto* e1 = cache.acquire(x, len, IBV_ACCESS_REMOTE_READ);
  auto* e1b = cache.acquire(static_cast<char*>(x) + 4096, 100, IBV_ACCESS_REMOTE_READ);
  CHECK(e1b == e1);  // shared while in use, in both modes
  CHECK(read_remote(p, local.data(), local_mr->lkey, reinterpret_cast<std::uintptr_t>(x), e1->rkey(), len));
  CHECK(local[0] == 'A' && local[len - 1] == 'A');
  cache.release(e1b);
  cache.release(e1);
  if (mode == RegCache::Validation::PageFrames) {
    auto* again = cache.acquire(x, len, IBV_ACCESS_REMOTE_READ);  // untouched: a hit
    CHECK(cache.stats().hits == 2);
    cache.release(again);
  }

  // Free the pages and map fresh ones at the very same address.
  CHECK(munmap(x, len) == 0);
  void* y = mmap(x, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
  CHECK(y == x);
  std::memset(y, 'B', len);
  auto* e2 = cache.acquire(y, len, IBV_ACCESS_REMOTE_READ);
  if (mode == RegCache::Validation::PageFrames) CHECK(cache.stats().stale == 1);
  std::memset(local.data(), 0, len);
  CHECK(read_remote(p, local.data(), local_mr->lkey, reinterpret_cast<std::uintptr_t>(y), e2->rkey(), len));
  CHECK(local[0] == 'B' && local[len / 2] == 'B' && local[len - 1] == 'B');
  cache.release(e2);

  // The same through malloc/free (glibc serves 1 MiB with mmap, and gives
  // the same address back): a receive-side registration.
  char* m = static_cast<char*>(std::malloc(len));
  std::memset(m, 'C', len);
  auto* e3 = cache.acquire(m, len, IBV_ACCESS_LOCAL_WRITE);
  cache.release(e3);
  std::free(m);
  char* n = static_cast<char*>(std::malloc(len));
  std::memset(n, 'D', len);
  auto* e4 = cache.acquire(n, len, IBV_ACCESS_REMOTE_READ);
  CHECK(read_remote(p, local.data(), local_mr->lkey, reinterpret_cast<std::uintptr_t>(n), e4->rkey(), len));
  CHECK(local[0] == 'D' && local[len - 1] == 'D');
  cache.release(e4);
  std::free(n);
  munmap(y, len);
  std::printf("  registration cache (%s): %llu hits, %llu misses, %llu stale: ok\n", name,
              static_cast<unsigned long long>(cache.stats().hits), static_cast<unsigned long long>(cache.stats().misses),
              static_cast<unsigned long long>(cache.stats().stale));
}

// Shows that the hazard the cache guards against is real on this device: a
// registration kept across munmap + mmap at the same address reads the old
// pages, not the new ones.
void stale_hazard(Pair& p) {
  const std::size_t len = 1 << 16;
  std::vector<char> local(len);
  MrPtr local_mr(ibv_reg_mr(p.pd.get(), local.data(), len, IBV_ACCESS_LOCAL_WRITE));
  void* x = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  std::memset(x, 'A', len);
  MrPtr kept(ibv_reg_mr(p.pd.get(), x, len, IBV_ACCESS_REMOTE_READ));
  CHECK(kept != nullptr && local_mr != nullptr);
  munmap(x, len);
  void* y = mmap(x, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
  CHECK(y == x);
  std::memset(y, 'B', len);
  CHECK(read_remote(p, local.data(), local_mr->lkey, reinterpret_cast<std::uintptr_t>(y), kept->rkey, len));
  std::printf("  a registration kept across munmap/mmap at one address reads the %s pages%s\n",
              local[0] == 'A' ? "old" : "new", local[0] == 'A' ? " (the hazard is real here)" : "");
  kept.reset();
  munmap(y, len);
}

int device_checks() {
  std::string why;
  Pair p;
  p.dev = open_device(&why);
  if (!p.dev) {
    std::printf("SKIP: device checks: %s\n", why.c_str());
    return 77;
  }
  std::printf("  device %s port %d, GID index %d (%s, %s)\n", p.dev->name.c_str(), p.dev->port, p.dev->gid_index,
              gid_text(p.dev->gid).c_str(), gid_type_name(p.dev->gid_type));
  if (const char* want = std::getenv("RXE_GID0")) {
    // Under tools/rxe-vm: the guest found the RoCE v2 IPv4 GID itself.
    if (!std::getenv("BRAID_IB_GID_INDEX")) CHECK(p.dev->gid_index == std::atoi(want));
  }
  p.pd.reset(ibv_alloc_pd(p.dev->ctx.get()));
  CHECK(p.pd != nullptr);
  p.cq.reset(ibv_create_cq(p.dev->ctx.get(), 64, nullptr, nullptr, 0));
  CHECK(p.cq != nullptr);
  if (!p.pd || !p.cq) return 1;
  p.a = create_rc_qp(*p.dev, p.pd.get(), p.cq.get(), {16, 16});
  p.b = create_rc_qp(*p.dev, p.pd.get(), p.cq.get(), {16, 16});
  const QpEndpoint ea = local_endpoint(*p.dev, p.a.get(), random_psn());
  const QpEndpoint eb = local_endpoint(*p.dev, p.b.get(), random_psn());
  connect_qp(p.a.get(), *p.dev, ea, eb);
  connect_qp(p.b.get(), *p.dev, eb, ea);
  loopback_send(p);
  std::printf("  SEND between two connected QPs: ok\n");
  stale_hazard(p);
  if (PageFrames().usable()) stale_registrations(p, RegCache::Validation::PageFrames);
  else std::printf("  page frames are hidden here (no CAP_SYS_ADMIN): that mode is not checked\n");
  stale_registrations(p, RegCache::Validation::InUseOnly);
  return 0;
}

}  // namespace

int main() {
  hca_spec();
  gid_choice();
  credits();
  hello();
  std::printf("pure checks: %s\n", g_failures ? "FAILED" : "ok");
  int rc = 0;
  try {
    rc = device_checks();
  } catch (const braid::Error& e) {
    std::fprintf(stderr, "device checks: %s\n", e.what());
    return 1;
  }
  if (g_failures) {
    std::printf("%d check(s) failed\n", g_failures);
    return 1;
  }
  return rc;
}
