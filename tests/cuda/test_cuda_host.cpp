// The host side of device tensors, checked on any machine:
// - StagingLayout: which pinned stand-in bytes stand for which device bytes
//   (shared stand-ins for the same or enclosed memory, what is copied in and
//   back for each direction, one device per op). Pure bookkeeping: the
//   pointers are never touched.
// - Where CUDA is not usable (a build without CUDA, or no driver/device):
//   braid::cuda's events, pinned memory and IPC throw NotSupported carrying the
//   reason, and every op, point-to-point and collective, blocking and async,
//   refuses a device tensor with that NotSupported, leaving the group usable.
//   On a machine with a GPU these cases say so and pass (test_cuda_ops checks
//   the ops there).
//
// The parent never probes CUDA itself (a probed driver does not survive
// fork, and the multi-process cases fork): usable_in_child() asks a child.
#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "src/device/device_staging.hpp"
#include "cuda_kernels/cuda.hpp"
#include "transports/cuda_ipc/ipc.hpp"
#include "tests/mp/harness.hpp"
#include "tests/cuda/usable_in_child.hpp"

namespace bc = braid::cuda;
using braid::DType;
using braid::ErrorCode;
using braid::Tensor;
using braid::detail::StageDir;
using braid::detail::StagingLayout;
using Range = StagingLayout::Range;

namespace {

// A device tensor over fake addresses (StagingLayout never dereferences).
Tensor fake(std::uintptr_t addr, std::int64_t count, int device = 0, DType dt = DType::Float32) {
  return Tensor{reinterpret_cast<void*>(addr), count, dt, braid::Device::cuda(device)};
}

template <class F>
void expect_not_supported(F&& f, const std::string& what) {
  INFO(what);
  try {
    f();
    FAIL("no error thrown");
  } catch (const braid::Error& e) {
    INFO("message: " << e.what());
    CHECK(e.code() == ErrorCode::NotSupported);
    CHECK(std::string(e.what()).find(bc::unavailable_reason()) != std::string::npos);
  }
}

}  // namespace

TEST_CASE("staging layout: the same tensor in and out shares one stand-in", "[cuda][staging]") {
  StagingLayout l("all_reduce");
  const Range a = l.add(fake(0x10000, 100), StageDir::In, "input");
  const Range b = l.add(fake(0x10000, 100), StageDir::Out, "output");
  CHECK(a == b);
  REQUIRE(l.regions().size() == 1);
  CHECK(l.regions()[0].bytes == 400);
  CHECK(l.copy_in() == std::vector<Range>{{0, 0, 400}});
  CHECK(l.copy_back() == std::vector<Range>{{0, 0, 400}});
  CHECK(l.device() == 0);
}

TEST_CASE("staging layout: a block of an input written back alone (in-place reduce_scatter)",
          "[cuda][staging]") {
  StagingLayout l("reduce_scatter_tensor");
  l.add(fake(0x20000, 400), StageDir::In, "input");  // 4 ranks x 100 floats
  const Range out = l.add(fake(0x20000 + 2 * 400, 100), StageDir::Out, "output");
  REQUIRE(l.regions().size() == 1);
  CHECK(out == Range{0, 800, 400});
  CHECK(l.copy_in() == std::vector<Range>{{0, 0, 1600}});
  CHECK(l.copy_back() == std::vector<Range>{{0, 800, 400}});  // the rest of input untouched
}

TEST_CASE("staging layout: an input inside an output is copied in alone (in-place all_gather)",
          "[cuda][staging]") {
  StagingLayout l("all_gather_into_tensor");
  l.add(fake(0x30000, 300, 0, DType::BFloat16), StageDir::Out, "output");
  const Range in = l.add(fake(0x30000 + 200, 100, 0, DType::BFloat16), StageDir::In, "input");
  REQUIRE(l.regions().size() == 1);
  CHECK(in == Range{0, 200, 200});
  CHECK(l.copy_in() == std::vector<Range>{{0, 200, 200}});
  CHECK(l.copy_back() == std::vector<Range>{{0, 0, 600}});
}

