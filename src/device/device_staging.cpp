#include "src/device/device_staging.hpp"

#include <algorithm>
#include <bit>
#include <chrono>
#include <deque>
#include <map>
#include <thread>

#include "src/common/errors.hpp"
#include "src/common/log.hpp"
#include "cuda_kernels/cuda.hpp"

namespace braid::detail {

void check_device_tensor(const Tensor& t, const char* what, const char* op) {
  if (t.device.is_cpu()) return;
  if (!t.device.is_cuda())
    fail(ErrorCode::InvalidArgument, "{}: {} has an unknown device type ({}): expected CPU or CUDA",
         op, what, static_cast<int>(t.device.type));
  if (!cuda::available())  // also the answer in a build without CUDA
    fail(ErrorCode::NotSupported, "{}: {} is on cuda:{}: {}", op, what, t.device.index,
         cuda::unavailable_reason());
  if (t.device.index < 0 || t.device.index >= cuda::device_count())
    fail(ErrorCode::InvalidArgument, "{}: {} is on cuda:{}, which does not exist: expected "
         "cuda:0..cuda:{}", op, what, t.device.index, cuda::device_count() - 1);
}

// --- StagingLayout ---------------------------------------------------------------------

namespace {

// Adds r to list unless a range already there covers it.
void add_covered(std::vector<StagingLayout::Range>& list, const StagingLayout::Range& r) {
  for (const auto& x : list)
    if (x.region == r.region && x.offset <= r.offset && r.offset + r.bytes <= x.offset + x.bytes)
      return;
  list.push_back(r);
}

}  // namespace

StagingLayout::Range StagingLayout::add(const Tensor& t, StageDir dir, const char* what) {
  if (device_ < 0) {
    device_ = t.device.index;
    first_what_ = what;
  } else if (t.device.index != device_) {
    fail(ErrorCode::InvalidArgument, "{}: {} is on cuda:{} but {} is on cuda:{}: the device "
         "tensors of one op must be on one device", op_, what, t.device.index, first_what_,
         device_);
  }
  const char* p = static_cast<const char*>(t.data);
  const std::size_t n = t.nbytes();
  Range r{regions_.size(), 0, n};
  // Inside a region already staged (the same tensor, a slice of it, a list
  // entry of a contiguous list): share its stand-in, so that in-place stays
  // in place.
  for (std::size_t i = 0; i < regions_.size(); ++i) {
    const auto base = reinterpret_cast<std::uintptr_t>(regions_[i].device);
    const auto at = reinterpret_cast<std::uintptr_t>(p);
    if (base <= at && at + n <= base + regions_[i].bytes) {
      r = Range{i, static_cast<std::size_t>(at - base), n};
      break;
    }
  }
  if (r.region == regions_.size()) regions_.push_back(Region{p, n});
  if (dir != StageDir::Out) add_covered(copy_in_, r);
  if (dir != StageDir::In) add_covered(copy_back_, r);
  return r;
}

// --- the pinned pool ---------------------------------------------------------------------

namespace {

// Freed stand-ins kept for reuse, at most this many bytes (beyond it the
// largest go back to the driver): cudaHostAlloc pins pages and costs about a
// millisecond per MiB, far more than the copies it serves.
constexpr std::size_t kPoolKeepBytes = std::size_t{1} << 30;
// Power-of-two classes from 64 KiB: any op's stand-in fits a block of its
// class, and a block is never used for something much smaller than itself.
constexpr std::size_t kMinBlock = std::size_t{64} << 10;

std::size_t size_class(std::size_t bytes) { return std::bit_ceil(std::max(bytes, kMinBlock)); }

class PinnedPool {
 public:
  struct Block {
    void* data = nullptr;
    std::size_t capacity = 0;
  };

  static PinnedPool& instance() {
    // Made on first use, i.e. after the CUDA runtime initialised, so it is
    // destroyed before the runtime's own exit handler runs.
    static PinnedPool pool;
    return pool;
  }

  ~PinnedPool() {
    std::lock_guard lock(mu_);
    for (auto& d : deferred_) {
      try {
        if (d.event) d.event->synchronize();  // copies still in flight at exit: let them land
      } catch (const Error&) {
      }
      for (auto& b : d.blocks) cuda::free_pinned(b.data);
    }
    for (auto& [cap, p] : free_) cuda::free_pinned(p);
  }

