// Issue order, turns and the plan memo: how a resolved Call (call.hpp) runs.
//
// Every rank issues a group's calls in the same order; a call takes a
// sequence number (message plans' tags) or a turn (plans the one-sided
// runner runs) at issue, on the caller's thread, and runs there or on the
// async runner in that order. The plan comes from a small per-thread memo
// before the plan cache: a loop of small collectives builds no key.
#include <array>
#include <memory>
#include <string>
#include <thread>

#include "cuda_kernels/cuda.hpp"
#include "src/common/errors.hpp"
#include "src/common/per_thread.hpp"
#include "src/runtime/async_runner.hpp"
#include "src/runtime/call.hpp"
#include "src/runtime/device_topology.hpp"
#include "src/runtime/plan_cache.hpp"

namespace braid::detail {

// dst = src on a device's stream.
void copy_on_device(int device, void* stream, void* dst, const void* src, std::size_t bytes) {
  cuda::DeviceGuard on(device);
  cuda::copy(dst, src, bytes, stream);
}


namespace {

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
    engine.check_issue(c.group->id);  // a group that lost a member runs nothing more
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
  args.topology.rdma = g.window_kind == "verbs";
  args.topology.host_shares_memory = g.host_shares_memory;
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

// Call::output_list: the blocks straight into the list's tensors, or
// through staging and copied out after.
void place_list_output(Call& c, const CompiledPlan& p) {
  const std::size_t bytes = static_cast<std::size_t>(c.count) * dtype_size(c.dtype);
  const auto n = c.output_list.size();
  const auto me = static_cast<std::size_t>(c.group->my_rank);
  if (p.output_in_blocks) {
    c.buffers.output = c.output_list[0];
    c.buffers.output_blocks = c.output_list.data();
    c.buffers.block_count = c.count;
    c.buffers.nblocks = static_cast<std::int64_t>(n);
    c.init_output.dst = c.output_list[me];
    return;
  }
  Bytes b = alloc(bytes * n);
  c.keep.push_back(b);
  c.buffers.output = b.get();
  c.init_output.dst = b.get() + me * bytes;
  auto prev = std::move(c.after);
  c.after = [list = c.output_list, base = b.get(), bytes, prev = std::move(prev)] {
    for (std::size_t i = 0; i < list.size(); ++i) copy_bytes(list[i], base + i * bytes, bytes);
    if (prev) prev();
  };
}

}  // namespace

Work run(Call&& c, const OpOptions& o) {
  Context& ctx = op_context(o);
  Issued at;
  at.timeout = op_timeout(o);
  const std::shared_ptr<const CompiledPlan>& compiled = plan_for(c, o, at.timeout);
  if (c.device >= 0 && (!compiled->plan->one_sided || compiled->steps().scratch_count > 0))
    fail(ErrorCode::Internal, "{}: algorithm {} is not a one-sided plan without Scratch, as device memory needs",
         c.what, compiled->plan->algorithm);
  if (!c.output_list.empty()) place_list_output(c, *compiled);
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
  w->job = ctx.runner->submit_claimable([w, c = std::move(c), compiled = compiled, at, engine = &engine,
                                         staging]() mutable {
    try {
      run_issued(c, *compiled, at, *engine, staging.get(), true);
      w->finish(nullptr);
    } catch (...) {
      w->finish(std::current_exception());
    }
  });
  return Work(std::move(w));
}

}  // namespace braid::detail
