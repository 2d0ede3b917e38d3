// Bucketer: DDP's gradient bucketing without torch. Reducing each gradient
// with its own all_reduce pays a collective's fixed cost per tensor;
// reducing them all after the backward pass leaves the network idle while
// it runs. Buckets of about bucket_bytes are reduced in the background as
// soon as their last tensor is ready, so most communication hides behind the
// rest of the backward pass. Built on the public API (async all_reduce on
// mem_alloc buffers) plus the runner steps of src/runtime/work_chain.hpp, which
// move the copies into and out of the buckets off the caller's thread; how
// buckets are formed is in include/braid/bucketer.hpp.
#include "braid/bucketer.hpp"

#include <cstring>
#include <mutex>
#include <utility>

#include "src/api/checks.hpp"
#include "braid/memory.hpp"
#include "braid/process_group.hpp"
#include "src/common/errors.hpp"
#include "src/runtime/context.hpp"
#include "src/runtime/work_chain.hpp"

namespace braid {

namespace {
constexpr const char* kWhat = "Bucketer";
}

struct Bucketer::Impl {
  struct Packed {
    void* buffer = nullptr;  // mem_alloc'd
    std::vector<Tensor> views;
    std::vector<std::size_t> offset;  // of each view in the buffer
    ~Packed() { mem_free(buffer); }
    void pack() const {
      for (std::size_t s = 0; s < views.size(); ++s)
        if (views[s].nbytes()) std::memcpy(static_cast<char*>(buffer) + offset[s], views[s].data, views[s].nbytes());
    }
    void unpack() const {
      for (std::size_t s = 0; s < views.size(); ++s)
        if (views[s].nbytes())
          std::memcpy(views[s].data, static_cast<const char*>(buffer) + offset[s], views[s].nbytes());
    }
  };
  struct Bucket {
    DType dtype;
    std::vector<std::size_t> members;  // registration indices, in buffer order
    std::vector<std::size_t> offset;   // byte offset of each member in the buffer
    std::size_t bytes = 0;
    std::int64_t count = 0;
    // A bucket of several tensors: its buffer and where each member goes,
    // shared with the runner's pack and unpack jobs (which may outlive a
    // failed launch). Null for a bucket of one tensor (reduced in place).
    std::shared_ptr<Packed> packed;
    std::size_t pending = 0;    // members not yet marked this round
    Work work;                  // this round's all_reduce (and unpack), once started
  };

  std::vector<Tensor> tensors;
  ReduceOp op;
  Group group;  // invalid: the default group
  std::vector<Bucket> buckets;
  std::vector<std::vector<std::size_t>> layout;  // buckets() answer
  std::vector<std::size_t> bucket_of;            // per tensor
  std::vector<bool> marked;                      // per tensor, this round
  std::size_t next_launch = 0;                   // buckets before it have started
  std::mutex mu;

  ~Impl() {
    // The all_reduces in flight use the tensors: let them finish first.
    for (Bucket& b : buckets) {
      try {
        b.work.wait();
      } catch (...) {
      }
    }
  }

  OpOptions op_options(const Bucket& b) const {
    return OpOptions{.group = group.valid() ? &group : nullptr,
                     .async_op = true,
                     // A packed bucket came from mem_alloc on every rank alike
                     // (the layout is the same everywhere), so peers on this
                     // host may read and write it in place.
                     .shareable_buffers = b.packed != nullptr};
  }

  // Starts every bucket, in order, whose tensors are all marked and whose
  // predecessors have started (under mu). A packed bucket is filled and
  // emptied on the async runner, right before and after its all_reduce
  // there: the caller's thread only counts, and goes on with its backward
  // pass while the runner copies and reduces.
  void launch_ready() {
    while (next_launch < buckets.size() && buckets[next_launch].pending == 0) {
      Bucket& b = buckets[next_launch];
      if (!b.packed) {
        b.work = all_reduce(tensors[b.members[0]], op, op_options(b));
      } else {
        const OpOptions o = op_options(b);
        detail::run_on_runner([p = b.packed] { p->pack(); }, o);
        Work reduced = all_reduce(tensor(b.packed->buffer, b.count, b.dtype), op, o);
        b.work = detail::chain_after({std::move(reduced)}, [p = b.packed] { p->unpack(); },
                                     Deadline::after(op_timeout(o)), o);
      }
      ++next_launch;
    }
  }

