// The executor for one-sided plans (Signal, Wait, Get, GetReduce, Put, plus
// local Copy and Reduce): ranks reading and writing each other's memory
// through the group's window (transports/one_sided.hpp) instead of
// exchanging messages. No engine mutex and no matching. The runner is a
// template over the concrete window, looked up once per group, so its hot
// loop makes no virtual call. On one host (shm::Window) a Signal is one
// store into the peer's block, a Wait polls a counter in ours, a Get of
// shareable memory is a load from a mapping (Window::map); other memory is
// reached with the window's get and put (process_vm_readv and writev; RDMA
// READ and WRITE on verbs::Window), a GetReduce through an L2-sized bounce
// buffer so the reduction reads it from cache. On CUDA device memory the
// data steps go to DeviceSteps (device_steps.hpp) instead; everything else
// here is the same.
//
// It also runs message plans small enough for a one-host window's fast boxes
// (plan.hpp, fits_fastbox): a Send copies its bytes into the pair's box in
// the receiver's block, 56 to a line, and stores a flag word in the last 8
// bytes of each line; a Recv polls the flag of the last line, then copies
// (RecvReduce: reduces) out of the box. Data and flag share a line up to 56
// bytes, so a small message is one cache line crossing cores, with no
// signal and no descriptor.
//
// Why one file of ~820 lines: the runner's turn, wait, data and fast-box
// steps share one hot loop and its per-call state (one struct, compiled per
// window). What belonged to the window (descriptors, signals, the ledger,
// memory) has moved behind the face; what is left is one idea, running a
// plan's steps, whose parts would each need the whole per-call state.
#include <sched.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "src/common/errors.hpp"
#include "src/common/per_thread.hpp"
#include "cuda_kernels/cuda.hpp"
#include "transports/cuda_ipc/device_steps.hpp"
#include "src/runtime/engine.hpp"
#include "src/runtime/executor.hpp"
#include "src/runtime/gave_up.hpp"
#include "src/runtime/handoff.hpp"
#include "src/runtime/positions.hpp"
#include "src/reduce/cpu_reduce.hpp"
#include "transports/one_sided.hpp"
#include "transports/window_kinds.hpp"

namespace braid {

namespace {

constexpr std::size_t kBounceBytes = 128 * 1024;  // half a core's L2 here
// Outputs of at least this many bytes per rank are written with streaming
// stores where the plan allows (OneSidedRunner::stream). Below it the result
// is better left in cache for the caller: 2 ranks, staged all_reduce, 4 MiB
// out of place gained nothing from them (bench/RESULTS.md, section 9).
constexpr std::size_t kStreamBytes = 8 * 1024 * 1024;
constexpr int kSleepSliceMs = 10;                // between liveness checks
constexpr auto kPauseSpin = std::chrono::microseconds(3);
constexpr unsigned kPollsPerClock = 16;
constexpr auto kTurnSlice = std::chrono::milliseconds(1);

// Waits for the call's turn on the group and hands it on at the end, even on
// error (later calls then fail on their own, never hang on the turn).
class Turn {
 public:
  Turn(detail::GroupImpl& g, std::uint64_t ticket, const ExecCall& call) : g_(g), ticket_(ticket) {
    // The common case (one thread issuing) never touches the mutex.
    if (g_.one_sided_turn.load(std::memory_order_acquire) == ticket_) return;
    std::unique_lock lk(g_.one_sided_mu);
    g_.one_sided_waiters.fetch_add(1);
    auto ours = [&] { return g_.one_sided_turn.load(std::memory_order_acquire) == ticket_; };
    // In slices: the hand-over below may miss a waiter that arrives just
    // as it looks (it takes no fence); the next slice then sees the turn.
    bool ok = ours();
    while (!ok && Clock::now() < call.deadline.at)
      ok = g_.one_sided_cv.wait_until(lk, std::min(call.deadline.at, Clock::now() + kTurnSlice), ours);
    g_.one_sided_waiters.fetch_sub(1);
    if (!ok) {
      skip_ = true;  // an earlier call still runs; ours will never start
      fail(ErrorCode::Timeout, "{} timed out after {} ms waiting for an earlier collective on this group to finish",
           call.what, call.timeout.count());
    }
  }
  ~Turn() {
    if (skip_) return;
    // Release, no fence: a seq_cst store here waited for every store of the
    // call to leave the store buffer (one cache-line ownership transfer,
    // a tenth of a small call). A waiter missed for that is caught by its
    // next slice; waiters are rare (another thread's call on this group).
    g_.one_sided_turn.store(ticket_ + 1, std::memory_order_release);
    if (g_.one_sided_waiters.load(std::memory_order_relaxed) > 0) {
      std::lock_guard lk(g_.one_sided_mu);
      g_.one_sided_cv.notify_all();
    }
  }