  Block acquire(std::size_t bytes) {
    const std::size_t cap = size_class(bytes);
    {
      std::lock_guard lock(mu_);
      reap_locked();
      if (auto it = free_.find(cap); it != free_.end()) {
        Block b{it->second, cap};
        free_.erase(it);
        free_bytes_ -= cap;
        return b;
      }
    }
    try {
      return Block{cuda::malloc_pinned(cap), cap};
    } catch (const Error&) {
      // Out of pinned memory: give back what is cached and try once more.
      std::lock_guard lock(mu_);
      trim_locked(0);
    }
    return Block{cuda::malloc_pinned(cap), cap};
  }

  // The blocks are free once `after` has completed (null: at once).
  void release(std::vector<Block> blocks, std::shared_ptr<cuda::Event> after) {
    if (blocks.empty()) return;
    std::lock_guard lock(mu_);
    deferred_.push_back(Deferred{std::move(after), std::move(blocks)});
    reap_locked();
  }

 private:
  struct Deferred {
    std::shared_ptr<cuda::Event> event;
    std::vector<Block> blocks;
  };

  static bool complete(const Deferred& d) {
    if (!d.event) return true;
    try {
      return d.event->query();
    } catch (const Error& e) {
      // A device fault is sticky: nothing will touch these blocks again.
      BRAID_WARN("pinned staging buffers released after a CUDA error: {}", e.what());
      return true;
    }
  }

  void reap_locked() {
    // Entries come from many streams, so completion is not in list order:
    // look at each.
    for (auto it = deferred_.begin(); it != deferred_.end();) {
      if (!complete(*it)) {
        ++it;
        continue;
      }
      for (auto& b : it->blocks) {
        free_.emplace(b.capacity, b.data);
        free_bytes_ += b.capacity;
      }
      it = deferred_.erase(it);
    }
    trim_locked(kPoolKeepBytes);
  }

  void trim_locked(std::size_t keep) {
    while (free_bytes_ > keep && !free_.empty()) {
      auto largest = std::prev(free_.end());
      cuda::free_pinned(largest->second);
      free_bytes_ -= largest->first;
      free_.erase(largest);
    }
  }