  void start_round() {
    for (Bucket& b : buckets) {
      b.pending = b.members.size();
      b.work = Work();
    }
    marked.assign(tensors.size(), false);
    next_launch = 0;
  }
};

Bucketer::Bucketer(std::vector<Tensor> tensors, const BucketOptions& options) : impl_(std::make_unique<Impl>()) {
  api::check_group(options.group, kWhat);
  for (std::size_t i = 0; i < tensors.size(); ++i) api::check_list_tensor(tensors, i, options.op, kWhat);
  api::check_no_overlap(tensors, kWhat);

  Impl& m = *impl_;
  m.tensors = std::move(tensors);
  m.op = options.op;
  if (options.group) m.group = *options.group;
  const std::size_t n = m.tensors.size();
  m.bucket_of.assign(n, 0);

  // Reverse registration order; one open bucket per dtype, closed when the
  // next tensor of its dtype would take it past bucket_bytes.
  constexpr std::size_t kNone = ~std::size_t{0};
  std::size_t open[kNumDTypes];
  for (auto& o : open) o = kNone;
  for (std::size_t k = n; k-- > 0;) {
    const Tensor& t = m.tensors[k];
    std::size_t& o = open[static_cast<std::size_t>(t.dtype)];
    if (o != kNone && m.buckets[o].bytes + t.nbytes() > options.bucket_bytes) o = kNone;
    if (o == kNone) {
      o = m.buckets.size();
      m.buckets.push_back(Impl::Bucket{t.dtype, {}, {}, 0, 0, nullptr, 0, Work()});
    }
    Impl::Bucket& b = m.buckets[o];
    m.bucket_of[k] = o;
    b.members.push_back(k);
    b.offset.push_back(b.bytes);
    b.bytes += t.nbytes();
    b.count += t.count;
  }
  for (Impl::Bucket& b : m.buckets) {
    m.layout.push_back(b.members);
    if (b.members.size() > 1 && b.bytes > 0) {
      b.packed = std::make_shared<Impl::Packed>();
      b.packed->buffer = mem_alloc(b.bytes);
      for (std::size_t i : b.members) b.packed->views.push_back(m.tensors[i]);
      b.packed->offset = b.offset;
    }
  }
  m.start_round();
}

Bucketer::~Bucketer() = default;
Bucketer::Bucketer(Bucketer&&) noexcept = default;
Bucketer& Bucketer::operator=(Bucketer&&) noexcept = default;

void Bucketer::mark_ready(std::size_t index) {
  if (!impl_) fail(ErrorCode::InvalidState, "{}: mark_ready on a moved-from Bucketer", kWhat);
  Impl& m = *impl_;
  std::lock_guard lk(m.mu);
  if (index >= m.tensors.size())
    fail(ErrorCode::InvalidArgument, "{}: mark_ready({}): index out of range: expected 0 to {} ({} tensors registered)",
         kWhat, index, static_cast<long long>(m.tensors.size()) - 1, m.tensors.size());
  const std::size_t bi = m.bucket_of[index];
  if (m.marked[index])
    fail(ErrorCode::InvalidState,
         "{}: tensor {} (bucket {}) was already marked ready in this round: expected each tensor once per round, "
         "then wait()",
         kWhat, index, bi);
  Impl::Bucket& b = m.buckets[bi];
  m.marked[index] = true;
  if (--b.pending == 0) m.launch_ready();
}

void Bucketer::wait() {
  if (!impl_) fail(ErrorCode::InvalidState, "{}: wait on a moved-from Bucketer", kWhat);
  Impl& m = *impl_;
  std::lock_guard lk(m.mu);
  for (std::size_t i = 0; i < m.tensors.size(); ++i)
    if (!m.marked[i]) {
      std::size_t unmarked = 0;
      for (bool x : m.marked) unmarked += x ? 0 : 1;
      fail(ErrorCode::InvalidState,
           "{}: wait() with tensor {} (bucket {}) not marked ready ({} of {} tensors unmarked): expected every "
           "tensor marked once per round; nothing was changed, mark the rest and wait again",
           kWhat, i, m.bucket_of[i], unmarked, m.tensors.size());
    }
  // Every bucket has started (all marked). Wait for all of them, even after
  // a failure: the caller's tensors are in use until then. A packed bucket's
  // Work covers its copy back into the tensors.
  std::exception_ptr first;
  for (Impl::Bucket& b : m.buckets) {
    try {
      b.work.wait();
    } catch (...) {
      if (!first) first = std::current_exception();
    }
  }
  m.start_round();
  if (first) std::rethrow_exception(first);
}

const std::vector<std::vector<std::size_t>>& Bucketer::buckets() const {
  static const std::vector<std::vector<std::size_t>> none;
  return impl_ ? impl_->layout : none;
}

}  // namespace braid