 private:
  detail::GroupImpl& g_;
  std::uint64_t ticket_;
  bool skip_ = false;
};


// A step waiting for a peer: a Wait (signals from `peer` must reach
// `expected`), or a fast-box Recv (the flag word of its last line must read
// `want`; its first line's tells a message of another size early).
struct Pending {
  std::int32_t step;
  int peer;
  std::uint32_t expected;
  const std::atomic<std::uint64_t>* flag = nullptr;
  const std::atomic<std::uint64_t>* first = nullptr;
  std::uint64_t want = 0;
};

// A fast-box message's flag word: the call's ticket + 1 (34 bits: a stale
// box holds an older one), the message's size (13 bits: a peer that passed
// other counts is caught, not read), and 17 bits of the call's shape
// (shape_of: its dtype and op whole, 9 bits of the plan's hash: caught too
// when its message has the expected size).
constexpr std::uint64_t kFlagTicketBits = 34;
constexpr std::uint64_t kFlagSizeBits = 13;
constexpr std::uint64_t flag_word(std::uint64_t ticket, std::size_t bytes, std::uint32_t shape) {
  return ((ticket + 1) & ((std::uint64_t{1} << kFlagTicketBits) - 1)) | (std::uint64_t{bytes} << kFlagTicketBits) |
         (std::uint64_t{shape} << (kFlagTicketBits + kFlagSizeBits));
}
constexpr std::size_t flag_bytes(std::uint64_t flag) {
  return static_cast<std::size_t>((flag >> kFlagTicketBits) & ((std::uint64_t{1} << kFlagSizeBits) - 1));
}
static_assert(plan::kFastboxLines * plan::kFastboxLineBytes < (1 << kFlagSizeBits),
              "a fast-box message's size fits its flag");

// Per-thread bookkeeping reused by every one-sided call on the thread, so a
// small collective allocates nothing (calls on one thread never nest).
struct ThreadState {
  StepSchedule sched;
  std::vector<Pending> pending;
  std::vector<char> scratch;  // fast-box message plans' Scratch
  std::vector<int> owed;      // peers sent to and not yet rung (flush_rings)
  std::vector<char> gather;   // a RecvReduce's message of several lines, made contiguous
};

int which(plan::Buf b) { return b == plan::Buf::Input ? 0 : b == plan::Buf::Output ? 1 : 2; }

template <class W>
struct OneSidedRunner {
  Engine& e;
  const ExecCall& call;
  W& w;
  const plan::RankPlan& rp;
  const std::size_t elem;
  const int parity;
  char* scratch = nullptr;
  StepSchedule& sched;
  std::vector<Pending>& pending;
  std::vector<int>& owed;
  std::optional<detail::DeviceSteps> dev;  // device memory: its data steps
  ThreadState& ts;
  // A fast-box plan with a straight order (CompiledPlan::order): its steps
  // run in that order, each receive waited for alone, and the scheduler is
  // not used.
  const bool straight;
  // Copies into Output may bypass the cache (reduction::copy_streaming):
  // the plan never reads Output back (CompiledPlan::output_write_only) and
  // the Output is large. Each copy does unless it writes into the Input
  // (in place): the plan has read those very lines, so they are in cache
  // already and an ordinary store costs no read.
  const bool stream;
  // Copies into Scratch, which peers on other CPUs take, written through
  // memory rather than left in cache (handoff.hpp): the group's chooser
  // picks per call and times the call (timed), or BRAID_HANDOFF fixes it.
  const std::size_t staged_bytes;
  HandoffChooser::Pick handoff;
  bool timed = false;
  Clock::time_point began;
  const char* input_begin = nullptr;
  const char* input_end = nullptr;
  PositionPublisher position{call};  // hang diagnosis (positions.hpp)
  // A peer that gave up on this call: a message-plan peer clears its "doing"
  // line as it throws, so a rank that slept through that moment learns it
  // from the peer's record in the store, not from the peer's exit.
  GaveUpWatch gave_up_watch{call};

  static constexpr bool boxes_fit() {
    if constexpr (W::kFastBoxes) return W::kBoxLines == static_cast<std::size_t>(plan::kFastboxLines);
    return true;
  }
  static_assert(boxes_fit(), "the window's boxes are the size the plans are fitted to");

