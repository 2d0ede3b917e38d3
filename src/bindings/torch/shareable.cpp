#include "shareable.hpp"

#include <c10/core/CPUAllocator.h>
#include <c10/core/impl/alloc_cpu.h>
#include <c10/util/Exception.h>

#include <atomic>
#include <mutex>
#include <unordered_set>

#include "braid/error.hpp"
#include "braid/memory.hpp"

namespace braid_torch {

namespace {

// Which pointers came from mem_alloc, for raw_deleter: torch's raw_allocate
// frees through one deleter, which must tell the two kinds apart. A tensor's
// DataPtr carries its own kind's deleter instead, so freeing a small tensor
// (most of them) takes no lock.
std::mutex shared_mu;
std::unordered_set<void*>& shared_ptrs() {
  static auto* s = new std::unordered_set<void*>;  // outlives every tensor
  return *s;
}

void free_shared(void* p) {
  {
    std::lock_guard lk(shared_mu);
    shared_ptrs().erase(p);
  }
  braid::mem_free(p);
}

// raw_deleter's: either kind.
void release(void* p) {
  if (!p) return;
  bool shared;
  {
    std::lock_guard lk(shared_mu);
    shared = shared_ptrs().erase(p) > 0;
  }
  if (shared) braid::mem_free(p);
  else c10::free_cpu(p);
}

class ShareableAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(std::size_t n) const override {
    if (n >= min_bytes.load(std::memory_order_relaxed)) {
      try {
        void* p = braid::mem_alloc(n);
        std::lock_guard lk(shared_mu);
        shared_ptrs().insert(p);
        return {p, p, &free_shared, c10::Device(c10::DeviceType::CPU)};
      } catch (const braid::Error& e) {
        // Out of file descriptors, say: the tensor still works, through
        // the kernel's copy, so it is made in private memory instead.
        TORCH_WARN_ONCE("braid_torch: a shareable tensor could not be made (", e.what(),
                        "); tensors that cannot be are made in private memory");
      }
    }
    void* p = c10::alloc_cpu(n);  // what torch's default CPU allocator does, bar its memory reports
    return {p, p, &c10::free_cpu, c10::Device(c10::DeviceType::CPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &release; }

  std::atomic<std::size_t> min_bytes{1u << 20};
};

ShareableAllocator* installed = nullptr;  // set once, under install_mu
std::mutex install_mu;

}  // namespace

void use_shareable_memory(std::size_t min_bytes) {
  std::lock_guard lk(install_mu);
  if (!installed) {
    installed = new ShareableAllocator;  // never freed: tensors may outlive any owner
    installed->min_bytes = std::max<std::size_t>(min_bytes, 1);
    // Above the default allocator's priority (0) and mobile's (1).
    c10::SetCPUAllocator(installed, 2);
    return;
  }
  installed->min_bytes = std::max<std::size_t>(min_bytes, 1);
}

bool shareable_memory_on() {
  std::lock_guard lk(install_mu);
  return installed != nullptr;
}

}  // namespace braid_torch