  std::mutex mu_;
  std::multimap<std::size_t, void*> free_;  // capacity -> block
  std::size_t free_bytes_ = 0;
  std::deque<Deferred> deferred_;
};

}  // namespace

// --- DeviceStaging ---------------------------------------------------------------------------

DeviceStaging::DeviceStaging(void* stream, const char* op) : stream_(stream), op_(op), layout_(op) {}

DeviceStaging::~DeviceStaging() {
  if (blocks_.empty()) return;
  std::vector<PinnedPool::Block> blocks;
  for (const auto& b : blocks_) blocks.push_back({b.data, b.capacity});
  // The last event recorded covers every copy before it (one stream).
  auto last = out_event_ ? out_event_ : in_event_;
  try {
    PinnedPool::instance().release(std::move(blocks), std::move(last));
  } catch (const std::exception& e) {
    BRAID_WARN("{}: could not return pinned staging buffers: {}", op_, e.what());
  }
}

cuda::PointerInfo check_device_memory(const Tensor& t, const char* what, const char* op) {
  if (t.data == nullptr)
    fail(ErrorCode::InvalidArgument, "{}: {} has {} elements but a null data pointer", op, what,
         t.count);
  const cuda::PointerInfo info = cuda::pointer_info(t.data);
  if (info.kind != cuda::MemoryKind::Device && info.kind != cuda::MemoryKind::Managed)
    fail(ErrorCode::InvalidArgument, "{}: {} says cuda:{} but its memory is {} memory: expected "
         "memory allocated on that device (cudaMalloc)", op, what, t.device.index,
         cuda::memory_kind_name(info.kind));
  if (info.kind == cuda::MemoryKind::Device && info.device != t.device.index)
    fail(ErrorCode::InvalidArgument, "{}: {} says cuda:{} but its memory is on cuda:{}", op, what,
         t.device.index, info.device);
  if (info.base != nullptr) {
    const auto end = static_cast<const char*>(t.data) + t.nbytes();
    const auto alloc_end = static_cast<const char*>(info.base) + info.size;
    if (end > alloc_end)
      fail(ErrorCode::InvalidArgument, "{}: {} ({} bytes) runs {} bytes past the end of its "
           "device allocation ({} bytes at {})", op, what, t.nbytes(), end - alloc_end,
           info.size, info.base);
  }
  return info;
}

Tensor DeviceStaging::stage(const Tensor& t, StageDir dir, const char* what) {
  if (t.device.is_cpu()) return t;
  check_device_tensor(t, what, op_);
  if (t.count <= 0) {
    // Nothing to carry; a non-null pointer keeps "count > 0 needs data" checks simple.
    static char nothing;
    return Tensor{&nothing, 0, t.dtype, Device::cpu()};
  }
  check_device_memory(t, what, op_);
  const auto r = layout_.add(t, dir, what);
  if (r.region == blocks_.size()) {
    cuda::DeviceGuard guard(t.device.index);
    const auto b = PinnedPool::instance().acquire(layout_.regions()[r.region].bytes);
    blocks_.push_back(Block{b.data, b.capacity});
  }
  return Tensor{static_cast<char*>(blocks_[r.region].data) + r.offset, t.count, t.dtype,
                Device::cpu()};
}

std::vector<Tensor> DeviceStaging::stage_list(const std::vector<Tensor>& list, StageDir dir,
                                              const char* what) {
  // One contiguous run of device memory on one device: stage it whole first,
  // so the entries' stand-ins are one contiguous block as well (the op then
  // uses it in place rather than copying it once more).
  bool contiguous = list.size() > 1;
  std::size_t total = 0;
  for (std::size_t i = 0; i < list.size() && contiguous; ++i) {
    const Tensor& t = list[i];
    contiguous = t.device.is_cuda() && t.device == list[0].device && t.count >= 0 &&
                 t.data != nullptr &&
                 static_cast<const char*>(t.data) == static_cast<const char*>(list[0].data) + total;
    if (contiguous) total += t.nbytes();
  }
  if (contiguous && total > 0)
    stage(Tensor{list[0].data, static_cast<std::int64_t>(total), DType::UInt8, list[0].device}, dir,
          what);
  std::vector<Tensor> out;
  out.reserve(list.size());
  for (const Tensor& t : list) out.push_back(stage(t, dir, what));
  return out;
}

void DeviceStaging::begin() {
  if (!active() || layout_.copy_in().empty()) return;
  cuda::DeviceGuard guard(device());
  for (const auto& r : layout_.copy_in())
    cuda::copy(static_cast<char*>(blocks_[r.region].data) + r.offset,
               layout_.regions()[r.region].device + r.offset, r.bytes, stream_);
  auto e = std::make_shared<cuda::Event>();
  e->record(stream_);
  in_event_ = std::move(e);
}

bool DeviceStaging::poll_until(const cuda::Event& e, Deadline until) {
  // A copy of a few MiB takes well under a millisecond; a stream still busy
  // with the caller's kernels may take long. Back off from 20 us to 1 ms.
  auto pause = std::chrono::microseconds(20);
  while (!e.query()) {
    if (until.expired()) return false;
    std::this_thread::sleep_for(pause);
    pause = std::min<std::chrono::microseconds>(pause * 2, std::chrono::milliseconds(1));
  }
  return true;
}

void DeviceStaging::wait_inputs(Deadline until) {
  if (!in_event_) return;
  if (!poll_until(*in_event_, until))
    fail(ErrorCode::Timeout, "{}: copying its device tensors to the host did not finish in "
         "time (is earlier work on the op's stream still running?)", op_);
}

void DeviceStaging::end(std::size_t written) {
  std::lock_guard lock(mu_);
  if (ended_ || !active()) return;
  ended_ = true;
  if (layout_.copy_back().empty()) return;
  cuda::DeviceGuard guard(device());
  for (const auto& r : layout_.copy_back())
    cuda::copy(const_cast<char*>(layout_.regions()[r.region].device) + r.offset,
               static_cast<char*>(blocks_[r.region].data) + r.offset, std::min(r.bytes, written),
               stream_);
  auto e = std::make_shared<cuda::Event>();
  e->record(stream_);
  out_event_ = std::move(e);
}

bool DeviceStaging::done() {
  std::lock_guard lock(mu_);
  if (!active()) return true;
  if (!ended_) return false;
  return !out_event_ || out_event_->query();
}

bool DeviceStaging::settle(Deadline until, Deadline op_deadline, std::size_t written) {
  end(written);
  std::shared_ptr<cuda::Event> e;
  {
    std::lock_guard lock(mu_);
    if (error_) return true;
    e = out_event_;
  }
  if (!e || poll_until(*e, until)) return true;
  if (until.at < op_deadline.at) return false;
  std::lock_guard lock(mu_);
  if (!error_)
    error_ = std::make_exception_ptr(Error(ErrorCode::Timeout, fmt::format(
        "{}: copying its results back to the device did not finish in time (is other work on "
        "the op's stream holding it up?)", op_)));
  return true;
}

std::exception_ptr DeviceStaging::error() {
  std::lock_guard lock(mu_);
  return error_;
}

}  // namespace braid::detail