  OneSidedRunner(Engine& engine, const ExecCall& c, W& window, ThreadState& state)
      : e(engine), call(c), w(window), rp(c.plan->steps()), elem(dtype_size(c.dtype)),
        parity(static_cast<int>(c.ticket & 1)), sched(state.sched), pending(state.pending),
        owed(state.owed), ts(state), straight(c.plan->fastbox && !c.plan->order.empty()),
        stream(c.device < 0 && !c.plan->fastbox && c.plan->output_write_only &&
               static_cast<std::size_t>(plan::output_count(c.plan->plan->args, c.plan->rank)) * elem >= kStreamBytes),
        staged_bytes(static_cast<std::size_t>(c.plan->scratch_copy_count) * elem) {
    if (c.device < 0 && !c.plan->fastbox && staged_bytes >= HandoffChooser::kMinBytes) {
      if (const auto fixed = handoff_setting()) {
        handoff.mode = *fixed;
      } else {
        handoff = c.group->handoff.pick();
        timed = true;
        began = Clock::now();
      }
    }
    if (stream && c.buffers.input) {
      input_begin = static_cast<const char*>(c.buffers.input);
      input_end = input_begin + static_cast<std::size_t>(plan::input_count(*c.plan->plan, c.plan->rank)) * elem;
    }
    owed.clear();
    if (c.device >= 0) {
      if constexpr (!W::kDeviceMemory)
        fail(ErrorCode::Internal, "{}: device memory reached a {} window, which cannot share it", c.what,
             w.transport());
      // Device plans get no Scratch (the plan choice only offers them
      // plans without it).
      if (rp.scratch_count > 0)
        fail(ErrorCode::Internal, "{}: plan {} needs Scratch, which one-sided plans on device memory do not have",
             c.what, c.plan->plan->algorithm);
      dev.emplace(c.stream, c.dtype, c.op);
    }
    if (c.plan->fastbox) {
      // Nothing is described to peers and nothing shared is written but
      // the boxes: only wait until the readers of this ticket's boxes are
      // done with them (kBoxSlots calls ago).
      if constexpr (W::kFastBoxes) {
        if (c.ticket >= W::kBoxSlots) wait_for_completed(c.ticket + 1 - W::kBoxSlots);
      } else {
        fail(ErrorCode::Internal, "{}: a fast-box plan reached a {} window, which has no fast boxes", c.what,
             w.transport());
      }
      const std::size_t bytes = static_cast<std::size_t>(rp.scratch_count) * elem;
      if (ts.scratch.size() < bytes) ts.scratch.resize(bytes);
      scratch = bytes ? ts.scratch.data() : nullptr;
      if (!straight) sched.begin(*c.plan);
      pending.clear();
      return;
    }
    const std::size_t scratch_bytes = dev ? 0 : static_cast<std::size_t>(rp.scratch_count) * elem;
    if (const std::uint64_t need = w.ledger().writable_after(scratch_bytes, c.ticket)) wait_for_completed(need);
    onesided::BufDesc sd;
    if (!dev) scratch = w.scratch(parity, scratch_bytes, c.ticket, &sd);
    const plan::PlanArgs& a = c.plan->plan->args;
    const int me = c.plan->rank;
    // Describe to peers what they will read or write, before the first Signal.
    if (c.plan->peers_use_input)
      publish(0, c.buffers.input, static_cast<std::size_t>(plan::input_count(*c.plan->plan, me)) * elem);
    if (c.plan->peers_use_output)
      publish(1, c.buffers.output, static_cast<std::size_t>(plan::output_count(a, me)) * elem);
    if (dev) {
      // Every slot, stamped: a peer on another plan reads "device memory"
      // whatever slot it looks at, and we read the stamp of this call.
      if (!c.plan->peers_use_input) publish(0, nullptr, 0);
      if (!c.plan->peers_use_output) publish(1, nullptr, 0);
      sd.cuda = c.device + 1;
      sd.stamp = c.ticket + 1;
    }
    sd.shape = shape_of(c);
    w.ledger().publish(parity, 2, sd);
    sched.begin(*c.plan);
    pending.clear();
  }

  void publish(int which, const void* p, std::size_t bytes) {
    if (!dev) {
      onesided::BufDesc d = w.describe(p, bytes);
      d.shape = shape_of(call);
      w.ledger().publish(parity, which, d);
      return;
    }
    onesided::IpcDesc ipc;
    onesided::BufDesc d = detail::DeviceSteps::describe(p, bytes, call.device, &ipc);
    d.stamp = call.ticket + 1;
    d.shape = shape_of(call);
    w.ledger().publish_ipc(parity, which, ipc);
    w.ledger().publish(parity, which, d);
  }

  char* ptr(const plan::Span& s) const { return span_ptr(call.buffers, scratch, elem, s); }

  void finish(std::int32_t i) {
    if (!straight) sched.finish(i);
  }

  // Until every peer has completed `need` calls. A call reuses the half of
  // call ticket-2 (descriptors, Scratch): it needs ticket-1 (window.hpp,
  // completed()); a fast-box call reuses the boxes of ticket-kBoxSlots.
  // Almost always true at once; a rank calls ahead of a slow peer waits.
  void wait_for_completed(std::uint64_t need) {
    auto behind = [&] {
      for (int q = 0; q < w.size(); ++q)
        if (q != w.me() && w.ledger().peer_completed(q, need) < need) return q;
      return -1;
    };
    int q = behind();
    if (q < 0) return;
    const auto spin_end = Clock::now() + (e.oversubscribed() ? Engine::kYieldSpin : e.spin_time());
    while ((q = behind()) >= 0) {
      if (Clock::now() < spin_end) {
        if (e.oversubscribed()) sched_yield();
        else __builtin_ia32_pause();
        continue;
      }
      if (onesided::Failure f; w.ledger().peer_failed(q, &f)) gave_up(q, f);
      if (w.peer_gone(q)) gone(q);
      e.check_group(call.group->id);
      position.maybe(e, [&] { return std::vector<int>{w.world_rank(q)}; });
      if (call.deadline.expired()) {
        // The rank still in an earlier call may itself wait there on another
        // (a stopped rank): who is where names the end of that chain.
        int named = -1;
        const std::string where = diagnose(e, call, &named, {w.world_rank(q)});
        throw Error(ErrorCode::Timeout,
                    fmt::format("{} timed out after {} ms waiting for rank {} to finish an earlier collective{}",
                                call.what, call.timeout.count(), w.world_rank(q), where),
                    named >= 0 ? named : w.world_rank(q));
      }
      // Every rank rings its sleeping peers when it completes a call (run()).
      w.sleep([&] { return behind() < 0; }, std::min(kSleepSliceMs, call.deadline.poll_ms(kSleepSliceMs) + 1));
    }
  }