TEST_CASE("staging layout: separate memory gets separate stand-ins; copies are not repeated",
          "[cuda][staging]") {
  StagingLayout l("all_to_all");
  const Range a = l.add(fake(0x40000, 10), StageDir::In, "inputs");
  const Range b = l.add(fake(0x50000, 10), StageDir::InOut, "outputs");
  // Overlapping but not enclosed: its own stand-in (stage enclosing tensors first).
  const Range c = l.add(fake(0x40000 + 20, 10), StageDir::In, "inputs");
  l.add(fake(0x50000 + 8, 2), StageDir::Out, "outputs");  // inside b: already copied back
  CHECK(a.region == 0);
  CHECK(b.region == 1);
  CHECK(c.region == 2);
  CHECK(l.regions().size() == 3);
  CHECK(l.copy_in().size() == 3);
  CHECK(l.copy_back() == std::vector<Range>{{1, 0, 40}});
}

TEST_CASE("staging layout: an output-only tensor is not copied in", "[cuda][staging]") {
  StagingLayout l("recv");
  l.add(fake(0x60000, 5, 3, DType::Int64), StageDir::Out, "tensor");
  CHECK(l.copy_in().empty());
  CHECK(l.copy_back() == std::vector<Range>{{0, 0, 40}});
  CHECK(l.device() == 3);
}

TEST_CASE("staging layout: device tensors of one op on two devices are an error naming both",
          "[cuda][staging]") {
  StagingLayout l("all_reduce");
  l.add(fake(0x70000, 8, 0), StageDir::In, "input");
  try {
    l.add(fake(0x80000, 8, 1), StageDir::Out, "output");
    FAIL("no error");
  } catch (const braid::Error& e) {
    CHECK(e.code() == ErrorCode::InvalidArgument);
    const std::string m = e.what();
    INFO(m);
    CHECK(m.find("all_reduce: output is on cuda:1 but input is on cuda:0") != std::string::npos);
  }
}

TEST_CASE("without usable CUDA, events, pinned memory and IPC throw NotSupported with the reason",
          "[cuda]") {
  if (cuda_test::usable_in_child(false)) {
    WARN("CUDA is usable here: the no-driver behaviour is not checked (test_cuda_ops covers the GPU)");
    return;
  }
  std::printf("CUDA not usable: %s\n", bc::unavailable_reason().c_str());
  REQUIRE_FALSE(bc::unavailable_reason().empty());
  expect_not_supported([] { bc::Event e; }, "Event()");
  expect_not_supported([] { bc::Event e(true); }, "Event(timing)");
  expect_not_supported([] { (void)braid::cuda_ipc::interprocess_event(); }, "Event::interprocess");
  expect_not_supported([] { (void)braid::cuda_ipc::open_event(braid::cuda_ipc::Handle{}); }, "Event::open_ipc");
  expect_not_supported([] { (void)bc::malloc_pinned(4096); }, "malloc_pinned");
  expect_not_supported([] { bc::PinnedBuffer b(4096); }, "PinnedBuffer");
  int x = 0;
  expect_not_supported([&] { (void)braid::cuda_ipc::export_memory(&x); }, "ipc_export");
  expect_not_supported([] { (void)braid::cuda_ipc::open(braid::cuda_ipc::Handle{}); }, "ipc_open");
  expect_not_supported([] { (void)braid::cuda_ipc::evict(braid::cuda_ipc::Handle{}); }, "ipc_evict");
  expect_not_supported([] { bc::Stream s; }, "Stream");
  // The queries answer without throwing: all memory is host memory.
  const bc::PointerInfo info = bc::pointer_info(&x);
  CHECK(info.kind == bc::MemoryKind::Host);
  CHECK(info.device == -1);
  CHECK(info.base == nullptr);
  CHECK(braid::cuda_ipc::open_count() == 0);
  bc::free_pinned(nullptr);
  braid::cuda_ipc::evict_all();
  // The check every op runs on a device tensor.
  expect_not_supported(
      [&] {
        braid::detail::check_device_tensor(braid::tensor(&x, 1, braid::Device::cuda(0)), "input",
                                           "all_reduce");
      },
      "check_device_tensor");
  try {
    braid::detail::check_device_tensor(braid::tensor(&x, 1, braid::Device::cuda(0)), "input",
                                       "all_reduce");
  } catch (const braid::Error& e) {
    CHECK(std::string(e.what()).rfind("all_reduce: input is on cuda:0: ", 0) == 0);
  }
}

