// Runs on every machine: libbraid (the shared library, as an application links
// it) loads and answers braid::cuda::available() cleanly whether or not this
// build has CUDA, the machine has a driver, or the driver has a device. Prints
// what it found and exits 0; fails only if the answers are inconsistent, a
// device call without CUDA does anything but throw Error(NotSupported), or
// libbraid dragged a shared CUDA runtime into the process.
#include <cstdio>
#include <fstream>
#include <string>

#include "braid/braid.hpp"
#include "braid/version.hpp"
#include "cuda_kernels/cuda.hpp"

namespace bc = braid::cuda;

namespace {

int failures = 0;

void check(bool ok, const char* what) {
  if (!ok) {
    std::printf("FAIL: %s\n", what);
    ++failures;
  }
}

// True when a mapping of this process names `needle` (a loaded library).
bool mapped(const std::string& needle) {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line))
    if (line.find(needle) != std::string::npos) return true;
  return false;
}

}  // namespace

int main() {
  std::printf("libbraid %s, built with CUDA: %s (BRAID_HAVE_CUDA=%d)\n", BRAID_VERSION,
              bc::built_with_cuda() ? "yes" : "no", BRAID_HAVE_CUDA);
  check(bc::built_with_cuda() == (BRAID_HAVE_CUDA != 0), "built_with_cuda() matches the build");

  const bool ok = bc::available();
  if (ok) {
    std::printf("CUDA available: %d device(s)\n", bc::device_count());
    check(bc::device_count() > 0, "available() implies device_count() > 0");
    check(bc::unavailable_reason().empty(), "available() implies an empty reason");
  } else {
    std::printf("CUDA not available: %s\n", bc::unavailable_reason().c_str());
    check(bc::device_count() == 0, "!available() implies device_count() == 0");
    check(!bc::unavailable_reason().empty(), "!available() gives a reason");
    // A device call now is a clean NotSupported carrying the reason.
    float x[4] = {1, 2, 3, 4};
    try {
      bc::reduce_into(x, x, 4, braid::DType::Float32, braid::ReduceOp::Sum, nullptr);
      check(false, "reduce_into without CUDA throws");
    } catch (const braid::Error& e) {
      std::printf("reduce_into says: %s\n", e.what());
      check(e.code() == braid::ErrorCode::NotSupported, "the error is NotSupported");
      check(std::string(e.what()).find(bc::unavailable_reason()) != std::string::npos,
            "the error carries the reason");
    }
    check(!bc::is_device_pointer(x), "is_device_pointer is false without CUDA");
  }

  // The CUDA runtime is inside libbraid (static); no libcudart.so may appear.
  check(mapped("libbraid.so"), "libbraid.so is loaded (this test links the shared library)");
  check(!mapped("libcudart.so"), "no shared CUDA runtime is loaded");
  std::printf("libcuda.so (the driver) loaded: %s\n", mapped("libcuda.so") ? "yes" : "no");

  if (failures == 0) std::printf("cuda probe: OK\n");
  return failures == 0 ? 0 : 1;
}