  bool arrived(const Pending& p) const {
    if constexpr (W::kFastBoxes)
      if (p.flag) return box_arrived(p);
    return static_cast<std::int32_t>(w.received(p.peer) - p.expected) >= 0;
  }

  // --- fast boxes -------------------------------------------------------------
  // Step i's message: where it starts in the pair's box, and its flag word.
  char* box_at(std::int32_t i, int from, int to) const {
    return w.box(from, to, call.ticket) +
           static_cast<std::size_t>(call.plan->box_line[static_cast<std::size_t>(i)]) * 64;
  }
  static constexpr std::size_t kLineData = plan::kFastboxLineBytes;
  static std::size_t lines_of(std::size_t bytes) {
    return static_cast<std::size_t>(plan::fastbox_lines(static_cast<std::int64_t>(bytes)));
  }
  // The flag word of a message's line k.
  static std::atomic<std::uint64_t>* flag_of(const char* msg, std::size_t k) {
    return reinterpret_cast<std::atomic<std::uint64_t>*>(const_cast<char*>(msg) + k * 64 + kLineData);
  }

  void box_send(std::int32_t i, const plan::Step& s) {
    const std::size_t bytes = static_cast<std::size_t>(s.src.count) * elem;
    const std::size_t lines = lines_of(bytes);
    char* msg = box_at(i, w.me(), s.peer);
    const char* src = ptr(s.src);
    const std::uint64_t flag = flag_word(call.ticket, bytes, shape_of(call));
    const std::size_t full = bytes / kLineData;  // lines filled whole: a fixed-size copy each
    for (std::size_t k = 0; k < lines; ++k) {
      if (k < full) std::memcpy(msg + k * 64, src + k * kLineData, kLineData);
      else if (bytes > k * kLineData) std::memcpy(msg + k * 64, src + k * kLineData, bytes - k * kLineData);
      // Every line's flag (a reader that expects another size looks at its
      // own last line), the last with release: the reader acquires it and
      // then sees every byte before it. Release, not seq_cst: a seq_cst
      // store would stall until this core owns the line, which the reader
      // holds. Waking a sleeping reader needs a full fence before looking
      // at its flag: flush_rings() does that once for all peers sent to,
      // when this rank is about to wait, and run() at the end.
      flag_of(msg, k)->store(flag, k + 1 == lines ? std::memory_order_release : std::memory_order_relaxed);
    }
    owed.push_back(s.peer);
  }

  // The fence and the doorbell check owed for box_send()s: after it, a
  // reader that announced its sleep sees our flags, or we see its
  // announcement and ring. Run before this rank spins long enough for a
  // peer to fall asleep, and at the end of the call.
  void flush_rings() {
    if (owed.empty()) return;
    std::atomic_thread_fence(std::memory_order_seq_cst);
    for (int q : owed) w.ring(q);
    owed.clear();
  }

  // A Recv/RecvReduce: done now if its message is there, else pending.
  bool box_recv(std::int32_t i, const plan::Step& s) {
    const std::size_t bytes = static_cast<std::size_t>(s.dst.count) * elem;
    const char* msg = box_at(i, s.peer, w.me());
    Pending p{i, s.peer, 0, flag_of(msg, lines_of(bytes) - 1), flag_of(msg, 0),
              flag_word(call.ticket, bytes, shape_of(call))};
    if (!box_arrived(p)) {
      pending.push_back(p);
      return false;
    }
    box_take(p);
    return true;
  }

  bool box_arrived(const Pending& p) const {
    // seq_cst (a plain load on x86): sleep() announces, then looks.
    std::uint64_t got = p.flag->load(std::memory_order_seq_cst);
    if (got == p.want) return true;
    // Not there: or there with another size (the last line's flag, or, for
    // a peer that sent fewer lines, the first's).
    constexpr std::uint64_t ticket_mask = (std::uint64_t{1} << kFlagTicketBits) - 1;
    if ((got & ticket_mask) != (p.want & ticket_mask)) got = p.first->load(std::memory_order_relaxed);
    if ((got & ticket_mask) == (p.want & ticket_mask) && got != p.want) {
      if (flag_bytes(got) != flag_bytes(p.want))
        throw Error(ErrorCode::InvalidArgument,
                    fmt::format("{}: rank {} sent {} bytes where this rank expected {}[{}] ({} bytes): every rank "
                                "must pass the same counts, dtype and root",
                                call.what, w.world_rank(p.peer), flag_bytes(got), dtype_name(call.dtype),
                                flag_bytes(p.want) / elem, flag_bytes(p.want)),
                    w.world_rank(p.peer));
      throw other_arguments(p.peer, static_cast<std::uint32_t>(got >> (kFlagTicketBits + kFlagSizeBits)));
    }
    return false;
  }

