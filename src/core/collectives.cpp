// The collective ops: argument checks, the buffer layout each plan expects
// (see algorithms/plan.hpp, "Buffer contract"), staging for list arguments
// that are not one contiguous block, then the plan executor.
#include <array>
#include <cstring>
#include <memory>
#include <numeric>
#include <string>
#include <thread>

#include "braid/ops.hpp"
#include "src/common/errors.hpp"
#include "src/common/per_thread.hpp"
#include "src/core/async_runner.hpp"
#include "src/core/context.hpp"
#include "src/core/device_staging.hpp"
#include "src/core/device_topology.hpp"
#include "src/core/executor.hpp"
#include "src/core/plan_cache.hpp"
#include "src/core/staging_pool.hpp"
#include "cuda_kernels/cuda.hpp"
#include "src/reduce/cpu_reduce.hpp"

namespace braid {

namespace {

using plan::Collective;
// Staging memory the call owns until it completes (staging_pool.hpp).
using Bytes = std::shared_ptr<char[]>;

Bytes alloc(std::size_t n) { return detail::staging_buffer(n); }

// One collective call, fully resolved to the plan contract.
struct Call {
  Collective coll;
  const char* what;
  // The caller's group lives through a blocking call: a raw pointer (a
  // shared_ptr copy is two atomic operations, a fifth of an 8-byte
  // all_reduce's own time). An async call keeps it alive through `hold`.
  detail::GroupImpl* group = nullptr;
  std::shared_ptr<detail::GroupImpl> hold;
  DType dtype = DType::Float32;
  ReduceOp op = ReduceOp::Sum;
  std::int64_t count = 0;
  int root = 0;  // group rank
  std::vector<std::vector<std::int64_t>> splits;
  ExecBuffers buffers;
  // Device tensors' pinned stand-ins: made on the first device tensor, so a
  // host-only call (the small-message hot path) allocates nothing for it.
  std::shared_ptr<detail::DeviceStaging> staging;
  void* stream = nullptr;  // OpOptions::stream
  std::vector<Bytes> keep;              // staging buffers the call owns
  std::function<void()> before, after;  // layout in, results out
  // AllReduce/Reduce: the caller's input, and the copy of it into Output the
  // buffer contract wants (AllGather: into its own block); a plan that
  // reads Input (Plan::reads_input) gets the input instead and the copy is
  // skipped. A plain record, not a closure: the small-message path
  // allocates nothing for it.
  const void* contribution = nullptr;
  struct CopyIn {
    void* dst = nullptr;
    const void* src = nullptr;
    std::size_t bytes = 0;
  } init_output;
  // >= 0: the tensors are on this CUDA device and the call runs a one-sided
  // plan straight on them (CUDA IPC between the ranks, no staging); the
  // plan is `device_algorithm`.
  int device = -1;
  const char* device_algorithm = nullptr;
};

using detail::StageDir;

// Device tensors on a group whose ranks share a host run a one-sided plan
// directly on device memory: peers open each other's buffers through CUDA
// IPC and the plan's steps become kernels (device_steps.hpp). This is the
// algorithm each collective uses there by default, and the ones a caller
// may name; anything else (and groups spanning hosts) goes through pinned
// host stand-ins instead. Plans here must need no Scratch.
struct DeviceAlgorithms {
  Collective coll;
  const char* fallback;                   // when the caller names none
  std::initializer_list<const char*> named;  // also accepted by name
};
constexpr DeviceAlgorithms kDeviceAlgorithms[] = {
    {Collective::AllReduce, "push", {"push", "twoshot"}},
    {Collective::Broadcast, "peer_read", {"peer_read"}},
    {Collective::AllGather, "peer_read", {"peer_read"}},
    {Collective::ReduceScatter, "peer_read", {"peer_read"}},
};

struct Named {
  const Tensor* t;
  const char* name;  // for error messages
};

// Whether c runs directly on device memory (see above); sets c.device and
// c.device_algorithm when it does. Every rank decides alike when the ranks
// pass alike arguments (tensor kinds, algorithm name); a rank passing host
// memory where a peer passes device memory gets an error naming the peer.
bool direct_device(Call& c, const OpOptions& o, std::initializer_list<Named> tensors) {
  const auto& g = *c.group;
  if (!g.shared_memory || g.ranks.size() < 2) return false;
  int device = -1;
  for (const auto& [t, name] : tensors) {
    if (!t->device.is_cuda() || t->count <= 0) return false;
    if (device >= 0 && t->device.index != device) return false;  // staging names the mismatch
    device = t->device.index;
  }
  for (const auto& d : kDeviceAlgorithms) {
    if (d.coll != c.coll) continue;
    const char* name = d.fallback;
    if (o.algorithm) {
      name = nullptr;
      for (const char* n : d.named)
        if (std::strcmp(n, o.algorithm) == 0) name = n;
      if (!name) return false;
    }
    for (const auto& [t, tname] : tensors) {
      check_tensor(*t, tname, c.what);
      // Memory CUDA IPC cannot share (managed, a stream-ordered pool's, the
      // virtual memory API's) is staged. A peer that goes direct meanwhile
      // gets an error naming this rank (one_sided.cpp checks every buffer).
      const cuda::PointerInfo info = detail::check_device_memory(*t, tname, c.what);
      if (info.kind != cuda::MemoryKind::Device || !info.ipc_capable) return false;
    }
    c.device = device;
    c.device_algorithm = name;
    return true;
  }
  return false;
}

// dst = src on a device's stream.
void copy_on_device(int device, void* stream, void* dst, const void* src, std::size_t bytes) {
  cuda::DeviceGuard on(device);
  cuda::copy(dst, src, bytes, stream);
}

// The same, on the call's device and stream, deferred: a direct device
// call's copy before its plan (the root's or own block into Output).
std::function<void()> device_copy(const Call& c, void* dst, const void* src, std::size_t bytes) {
  if (dst == src) return {};
  return [dst, src, bytes, device = c.device, stream = c.stream] { copy_on_device(device, stream, dst, src, bytes); };
}

detail::DeviceStaging& staging_of(Call& c) {
  if (!c.staging) c.staging = std::make_shared<detail::DeviceStaging>(c.stream, c.what);
  return *c.staging;
}

// The tensor the plan works on in t's place: t, or its pinned stand-in.
Tensor stage(Call& c, const Tensor& t, StageDir dir, const char* name) {
  if (t.device.is_cpu()) return t;
  return staging_of(c).stage(t, dir, name);
}

std::vector<Tensor> stage_list(Call& c, const std::vector<Tensor>& list, StageDir dir, const char* name) {
  bool host = true;
  for (const Tensor& t : list) host = host && t.device.is_cpu();
  if (host) return list;
  return staging_of(c).stage_list(list, dir, name);
}

const std::shared_ptr<detail::GroupImpl>& group_of(const OpOptions& o, const char* op) {
  op_group(o, op);  // checks validity and membership
  return o.group ? o.group->impl() : context().world.impl();
}

void same_dtype(const Tensor& a, const Tensor& b, const char* a_name, const char* b_name, const char* op) {
  if (a.dtype != b.dtype)
    fail(ErrorCode::InvalidArgument, "{}: {} has dtype {} but {} has {}: expected the same dtype", op,
         a_name, dtype_name(a.dtype), b_name, dtype_name(b.dtype));
}

void need_count(std::int64_t got, std::int64_t want, const char* what, const char* why, const char* op) {
  if (got != want)
    fail(ErrorCode::InvalidArgument, "{}: {} has {} elements: expected {} ({})", op, what, got, want, why);
}

void copy_bytes(void* dst, const void* src, std::size_t n) {
  if (n && dst != src) std::memmove(dst, src, n);
}

// A list of n tensors of `count` elements each: checked, and either used in
// place (when it already is one contiguous block in order) or staged.
struct ListView {
  char* base = nullptr;
  bool staged = false;
};
ListView list_view(Call& c, const std::vector<Tensor>& list, int n, std::int64_t count, const Tensor& like,
                   const char* name) {
  if (static_cast<int>(list.size()) != n)
    fail(ErrorCode::InvalidArgument, "{}: {} has {} tensors: expected {} (the group size)", c.what, name,
         list.size(), n);
  bool contiguous = true;
  const std::size_t bytes = static_cast<std::size_t>(count) * dtype_size(like.dtype);
  for (int i = 0; i < n; ++i) {
    const Tensor& t = list[static_cast<std::size_t>(i)];
    check_tensor(t, name, c.what);
    same_dtype(t, like, name, "the other tensor", c.what);
    need_count(t.count, count, name, "every entry matches the single tensor", c.what);
    if (static_cast<char*>(t.data) != static_cast<char*>(list[0].data) + static_cast<std::size_t>(i) * bytes)
      contiguous = false;
  }
  if (contiguous && n > 0) return {static_cast<char*>(list[0].data), false};
  auto b = alloc(bytes * static_cast<std::size_t>(n));
  c.keep.push_back(b);
  return {b.get(), true};
}

// Copies block i of a staged contiguous buffer out to list[i].
void scatter_out(const std::vector<Tensor>& list, const char* base, std::size_t bytes) {
  for (std::size_t i = 0; i < list.size(); ++i) copy_bytes(list[i].data, base + i * bytes, bytes);
}

// Copies list[i] into block i of a staging buffer.
void gather_in(char* base, const std::vector<Tensor>& list, std::size_t bytes) {
  for (std::size_t i = 0; i < list.size(); ++i) copy_bytes(base + i * bytes, list[i].data, bytes);
}

void avg_after(Call& c, void* out, std::int64_t count, bool applies) {
  if (c.op != ReduceOp::Avg || !applies) return;
  const int n = static_cast<int>(c.group->ranks.size());
  const DType dt = c.dtype;
  auto prev = c.after;
  c.after = [prev, out, count, dt, n, device = c.device, stream = c.stream] {
    if (prev) prev();
    if (device < 0) return reduction::scale_avg(out, count, dt, n);
    cuda::DeviceGuard on(device);
    cuda::scale_avg(out, count, dt, n, stream);
  };
}

// What a call was given at issue, on the caller's thread: its sequence
// number (message plans' tags) or turn (plans the one-sided runner runs),
// and its deadline. Issue order is what all ranks agree on.
struct Issued {
  std::uint64_t seq = 0, ticket = 0;
  Millis timeout{0};
  Deadline deadline;
};

// Runs an issued call to completion (on the caller's thread, or the async
// runner's).
void run_issued(const Call& c, const CompiledPlan& compiled, const Issued& at, Engine& engine,
                detail::DeviceStaging* staging, bool async) {
  ExecCall call{&compiled, c.group, c.buffers, c.dtype, c.op, at.seq, at.timeout, at.deadline, c.what,
                at.ticket, c.device, c.stream};
  try {
    if (staging) staging->wait_inputs(at.deadline);
    if (const auto& in = c.init_output; in.bytes && in.dst != in.src) {
      if (c.device >= 0) copy_on_device(c.device, c.stream, in.dst, in.src, in.bytes);
      else copy_bytes(in.dst, in.src, in.bytes);
    }
    if (c.before) c.before();
  } catch (...) {
    // The call holds a turn it will not run: later calls on the group
    // would wait for it until their deadlines. Hand it on, failed.
    if (compiled.runs_one_sided()) abandon_one_sided(engine, call, std::current_exception());
    throw;
  }
  execute(engine, call);
  if (c.after) c.after();
  if (c.device >= 0 && async) {
    // An async Work completes once its device work has (polled, so that
    // the op's deadline holds).
    cuda::DeviceGuard on(c.device);
    while (!cuda::stream_done(c.stream)) {
      if (at.deadline.expired())
        fail(ErrorCode::Timeout, "{}: its device work on the CUDA stream did not finish before the timeout", c.what);
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  }
  if (staging) {
    staging->end();  // results back to the device, in stream order
    // An async Work completes only once they are there.
    if (async && staging->settle(at.deadline, at.deadline))
      if (auto e = staging->error()) std::rethrow_exception(e);
  }
}

// The plans this thread used last, and for what: a loop of a few small
// collectives finds its plan by comparing a few words, with no lock and no
// plan-cache key to build. Only host calls without splits: their plans
// depend on nothing but these and what the group fixes (its size, this
// rank's place, which host each rank is on, shared memory or not).
struct RecentPlan {
  std::uint64_t group = 0;  // GroupImpl::serial
  plan::Collective coll{};
  std::int64_t count = -1;
  std::size_t elem = 0;
  int root = -1;
  bool mapped = false;  // OpOptions::shareable_buffers
  // The algorithm asked for, copied: the caller's string may be gone by the
  // next call (a name of that length needs no allocation).
  bool named = false;
  std::string name;
  std::shared_ptr<const CompiledPlan> plan;

  bool same(const Call& c, std::size_t elem_size, const char* asked, bool mapped_buffers) const {
    return plan && group == c.group->serial && coll == c.coll && count == c.count && elem == elem_size &&
           root == c.root && mapped == mapped_buffers && (asked ? named && name == asked : !named);
  }
};
struct RecentPlans {
  std::array<RecentPlan, 4> slots;
  std::size_t next = 0;                          // the slot to replace
  std::shared_ptr<const CompiledPlan> unkeyed;   // the last device or splits call's
};

// The compiled plan for c. Valid until this thread's next call of it: an
// async call keeps a copy.
const std::shared_ptr<const CompiledPlan>& plan_for(Call& c, const OpOptions& o, Millis timeout) {
  const auto& g = *c.group;
  const std::size_t elem = dtype_size(c.dtype);
  const char* name = c.device >= 0 ? c.device_algorithm : o.algorithm;
  const bool plain = c.device < 0 && c.splits.empty();
  RecentPlans& recent = per_thread<RecentPlans>();
  const bool mapped = o.shareable_buffers && g.shared_memory;
  if (plain)
    for (const RecentPlan& r : recent.slots)
      if (r.same(c, elem, name, mapped)) return r.plan;
  plan::PlanArgs args;
  args.coll = c.coll;
  args.nranks = static_cast<int>(g.ranks.size());
  args.count = c.count;
  args.elem_size = elem;
  args.root = c.root;
  args.splits = std::move(c.splits);
  args.topology.one_host = g.shared_memory;
  Engine& engine = *op_context(o).engine;
  args.topology.shared_cpus = g.shared_memory && engine.oversubscribed();
  args.topology.mapped_buffers = mapped;
  if (c.device >= 0)
    args.topology.device_of = device_topology(engine, *c.group, c.device, Deadline::after(timeout), c.what);
  auto p = get_plan(args, g.my_rank, name, g.shared_memory, &g.host_of);
  if (!plain) return recent.unkeyed = std::move(p);
  RecentPlan& slot = recent.slots[recent.next++ % recent.slots.size()];
  slot = {g.serial, c.coll, c.count, elem, c.root, mapped, name != nullptr, name ? name : "", std::move(p)};
  return slot.plan;
}

Work run(Call&& c, const OpOptions& o) {
  Context& ctx = op_context(o);
  Issued at;
  at.timeout = op_timeout(o);
  const std::shared_ptr<const CompiledPlan>& compiled = plan_for(c, o, at.timeout);
  if (c.device >= 0 && (!compiled->plan->one_sided || compiled->steps().scratch_count > 0))
    fail(ErrorCode::Internal, "{}: algorithm {} is not a one-sided plan without Scratch, as device memory needs",
         c.what, compiled->plan->algorithm);
  if (compiled->plan->reads_input) {
    if (c.coll != Collective::AllGather) c.buffers.input = c.contribution;  // all-gather's Input is it already
    c.init_output = {};
  }
  // Message plans take a sequence number, plans the one-sided runner runs a
  // turn; every rank runs the same kind of plan for the same call, so both
  // counters stay alike across ranks.
  // Taken last, after everything here that may throw: a turn taken and not
  // run would hold up the group's later calls (run_issued hands on one
  // whose set-up fails).
  auto take = [&] {
    // The other counter is read too: with it a call's identity
    // (executor.hpp, call_identity) is the same on every rank whichever
    // way each runs it.
    if (compiled->runs_one_sided()) {
      at.ticket = c.group->one_sided_issued.fetch_add(1, std::memory_order_relaxed);
      at.seq = c.group->collective_seq.load(std::memory_order_relaxed);
    } else {
      at.seq = c.group->collective_seq.fetch_add(1, std::memory_order_relaxed);
      at.ticket = c.group->one_sided_issued.load(std::memory_order_relaxed);
    }
    at.deadline = Deadline::after_coarse(at.timeout);
  };
  Engine& engine = *ctx.engine;
  // Device tensors: copies to their stand-ins are enqueued now, at issue, on
  // options.stream, so the op reads what the stream's earlier work left.
  auto staging = c.staging && c.staging->active() ? c.staging : nullptr;
  if (staging) staging->begin();
  if (!o.async_op) {
    take();
    run_issued(c, *compiled, at, engine, staging.get(), false);
    return Work();
  }
  c.hold = group_of(o, c.what);
  auto w = std::make_shared<CollectiveWork>();
  std::lock_guard issue(ctx.issue_mu);
  if (!ctx.runner) ctx.runner = std::make_unique<AsyncRunner>(ctx.runner_cpu);
  take();
  w->op_deadline = at.deadline;
  ctx.runner->submit([w, c = std::move(c), compiled = compiled, at, engine = &engine, staging]() mutable {
    try {
      run_issued(c, *compiled, at, *engine, staging.get(), true);
      w->finish(nullptr);
    } catch (...) {
      w->finish(std::current_exception());
    }
  });
  return Work(std::move(w));
}

// Whether two tensors share any byte (device tensors: of one device).
bool overlaps(const Tensor& a, const Tensor& b) {
  const auto* x = static_cast<const char*>(a.data);
  const auto* y = static_cast<const char*>(b.data);
  return a.nbytes() > 0 && b.nbytes() > 0 && x < y + b.nbytes() && y < x + a.nbytes();
}

int root_of(const Call& c, int global_root, const char* name) {
  check_member(*c.group, global_root, name, c.what);
  return c.group->group_of_global[static_cast<std::size_t>(global_root)];
}

Call make(Collective coll, const char* what, const OpOptions& o) {
  Call c;
  c.coll = coll;
  c.what = what;
  c.group = group_of(o, what).get();
  c.stream = o.stream;
  return c;
}

}  // namespace

Work barrier(const OpOptions& o) {
  Call c = make(Collective::Barrier, "barrier", o);
  return run(std::move(c), o);
}

Work broadcast(const Tensor& t, int src, const OpOptions& o) { return broadcast(t, t, src, o); }

Work broadcast(const Tensor& input_arg, const Tensor& output_arg, int src, const OpOptions& o) {
  Call c = make(Collective::Broadcast, "broadcast", o);
  const bool root = root_of(c, src, "src") == c.group->my_rank;
  const bool direct = root ? direct_device(c, o, {{&input_arg, "input"}, {&output_arg, "output"}})
                           : direct_device(c, o, {{&output_arg, "output"}});
  const Tensor input = root && !direct ? stage(c, input_arg, StageDir::In, "input") : input_arg;
  const Tensor output = direct ? output_arg
                        : root && input_arg.data == output_arg.data  // in place: the root's stays as it is
                            ? input
                            : stage(c, output_arg, StageDir::Out, "output");
  check_tensor(output, "output", c.what);
  c.root = root_of(c, src, "src");
  const bool is_root = c.root == c.group->my_rank;
  if (is_root) {
    check_tensor(input, "input", c.what);
    same_dtype(input, output, "input", "output", c.what);
    need_count(output.count, input.count, "output", "the same as input", c.what);
  }
  c.dtype = output.dtype;
  c.count = output.count;
  c.buffers.output = output.data;
  if (is_root && input.data != output.data)
    c.before = direct ? device_copy(c, output.data, input.data, output.nbytes())
                      : [=] { copy_bytes(output.data, input.data, output.nbytes()); };
  return run(std::move(c), o);
}

Work all_reduce(const Tensor& t, ReduceOp op, const OpOptions& o) { return all_reduce(t, t, op, o); }

Work all_reduce(const Tensor& input_arg, const Tensor& output_arg, ReduceOp op, const OpOptions& o) {
  Call c = make(Collective::AllReduce, "all_reduce", o);
  const bool direct = direct_device(c, o, {{&input_arg, "input"}, {&output_arg, "output"}});
  const Tensor input = direct ? input_arg : stage(c, input_arg, StageDir::In, "input");
  const Tensor output = direct ? output_arg : stage(c, output_arg, StageDir::Out, "output");
  check_tensor(input, "input", c.what);
  check_tensor(output, "output", c.what);
  same_dtype(input, output, "input", "output", c.what);
  need_count(output.count, input.count, "output", "the same as input", c.what);
  reduction::check_op(input.dtype, op);
  c.dtype = input.dtype;
  c.op = op;
  c.count = input.count;
  c.buffers.output = output.data;
  c.contribution = input.data;
  if (input.data != output.data)
    c.init_output = {output.data, input.data, input.nbytes()};
  avg_after(c, output.data, output.count, true);
  return run(std::move(c), o);
}

Work reduce(const Tensor& t, int dst, ReduceOp op, const OpOptions& o) { return reduce(t, t, dst, op, o); }

Work reduce(const Tensor& input_arg, const Tensor& output_arg, int dst, ReduceOp op, const OpOptions& o) {
  Call c = make(Collective::Reduce, "reduce", o);
  const Tensor input = stage(c, input_arg, StageDir::In, "input");
  const Tensor output = root_of(c, dst, "dst") == c.group->my_rank
                            ? stage(c, output_arg, StageDir::Out, "output")
                            : output_arg;  // not used off the root
  check_tensor(input, "input", c.what);
  reduction::check_op(input.dtype, op);
  c.root = root_of(c, dst, "dst");
  c.dtype = input.dtype;
  c.op = op;
  c.count = input.count;
  if (c.root == c.group->my_rank) {
    check_tensor(output, "output", c.what);
    same_dtype(input, output, "input", "output", c.what);
    need_count(output.count, input.count, "output", "the same as input", c.what);
    c.buffers.output = output.data;
    c.contribution = input.data;
    if (input.data != output.data) c.init_output = {output.data, input.data, input.nbytes()};
    avg_after(c, output.data, output.count, true);
  } else {
    // A non-root's data is only an input: the plan works on a private copy.
    auto b = alloc(input.nbytes());
    c.keep.push_back(b);
    c.buffers.output = b.get();
    c.contribution = input.data;
    c.init_output = {b.get(), input.data, input.nbytes()};
  }
  return run(std::move(c), o);
}

Work all_gather_into_tensor(const Tensor& output_arg, const Tensor& input_arg, const OpOptions& o) {
  Call c = make(Collective::AllGather, "all_gather_into_tensor", o);
  // In place means the input is exactly this rank's block of the output;
  // anywhere else inside it, the plans would read it while peers' blocks
  // overwrite it.
  const char* own = static_cast<const char*>(output_arg.data) +
                    static_cast<std::size_t>(c.group->my_rank) * input_arg.nbytes();
  if (overlaps(input_arg, output_arg) && input_arg.data != own)
    fail(ErrorCode::InvalidArgument,
         "{}: the input overlaps the output but is not this rank's block of it (byte offset {} of the output, "
         "where in place it must be at {}: rank {} x {} bytes)",
         c.what, static_cast<const char*>(input_arg.data) - static_cast<const char*>(output_arg.data),
         own - static_cast<const char*>(output_arg.data), c.group->my_rank, input_arg.nbytes());
  const bool direct = direct_device(c, o, {{&input_arg, "input"}, {&output_arg, "output"}});
  const Tensor output = direct ? output_arg : stage(c, output_arg, StageDir::Out, "output");  // first: input may lie inside it
  const Tensor input = direct ? input_arg : stage(c, input_arg, StageDir::In, "input");
  check_tensor(input, "input", c.what);
  check_tensor(output, "output", c.what);
  same_dtype(input, output, "input", "output", c.what);
  const auto n = static_cast<std::int64_t>(c.group->ranks.size());
  need_count(output.count, n * input.count, "output", "group size x input", c.what);
  c.dtype = input.dtype;
  c.count = input.count;
  c.buffers.input = input.data;
  c.buffers.output = output.data;
  char* mine = static_cast<char*>(output.data) + static_cast<std::size_t>(c.group->my_rank) * input.nbytes();
  // The own block, unless the plan copies it (Plan::reads_input).
  if (direct) c.before = device_copy(c, mine, input.data, input.nbytes());
  else c.init_output = {mine, input.data, input.nbytes()};
  return run(std::move(c), o);
}

Work all_gather(const std::vector<Tensor>& outputs_arg, const Tensor& input_arg, const OpOptions& o) {
  Call c = make(Collective::AllGather, "all_gather", o);
  const auto outputs = stage_list(c, outputs_arg, StageDir::Out, "outputs");
  const Tensor input = stage(c, input_arg, StageDir::In, "input");
  check_tensor(input, "input", c.what);
  const int n = static_cast<int>(c.group->ranks.size());
  ListView out = list_view(c, outputs, n, input.count, input, "outputs");
  c.dtype = input.dtype;
  c.count = input.count;
  c.buffers.input = input.data;
  c.buffers.output = out.base;
  const std::size_t bytes = input.nbytes();
  char* mine = out.base + static_cast<std::size_t>(c.group->my_rank) * bytes;
  c.init_output = {mine, input.data, bytes};  // unless the plan copies it (Plan::reads_input)
  if (out.staged) c.after = [=, outputs = outputs] { scatter_out(outputs, out.base, bytes); };
  return run(std::move(c), o);
}

Work gather(const Tensor& input_arg, const std::vector<Tensor>* outputs_arg, int dst, const OpOptions& o) {
  Call c = make(Collective::Gather, "gather", o);
  std::vector<Tensor> staged_outputs;
  const std::vector<Tensor>* outputs = outputs_arg;
  if (outputs_arg && root_of(c, dst, "dst") == c.group->my_rank) {
    staged_outputs = stage_list(c, *outputs_arg, StageDir::Out, "outputs");
    outputs = &staged_outputs;
  }
  const Tensor input = stage(c, input_arg, StageDir::In, "input");
  check_tensor(input, "input", c.what);
  c.root = root_of(c, dst, "dst");
  c.dtype = input.dtype;
  c.count = input.count;
  c.buffers.input = input.data;
  const int n = static_cast<int>(c.group->ranks.size());
  if (c.root == c.group->my_rank) {
    if (!outputs)
      fail(ErrorCode::InvalidArgument, "gather: the destination rank must pass a list of {} output tensors", n);
    ListView out = list_view(c, *outputs, n, input.count, input, "outputs");
    const std::size_t bytes = input.nbytes();
    c.buffers.output = out.base;
    char* mine = out.base + static_cast<std::size_t>(c.root) * bytes;
    c.before = [=] { copy_bytes(mine, input.data, bytes); };
    if (out.staged) c.after = [=, outputs = *outputs] { scatter_out(outputs, out.base, bytes); };
  } else if (outputs) {
    fail(ErrorCode::InvalidArgument, "gather: outputs must be null on ranks other than dst ({})", dst);
  }
  return run(std::move(c), o);
}

Work scatter(const Tensor& output_arg, const std::vector<Tensor>* inputs_arg, int src, const OpOptions& o) {
  Call c = make(Collective::Scatter, "scatter", o);
  std::vector<Tensor> staged_inputs;
  const std::vector<Tensor>* inputs = inputs_arg;
  if (inputs_arg && root_of(c, src, "src") == c.group->my_rank) {
    staged_inputs = stage_list(c, *inputs_arg, StageDir::In, "inputs");
    inputs = &staged_inputs;
  }
  const Tensor output = stage(c, output_arg, StageDir::Out, "output");
  check_tensor(output, "output", c.what);
  c.root = root_of(c, src, "src");
  c.dtype = output.dtype;
  c.count = output.count;
  c.buffers.output = output.data;
  const int n = static_cast<int>(c.group->ranks.size());
  if (c.root == c.group->my_rank) {
    if (!inputs)
      fail(ErrorCode::InvalidArgument, "scatter: the source rank must pass a list of {} input tensors", n);
    ListView in = list_view(c, *inputs, n, output.count, output, "inputs");
    const std::size_t bytes = output.nbytes();
    c.buffers.input = in.base;
    const int me = c.root;
    c.before = [=, inputs = *inputs] {
      if (in.staged) gather_in(in.base, inputs, bytes);
      copy_bytes(output.data, in.base + static_cast<std::size_t>(me) * bytes, bytes);
    };
  } else if (inputs) {
    fail(ErrorCode::InvalidArgument, "scatter: inputs must be null on ranks other than src ({})", src);
  }
  return run(std::move(c), o);
}

Work reduce_scatter_tensor(const Tensor& output_arg, const Tensor& input_arg, ReduceOp op, const OpOptions& o) {
  Call c = make(Collective::ReduceScatter, "reduce_scatter_tensor", o);
  // In place (output inside input) is staged: the plans read Input while
  // writing Output, and device memory has no private buffer to spare.
  const bool direct = !overlaps(input_arg, output_arg) &&
                      direct_device(c, o, {{&input_arg, "input"}, {&output_arg, "output"}});
  const Tensor input = direct ? input_arg : stage(c, input_arg, StageDir::In, "input");  // first: output may lie inside it
  const Tensor output = direct ? output_arg : stage(c, output_arg, StageDir::Out, "output");
  check_tensor(input, "input", c.what);
  check_tensor(output, "output", c.what);
  same_dtype(input, output, "input", "output", c.what);
  reduction::check_op(input.dtype, op);
  const auto n = static_cast<std::int64_t>(c.group->ranks.size());
  need_count(input.count, n * output.count, "input", "group size x output", c.what);
  c.dtype = input.dtype;
  c.op = op;
  c.count = output.count;
  c.buffers.input = input.data;
  c.buffers.output = output.data;
  // In place (output is this rank's block of input, as NCCL allows): plans
  // read Input while writing Output, so the result goes to a private buffer.
  const auto* in_b = static_cast<const char*>(input.data);
  const auto* out_b = static_cast<const char*>(output.data);
  if (output.count > 0 && out_b < in_b + input.nbytes() && in_b < out_b + output.nbytes()) {
    auto b = alloc(output.nbytes());
    c.keep.push_back(b);
    c.buffers.output = b.get();
    c.after = [=] { copy_bytes(output.data, b.get(), output.nbytes()); };
  }
  avg_after(c, output.data, output.count, true);
  return run(std::move(c), o);
}

Work reduce_scatter(const Tensor& output_arg, const std::vector<Tensor>& inputs_arg, ReduceOp op, const OpOptions& o) {
  Call c = make(Collective::ReduceScatter, "reduce_scatter", o);
  const auto inputs = stage_list(c, inputs_arg, StageDir::In, "inputs");
  const Tensor output = stage(c, output_arg, StageDir::Out, "output");
  check_tensor(output, "output", c.what);
  reduction::check_op(output.dtype, op);
  const int n = static_cast<int>(c.group->ranks.size());
  ListView in = list_view(c, inputs, n, output.count, output, "inputs");
  c.dtype = output.dtype;
  c.op = op;
  c.count = output.count;
  c.buffers.input = in.base;
  c.buffers.output = output.data;
  const std::size_t bytes = output.nbytes();
  if (in.staged) c.before = [=, inputs = inputs] { gather_in(in.base, inputs, bytes); };
  avg_after(c, output.data, output.count, true);
  return run(std::move(c), o);
}

namespace {

// All-to-all over contiguous buffers with per-peer element counts.
// `even`: the caller passed no splits, so every rank's blocks are alike. A
// rank cannot tell that from splits it was given: its own row and column may
// be even while another rank's are not, and all ranks must run one plan.
Work all_to_all_impl(Call c, const Tensor& output, const Tensor& input, void* out_base, const void* in_base,
                     const std::vector<std::int64_t>& out_splits, const std::vector<std::int64_t>& in_splits,
                     bool even, const OpOptions& o) {
  const int n = static_cast<int>(c.group->ranks.size());
  const int me = c.group->my_rank;
  c.dtype = input.dtype;
  c.buffers.input = in_base;
  c.buffers.output = out_base;
  const std::size_t es = dtype_size(input.dtype);
  const auto in_off = std::accumulate(in_splits.begin(), in_splits.begin() + me, std::int64_t{0});
  const auto out_off = std::accumulate(out_splits.begin(), out_splits.begin() + me, std::int64_t{0});
  if (in_splits[static_cast<std::size_t>(me)] != out_splits[static_cast<std::size_t>(me)])
    fail(ErrorCode::InvalidArgument, "{}: the block a rank sends itself must match the one it receives: "
         "input split {} but output split {} at rank {}", c.what, in_splits[static_cast<std::size_t>(me)],
         out_splits[static_cast<std::size_t>(me)], me);
  if (even) {
    c.count = n ? in_splits[0] : 0;
  } else {
    // This rank's plan needs only its own row (what it sends) and column
    // (what it receives); other ranks build theirs from their own splits.
    c.splits.assign(static_cast<std::size_t>(n), std::vector<std::int64_t>(static_cast<std::size_t>(n), 0));
    for (int j = 0; j < n; ++j) c.splits[static_cast<std::size_t>(me)][static_cast<std::size_t>(j)] = in_splits[static_cast<std::size_t>(j)];
    for (int i = 0; i < n; ++i) c.splits[static_cast<std::size_t>(i)][static_cast<std::size_t>(me)] = out_splits[static_cast<std::size_t>(i)];
  }
  auto prev = c.before;
  const std::size_t own = static_cast<std::size_t>(in_splits[static_cast<std::size_t>(me)]) * es;
  c.before = [=] {
    if (prev) prev();
    copy_bytes(static_cast<char*>(out_base) + static_cast<std::size_t>(out_off) * es,
               static_cast<const char*>(in_base) + static_cast<std::size_t>(in_off) * es, own);
  };
  (void)output;
  return run(std::move(c), o);
}

std::vector<std::int64_t> check_splits(const char* what, const std::vector<std::int64_t>& s, int n,
                                       std::int64_t total, const char* name) {
  if (s.empty()) {
    if (total % n != 0)
      fail(ErrorCode::InvalidArgument, "{}: {} elements do not split evenly over {} ranks: pass splits or "
           "a multiple of the group size", what, total, n);
    return std::vector<std::int64_t>(static_cast<std::size_t>(n), total / n);
  }
  if (static_cast<int>(s.size()) != n)
    fail(ErrorCode::InvalidArgument, "{}: {} has {} entries: expected {} (the group size)", what, name, s.size(), n);
  std::int64_t sum = 0;
  for (auto v : s) {
    if (v < 0) fail(ErrorCode::InvalidArgument, "{}: {} has a negative entry ({})", what, name, v);
    sum += v;
  }
  if (sum != total)
    fail(ErrorCode::InvalidArgument, "{}: {} add up to {} elements but the tensor has {}", what, name, sum, total);
  return s;
}

}  // namespace

Work all_to_all_single(const Tensor& output, const Tensor& input, const OpOptions& o) {
  return all_to_all_single(output, input, {}, {}, o);
}

Work all_to_all_single(const Tensor& output_arg, const Tensor& input_arg, const std::vector<std::int64_t>& output_splits,
                       const std::vector<std::int64_t>& input_splits, const OpOptions& o) {
  Call c = make(Collective::AllToAll, "all_to_all_single", o);
  const Tensor input = stage(c, input_arg, StageDir::In, "input");
  const Tensor output = stage(c, output_arg, StageDir::Out, "output");
  check_tensor(input, "input", c.what);
  check_tensor(output, "output", c.what);
  same_dtype(input, output, "input", "output", c.what);
  const int n = static_cast<int>(c.group->ranks.size());
  auto in_s = check_splits(c.what, input_splits, n, input.count, "input_splits");
  auto out_s = check_splits(c.what, output_splits, n, output.count, "output_splits");
  if (input.data == output.data && input.count > 0)
    fail(ErrorCode::InvalidArgument, "all_to_all_single: input and output must be different buffers");
  const bool even = input_splits.empty() && output_splits.empty();
  return all_to_all_impl(std::move(c), output, input, output.data, input.data, out_s, in_s, even, o);
}

Work all_to_all(const std::vector<Tensor>& outputs_arg, const std::vector<Tensor>& inputs_arg, const OpOptions& o) {
  Call c = make(Collective::AllToAll, "all_to_all", o);
  const auto inputs = stage_list(c, inputs_arg, StageDir::In, "inputs");
  const auto outputs = stage_list(c, outputs_arg, StageDir::Out, "outputs");
  const int n = static_cast<int>(c.group->ranks.size());
  if (static_cast<int>(inputs.size()) != n || static_cast<int>(outputs.size()) != n)
    fail(ErrorCode::InvalidArgument, "all_to_all: {} inputs and {} outputs: expected {} of each (the group size)",
         inputs.size(), outputs.size(), n);
  std::vector<std::int64_t> in_s(static_cast<std::size_t>(n)), out_s(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) {
    const auto& a = inputs[static_cast<std::size_t>(i)];
    const auto& b = outputs[static_cast<std::size_t>(i)];
    check_tensor(a, "inputs", c.what);
    check_tensor(b, "outputs", c.what);
    same_dtype(a, inputs[0], "inputs", "inputs[0]", c.what);
    same_dtype(b, inputs[0], "outputs", "inputs[0]", c.what);
    in_s[static_cast<std::size_t>(i)] = a.count;
    out_s[static_cast<std::size_t>(i)] = b.count;
  }
  const std::size_t es = dtype_size(inputs[0].dtype);
  const auto in_total = std::accumulate(in_s.begin(), in_s.end(), std::int64_t{0});
  const auto out_total = std::accumulate(out_s.begin(), out_s.end(), std::int64_t{0});
  auto in_b = alloc(static_cast<std::size_t>(in_total) * es + 1);
  auto out_b = alloc(static_cast<std::size_t>(out_total) * es + 1);
  c.keep = {in_b, out_b};
  c.before = [=, inputs = inputs] {
    std::size_t off = 0;
    for (const auto& t : inputs) {
      copy_bytes(in_b.get() + off, t.data, t.nbytes());
      off += t.nbytes();
    }
  };
  c.after = [=, outputs = outputs] {
    std::size_t off = 0;
    for (const auto& t : outputs) {
      copy_bytes(t.data, out_b.get() + off, t.nbytes());
      off += t.nbytes();
    }
  };
  Tensor in_t = inputs[0], out_t = outputs[0];
  // Tensor sizes may differ from rank to rank, as splits do: never "even".
  return all_to_all_impl(std::move(c), out_t, in_t, out_b.get(), in_b.get(), out_s, in_s, false, o);
}

}  // namespace braid