namespace {

using namespace braid_test;

// Every op kind with a device tensor (pointing at host memory: it must be
// refused before anything reads it), blocking and async.
void refuse_everywhere(int rank, int world) {
  const std::string why = bc::unavailable_reason();
  std::vector<float> host(64, 1.0f), host2(64 * 2, 0.0f);
  const auto dev = braid::Device::cuda(0);
  const Tensor d = braid::tensor(host.data(), 64, dev);
  const Tensor d2 = braid::tensor(host2.data(), 64 * world, dev);
  const Tensor h = braid::tensor(host.data(), 64);
  const int peer = (rank + 1) % world;
  std::vector<Tensor> dlist(static_cast<std::size_t>(world), d);
  for (bool async : {false, true}) {
    const braid::OpOptions o{.async_op = async};
    auto refuse = [&](const char* name, auto&& f) {
      const braid::Error e = expect_error(f, ErrorCode::NotSupported, why);
      RANK_CHECK_MSG(std::string(e.what()).find("cuda:0") != std::string::npos,
                     name << ": '" << e.what() << "' does not name the device");
    };
    refuse("send", [&] { braid::send(d, peer, o); });
    refuse("recv", [&] { braid::recv(d, peer, o); });
    refuse("isend", [&] { braid::isend(d, peer, o); });
    refuse("irecv", [&] { braid::irecv(d, peer, o); });
    refuse("broadcast", [&] { braid::broadcast(d, 0, o); });
    refuse("all_reduce", [&] { braid::all_reduce(d, braid::ReduceOp::Sum, o); });
    refuse("all_reduce host->device", [&] { braid::all_reduce(h, d, braid::ReduceOp::Max, o); });
    refuse("reduce", [&] { braid::reduce(d, 0, braid::ReduceOp::Sum, o); });
    refuse("all_gather", [&] { braid::all_gather(dlist, d, o); });
    refuse("all_gather_into_tensor", [&] { braid::all_gather_into_tensor(d2, d, o); });
    refuse("gather", [&] { braid::gather(d, rank == 0 ? &dlist : nullptr, 0, o); });
    refuse("scatter", [&] { braid::scatter(d, rank == 0 ? &dlist : nullptr, 0, o); });
    refuse("reduce_scatter", [&] { braid::reduce_scatter(d, dlist, braid::ReduceOp::Sum, o); });
    refuse("reduce_scatter_tensor",
           [&] { braid::reduce_scatter_tensor(d, d2, braid::ReduceOp::Sum, o); });
    refuse("all_to_all", [&] { braid::all_to_all(dlist, dlist, o); });
    refuse("all_to_all_single", [&] { braid::all_to_all_single(d2, d2, o); });
  }
  // Nothing was sent or consumed: the group still works, on host memory.
  std::vector<float> v(8, static_cast<float>(rank + 1));
  braid::all_reduce(braid::tensor(v));
  RANK_CHECK(v[0] == static_cast<float>(world * (world + 1) / 2));
}

}  // namespace

TEST_CASE("without usable CUDA, every op refuses a device tensor with NotSupported", "[cuda][mp]") {
  for (int n : {1, 2}) {
    auto res = run_ranks(n, [](int rank, int world) {
      if (bc::available()) {
        if (rank == 0) std::printf("CUDA is usable here: refusal not checked\n");
        return;
      }
      init_env();
      refuse_everywhere(rank, world);
    });
    INFO(n << " ranks: " << describe(res));
    REQUIRE(all_ok(res));
  }
}