  // The message of an arrived Recv/RecvReduce, out of the box.
  void box_take(const Pending& p) {
    const plan::Step& s = rp.steps[static_cast<std::size_t>(p.step)];
    const char* msg = box_at(p.step, s.peer, w.me());
    w.ledger().peer_progressed(s.peer, call.ticket);
    const std::size_t bytes = static_cast<std::size_t>(s.dst.count) * elem;
    const std::size_t lines = lines_of(bytes);
    if (s.kind == plan::StepKind::RecvReduce) {
      // One line is contiguous already; more are gathered, then reduced in
      // one pass (a reduction per 56 bytes would cost more than the copy).
      const char* src = msg;
      if (lines > 1) {
        if (ts.gather.size() < bytes) ts.gather.resize(bytes);
        gather_lines(ts.gather.data(), msg, bytes);
        src = ts.gather.data();
      }
      if (s.acc.count > 0) reduction::reduce3(ptr(s.dst), ptr(s.acc), src, s.dst.count, call.dtype, call.op);
      else reduction::reduce_into(ptr(s.dst), src, s.dst.count, call.dtype, call.op);
    } else if (bytes) {
      gather_lines(ptr(s.dst), msg, bytes);
    }
  }

  static void gather_lines(char* dst, const char* msg, std::size_t bytes) {
    const std::size_t full = bytes / kLineData;  // a fixed-size copy each: inlined
    for (std::size_t k = 0; k < full; ++k) std::memcpy(dst + k * kLineData, msg + k * 64, kLineData);
    if (const std::size_t rest = bytes - full * kLineData) std::memcpy(dst + full * kLineData, msg + full * 64, rest);
  }

  // The peer's span `theirs` (a Get's src, a Put's dst): its address there,
  // checked against what it described.
  std::uint64_t remote(const plan::Step& s, const plan::Span& theirs, onesided::BufDesc* d) const {
    *d = w.ledger().peer_desc(s.peer, parity, which(theirs.buf));
    const int peer = w.world_rank(s.peer);
    if (dev && (d->cuda == 0 || d->stamp != call.ticket + 1))
      throw Error(ErrorCode::InvalidArgument,
                  fmt::format("{}: rank {} does not run this call on CUDA device memory as this rank does (it passed "
                              "host memory, or device memory that is staged: managed, or not shareable through CUDA "
                              "IPC; or named another algorithm): every rank must pass the same kind of memory",
                              call.what, peer),
                  peer);
    if (!dev && d->cuda != 0)
      throw Error(ErrorCode::InvalidArgument,
                  fmt::format("{}: rank {} passed CUDA device memory where this rank passed host memory: every rank "
                              "must pass tensors of the same kind (all on CUDA devices, or all on the host)",
                              call.what, peer),
                  peer);
    // After the kind of memory: that message says more than this one.
    if (d->shape != shape_of(call)) throw other_arguments(s.peer, d->shape);
    const auto off = static_cast<std::uint64_t>(theirs.offset) * elem;
    const auto bytes = static_cast<std::uint64_t>(theirs.count) * elem;
    if (off + bytes > d->bytes || d->addr == 0)
      throw Error(ErrorCode::InvalidArgument,
                  fmt::format("{}: rank {}'s buffer holds {} bytes where this rank expected at least {}: every rank "
                              "must pass the same counts, dtype and root",
                              call.what, peer, d->bytes, off + bytes),
                  peer);
    return d->addr + off;
  }

  // A peer's device span, opened here through CUDA IPC.
  char* device_remote(const plan::Step& s, const plan::Span& theirs) {
    onesided::BufDesc d;
    const std::uint64_t addr = remote(s, theirs, &d);
    if constexpr (W::kDeviceMemory)
      return dev->open_peer(w, s.peer, d, w.ledger().peer_ipc(s.peer, parity, which(theirs.buf)), addr - d.addr);
    else
      return nullptr;  // never: the constructor refused device memory
  }

  void get(const plan::Step& s) {
    const std::size_t bytes = static_cast<std::size_t>(s.src.count) * elem;
    if (bytes == 0) return;
    if (dev) return dev->get(ptr(s.dst), device_remote(s, s.src), s.src.count);
    onesided::BufDesc d;
    const std::uint64_t addr = remote(s, s.src, &d);
    if (const char* p = w.map(s.peer, d, addr, bytes)) move(s.dst, p, bytes);
    else w.get(s.peer, d, addr, ptr(s.dst), bytes);
  }

  void get_reduce(const plan::Step& s) {
    const std::size_t bytes = static_cast<std::size_t>(s.src.count) * elem;
    if (bytes == 0) return;
    if (dev) return dev->get_reduce(ptr(s.dst), ptr(s.acc), device_remote(s, s.src), s.src.count);
    onesided::BufDesc d;
    const std::uint64_t addr = remote(s, s.src, &d);
    char* dst = ptr(s.dst);
    const char* acc = ptr(s.acc);
    if (const char* p = w.map(s.peer, d, addr, bytes)) {
      reduction::reduce3(dst, acc, p, s.src.count, call.dtype, call.op);
      return;
    }
    thread_local std::unique_ptr<char[]> bounce(new char[kBounceBytes]);
    const std::size_t chunk = kBounceBytes / elem * elem;
    for (std::size_t off = 0; off < bytes; off += chunk) {
      const std::size_t n = std::min(chunk, bytes - off);
      w.get(s.peer, d, addr + off, bounce.get(), n);
      reduction::reduce3(dst + off, acc + off, bounce.get(), static_cast<std::int64_t>(n / elem), call.dtype, call.op);
    }
  }

  void put(const plan::Step& s) {
    const std::size_t bytes = static_cast<std::size_t>(s.src.count) * elem;
    if (bytes == 0) return;
    if (dev) return dev->put(device_remote(s, s.dst), ptr(s.src), s.src.count);
    onesided::BufDesc d;
    const std::uint64_t addr = remote(s, s.dst, &d);
    if (char* p = w.map(s.peer, d, addr, bytes)) std::memcpy(p, ptr(s.src), bytes);
    else w.put(s.peer, d, addr, ptr(s.src), bytes);
  }

  // dst = src, streaming into Output when `stream` says so and dst is not
  // in the Input (then it overlaps nothing the plan reads); otherwise src
  // may overlap dst (a Copy within one buffer, or Input to Output in place).
  void move(const plan::Span& dst, const char* src, std::size_t bytes) {
    char* d = ptr(dst);
    if (stream && dst.buf == plan::Buf::Output && (d + bytes <= input_begin || d >= input_end))
      reduction::copy_streaming(d, src, bytes);
    else if (handoff.mode == Handoff::Stream && dst.buf == plan::Buf::Scratch && (d + bytes <= src || src + bytes <= d))
      reduction::copy_streaming(d, src, bytes);
    else
      std::memmove(d, src, bytes);
  }

  void start(std::int32_t i) {
    const plan::Step& s = rp.steps[static_cast<std::size_t>(i)];
    switch (s.kind) {
      case plan::StepKind::Copy:
        if (dev) dev->copy(ptr(s.dst), ptr(s.src), s.src.count);
        else if (s.src.count && ptr(s.dst) != ptr(s.src))
          move(s.dst, ptr(s.src), static_cast<std::size_t>(s.src.count) * elem);
        break;
      case plan::StepKind::Reduce:
        if (dev) {
          // The device reduces in place only: the operand goes into dst first.
          if (s.acc.count > 0 && ptr(s.acc) != ptr(s.dst)) dev->copy(ptr(s.dst), ptr(s.acc), s.acc.count);
          dev->reduce(ptr(s.dst), ptr(s.src), s.src.count);
        } else if (s.acc.count > 0) {
          reduction::reduce3(ptr(s.dst), ptr(s.acc), ptr(s.src), s.dst.count, call.dtype, call.op);
        } else {
          reduction::reduce_into(ptr(s.dst), ptr(s.src), s.src.count, call.dtype, call.op);
        }
        break;
      case plan::StepKind::Signal:
        if (dev) dev->settle(call.deadline, call.what, [&] { e.check_abort(); });  // the peer may touch what we wrote
        w.signal(s.peer);
        break;
      case plan::StepKind::Get: touching(s.peer, [&] { get(s); }); break;
      case plan::StepKind::GetReduce: touching(s.peer, [&] { get_reduce(s); }); break;
      case plan::StepKind::Put: touching(s.peer, [&] { put(s); }); break;
      case plan::StepKind::Wait: {
        const Pending p{i, s.peer, w.ledger().consumed()[static_cast<std::size_t>(s.peer)] + static_cast<std::uint32_t>(s.slot) + 1};
        if (!arrived(p)) {
          pending.push_back(p);
          return;
        }
        break;
      }
      case plan::StepKind::Send:
      case plan::StepKind::Recv:
      case plan::StepKind::RecvReduce:
        if (!W::kFastBoxes || !call.plan->fastbox)
          fail(ErrorCode::Internal, "plan {} mixes messages into a one-sided plan", call.plan->plan->algorithm);
        if constexpr (W::kFastBoxes) {
          if (s.kind == plan::StepKind::Send) box_send(i, s);
          else if (!box_recv(i, s)) return;
        }
        break;
    }
    finish(i);
  }

  // Finishes every pending Wait whose signal has arrived; true if any did.
  bool reap() {
    bool any = false;
    for (std::size_t k = 0; k < pending.size();) {
      if (!arrived(pending[k])) {
        ++k;
        continue;
      }
      if constexpr (W::kFastBoxes)
        if (pending[k].flag) box_take(pending[k]);
      finish(pending[k].step);
      pending[k] = pending.back();
      pending.pop_back();
      any = true;
    }
    return any;
  }

  [[noreturn]] void timed_out() {
    std::vector<int> peers;
    for (const Pending& p : pending) peers.push_back(w.world_rank(p.peer));
    int behind = -1;
    const std::string where = diagnose(e, call, &behind, peers);
    throw Error(ErrorCode::Timeout,
                fmt::format("{} #{} timed out after {} ms waiting for rank(s) {} (through the {} window; a rank that "
                            "passed other counts than this one may run the call as messages instead){}",
                            call.what, call_number(call), call.timeout.count(), rank_list(peers), w.transport(), where),
                behind >= 0 ? behind : w.world_rank(pending.front().peer));
  }

  // The peer runs this call with another shape (CompiledPlan::shape).
  // `theirs`: the peer's shape_of word (or its low bits).
  Error other_arguments(int peer, std::uint32_t theirs) const {
    return braid::other_arguments(call, w.world_rank(peer), theirs);
  }

  // A peer marked its window failed (executor.hpp, peer_gave_up).
  [[noreturn]] void gave_up(int peer, const onesided::Failure& f) const { throw_peer_gave_up(e, w, peer, f, call); }
  // A peer this call waits on or reads from exited: it may have given up
  // first (its record, its word of a failure), else it is the failure.
  [[noreturn]] void gone(int peer) {
    gave_up_watch.now(e);  // it may have given up, then exited
    left_knowing(e, w, peer);
    e.peer_gone(w.world_rank(peer), "its process is gone (exited or killed)", call.group->id);
  }
  // A peer's memory this call reads or writes (process_vm_readv/writev)
  // that cannot be reached: the peer gave up on the call and let go of its
  // buffers, or exited. Its mark in the window, set before it let go, or
  // its exit says why: that is this call's error, not the copy's.
  template <class F>
  void touching(int peer, F&& copy) {
    try {
      copy();
    } catch (const Error& x) {
      if (x.code() != ErrorCode::Transport && x.code() != ErrorCode::PeerFailure) throw;
      if (onesided::Failure f; w.ledger().peer_failed(peer, &f)) gave_up(peer, f);
      if (w.peer_gone(peer)) gone(peer);
      throw;
    }
  }

  // Until some pending Wait is satisfied: poll a bounded time (yielding the
  // CPU when ranks outnumber CPUs), then sleep on the doorbell in slices,
  // checking between them that the awaited peers live and the job is not
  // aborted.
  void wait_some() {
    const bool yield = e.oversubscribed();
    // The clock is read every kPollsPerClock polls, the first time after
    // that many: reading it costs more than a poll (20-odd ns here, a tenth
    // of a small call), and a small message's flag often lands meanwhile.
    // The bounds below count from that first reading.
    Clock::time_point spin_end, pause_end;
    bool yielding = yield;
    for (unsigned k = 1;; ++k) {
      if (reap()) return;
      if (yielding) sched_yield();
      else __builtin_ia32_pause();
      if (k % kPollsPerClock) continue;
      flush_rings();  // no peer sleeps yet: it spins for as long as we do
      const auto now = Clock::now();
      if (k == kPollsPerClock) {
        spin_end = now + (yield ? Engine::kYieldSpin : e.spin_time());
        // After a few microseconds of polling, yield between polls: a peer
        // that shares our CPU with another process gets to run and signal.
        pause_end = now + (yield ? std::chrono::microseconds(0) : kPauseSpin);
      }
      if (now >= spin_end) break;
      yielding = now >= pause_end;
    }
    flush_rings();
    for (;;) {
      if (reap()) return;
      // A peer that failed this call, or died, may have signalled first:
      // that signal counts, so reap before giving up.
      for (const Pending& p : pending) {
        onesided::Failure f;
        if (w.ledger().peer_failed(p.peer, &f)) {
          if (reap()) return;
          gave_up(p.peer, f);
        }
        if (w.peer_gone(p.peer)) {
          if (reap()) return;
          gone(p.peer);
        }
        // The peer runs this very call as a message plan on the engine (it
        // passed other counts).
        if (w.ledger().peer_doing(p.peer, false) == call_identity(call))
          throw runs_otherwise(call, w.world_rank(p.peer), false);
        // It runs this call on the window too, but with other arguments
        // (its plan may never send what we wait for). The identity is read
        // again after the shape: a peer that has just finished this call and
        // started the next one writes the next shape before the next
        // identity, so a shape read between the two identities may be the
        // next call's; only a shape seen while the identity stayed ours is.
        if (w.ledger().peer_doing(p.peer, true) == call_identity(call)) {
          const std::uint32_t theirs = w.ledger().peer_doing_shape(p.peer);
          if (theirs != shape_of(call) && w.ledger().peer_doing(p.peer, true) == call_identity(call))
            throw other_arguments(p.peer, theirs);
        }
      }
      e.check_group(call.group->id);
      position.maybe(e, [&] {
        std::vector<int> awaits;
        for (const Pending& p : pending) awaits.push_back(w.world_rank(p.peer));
        return awaits;
      });
      gave_up_watch.maybe(e);
      if (call.deadline.expired()) timed_out();
      if (w.sleep([&] { return reap(); }, std::min(kSleepSliceMs, call.deadline.poll_ms(kSleepSliceMs) + 1)))
        return;
    }
  }

  void run() {
    if (straight) {
      for (const std::int32_t i : call.plan->order) {
        start(i);
        while (!pending.empty()) wait_some();
      }
    } else {
      for (;;) {
        sched.start_ready([&](std::int32_t i) { start(i); });
        if (sched.all_done()) break;
        if (pending.empty()) sched.stalled(call.what);
        wait_some();
      }
    }
    if (dev) dev->flush();  // trailing local work: later stream work sees it
    // Every Wait of this call has consumed its signal.
    auto& consumed = w.ledger().consumed();
    if (!call.plan->fastbox)
      for (std::size_t q = 0; q < consumed.size(); ++q) consumed[q] += call.plan->waits_on[q];
    w.ledger().completed(call.ticket + 1);
    if (timed) call.group->handoff.record(handoff, std::chrono::duration<double>(Clock::now() - began).count(), staged_bytes);
    // One fence for this call's box flags and its completion, then wake
    // whichever peer sleeps: one waiting for our messages, or a writer
    // waiting for us to free its boxes (a broadcast root runs ahead).
    std::atomic_thread_fence(std::memory_order_seq_cst);
    owed.clear();
    for (int q = 0; q < w.size(); ++q)
      if (q != w.me()) w.ring(q);
  }
};

}  // namespace

// One call on window w, whose concrete type is W.
template <class W>
void run_on(Engine& engine, const ExecCall& call, onesided::Window& w) {
  OneSidedRunner<W> r(engine, call, static_cast<W&>(w), per_thread<ThreadState>());
  r.run();
}

onesided::Window* ready_window(detail::GroupImpl& g) {
  return g.window_ready.load(std::memory_order_acquire) ? g.window.get() : nullptr;
}

onesided::Window& group_window(Engine& e, detail::GroupImpl& g, Deadline deadline) {
  if (!g.window_ready.load(std::memory_order_acquire)) {
    std::lock_guard lk(g.window_mu);
    if (!g.window) {
      // A one-sided plan given by hand (tests, a researcher's plan) on a
      // group whose backend picks no window: one host still has shared
      // memory, as before windows had kinds.
      std::string kind = g.window_kind;
      const bool one_host = std::all_of(g.host_of.begin(), g.host_of.end(), [&](int h) { return h == g.host_of[0]; });
      if (kind.empty() && one_host) kind = "shm";
      if (kind.empty())
        fail(ErrorCode::InvalidArgument,
             "a one-sided plan needs a window joining every member, and none joins ranks on several hosts under "
             "this backend: use backend 'verbs' for one-sided plans between hosts");
      try {
        g.window = transports::make_window(kind, e.store(), g.id, g.ranks, g.my_rank, deadline,
                                           [&e](int peer) { e.check_peer_alive(peer); });
      } catch (const Error&) {
        // A member that learned of a failure first may have given up and
        // closed its part (its memory cannot be taken): the failure is the
        // cause to report, if the log has one for this group.
        e.refresh_failures({});
        e.check_group(g.id);
        throw;
      }
      // The runner is compiled once per kind of window: no virtual call in
      // its hot loop, and no look at the type per call.
      transports::with_window(*g.window, [&](auto& concrete) {
        g.window_runner = &run_on<std::remove_reference_t<decltype(concrete)>>;
      });
    }
    g.window_ready.store(true, std::memory_order_release);
  }
  return *g.window;
}

void abandon_one_sided(Engine&, const ExecCall& call, const std::exception_ptr& why) {
  detail::GroupImpl& g = *call.group;
  onesided::Failure f{static_cast<int>(ErrorCode::Internal), -1, "it failed before it could start",
                      call_identity(call)};
  try {
    std::rethrow_exception(why);
  } catch (const Error& e) {
    f = {static_cast<int>(e.code()), e.peer(), e.what(), call_identity(call)};
  } catch (const std::exception& e) {
    f.why = e.what();
  } catch (...) {
  }
  try {
    Turn turn(g, call.ticket, call);  // hands the turn on when it goes
    g.window_broken = true;
    if (onesided::Window* w = ready_window(g)) w->ledger().mark_failed(f);
  } catch (const Error&) {
    // The turn never came (an earlier call still runs): nothing to hand on.
  }
}

void execute_one_sided(Engine& engine, const ExecCall& call) {
  detail::GroupImpl& g = *call.group;
  Turn turn(g, call.ticket, call);
  if (g.window_broken)
    fail(ErrorCode::InvalidState,
         "{}: an earlier collective on this group failed part-way through; its one-sided window is out "
         "of step with the other ranks, so no further collective can run on the group",
         call.what);
  try {
    onesided::Window& w = group_window(engine, g, call.deadline);
    Doing doing(w, true, call);
    std::optional<cuda::DeviceGuard> on_device;
    if (call.device >= 0) on_device.emplace(call.device);
    g.window_runner(engine, call, w);
  } catch (const Error& e) {
    // Signals this call consumed are not accounted for: running another
    // call could match stale signals and read the wrong data. Refuse; and
    // tell the peers, who may be waiting for signals we will not send.
    g.window_broken = true;
    if (onesided::Window* w = ready_window(g))
      w->ledger().mark_failed({static_cast<int>(e.code()), e.peer(), e.what(), call_identity(call)});
    throw;
  } catch (...) {
    g.window_broken = true;
    if (onesided::Window* w = ready_window(g))
      w->ledger().mark_failed({static_cast<int>(ErrorCode::Internal), -1, "an unexpected exception",
                               call_identity(call)});
    throw;
  }
}

}  // namespace braid
