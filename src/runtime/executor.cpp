// The message-plan runner (executor.hpp says how it runs a plan).
//
// Why one file of ~560 lines: compiling a plan for this rank (the fast-box
// layout, the call's fingerprint, the step tables) and running it (Runner)
// share the CompiledPlan's layout and its invariants; a reader checks one
// against the other. What peers leave in the store when they give up is in
// gave_up.cpp.
#include "src/runtime/executor.hpp"

#include <algorithm>
#include <cstring>
#include <optional>

#include "src/common/error_record.hpp"
#include "src/common/errors.hpp"
#include "src/common/per_thread.hpp"
#include "src/reduce/cpu_reduce.hpp"
#include "src/runtime/gave_up.hpp"
#include "src/runtime/peers.hpp"
#include "src/runtime/positions.hpp"

namespace braid {

namespace {

// How often a message plan on one host looks at its peers' windows while it
// waits (run()).
constexpr auto kPeerLook = std::chrono::milliseconds(100);

// Where each of this rank's messages starts in its pair's fast box: the
// messages from a sender to a receiver lie in slot order, each from a line
// boundary (plan.hpp). Both ends compute the same offsets from the same
// plan. False if two messages of a pair share a slot (no order to lay out).
bool lay_out_boxes(const plan::Plan& p, int rank, std::vector<std::int32_t>* box_line) {
  // Lines before message `slot` among `from`'s messages to `to`.
  auto offset = [&](int from, int to, std::int32_t slot, std::int64_t* out) {
    std::int64_t before = 0;
    int same = 0;
    for (const auto& s : p.ranks[static_cast<std::size_t>(from)].steps) {
      if (s.kind != plan::StepKind::Send || s.peer != to) continue;
      if (s.slot == slot) ++same;
      else if (s.slot < slot) before += plan::fastbox_lines(s.src.count * static_cast<std::int64_t>(p.args.elem_size));
    }
    *out = before;
    return same == 1;
  };
  const auto& steps = p.ranks[static_cast<std::size_t>(rank)].steps;
  box_line->assign(steps.size(), -1);
  for (std::size_t i = 0; i < steps.size(); ++i) {
    const auto& s = steps[i];
    std::int64_t at = 0;
    if (s.kind == plan::StepKind::Send) {
      if (!offset(rank, s.peer, s.slot, &at)) return false;
    } else if (s.kind == plan::StepKind::Recv || s.kind == plan::StepKind::RecvReduce) {
      if (!offset(s.peer, rank, s.slot, &at)) return false;
    } else {
      continue;
    }
    (*box_line)[i] = static_cast<std::int32_t>(at);
  }
  return true;
}

// FNV-1a over the arguments every rank must agree on.
std::uint32_t call_shape(const plan::PlanArgs& a, const std::string& algorithm) {
  std::uint64_t h = 1469598103934665603ull;
  auto mix = [&](std::uint64_t v) {
    for (int i = 0; i < 8; ++i, v >>= 8) h = (h ^ (v & 0xff)) * 1099511628211ull;
  };
  mix(static_cast<std::uint64_t>(a.coll));
  mix(static_cast<std::uint64_t>(a.nranks));
  mix(static_cast<std::uint64_t>(a.count));
  mix(a.elem_size);
  mix(static_cast<std::uint64_t>(a.root));
  for (char ch : algorithm) mix(static_cast<unsigned char>(ch));
  const auto v = static_cast<std::uint32_t>(h ^ (h >> 32));
  return v ? v : 1;
}

}  // namespace

// All-gather: every span of this rank's Output that its own steps touch
// lies inside one rank's block, and no peer reaches its Output (ExecBuffers,
// output_blocks). A Get's src and a Put's dst are the peer's spans, not ours.
bool output_stays_in_blocks(const CompiledPlan& c, const std::vector<plan::Step>& steps) {
  const plan::PlanArgs& a = c.plan->args;
  if (a.coll != plan::Collective::AllGather || a.count <= 0 || c.peers_use_output) return false;
  auto inside = [&](const plan::Span& s) {
    return s.buf != plan::Buf::Output || s.count == 0 || s.offset / a.count == (s.offset + s.count - 1) / a.count;
  };
  for (const auto& s : steps) {
    const bool remote_src = s.kind == plan::StepKind::Get || s.kind == plan::StepKind::GetReduce;
    const bool remote_dst = s.kind == plan::StepKind::Put;
    if ((!remote_src && !inside(s.src)) || (!remote_dst && !inside(s.dst)) || !inside(s.acc)) return false;
  }
  return true;
}

std::shared_ptr<const CompiledPlan> compile_plan(std::shared_ptr<const plan::Plan> p, int rank, bool fastbox) {
  auto c = std::make_shared<CompiledPlan>();
  c->plan = std::move(p);
  c->rank = rank;
  const auto& steps = c->steps().steps;
  const auto n = steps.size();
  c->dep_count.assign(n, 0);
  c->next_begin.assign(n + 1, 0);
  c->stage_offset.assign(n, -1);
  for (std::size_t i = 0; i < n; ++i) {
    c->dep_count[i] = static_cast<std::int32_t>(steps[i].deps.size());
    for (auto d : steps[i].deps) c->next_begin[static_cast<std::size_t>(d) + 1]++;
    if (steps[i].kind == plan::StepKind::RecvReduce) {
      c->stage_offset[i] = c->stage_count;
      c->stage_count += steps[i].dst.count;
    }
    if (steps[i].slot >= (1 << 24))
      fail(ErrorCode::Internal, "plan {} uses message slot {}, beyond the 2^24 the tag layout allows",
           c->plan->algorithm, steps[i].slot);
  }
  if (c->plan->one_sided) {
    c->waits_on.assign(c->plan->ranks.size(), 0);
    for (const auto& s : steps)
      if (s.kind == plan::StepKind::Wait) c->waits_on[static_cast<std::size_t>(s.peer)]++;
    for (std::size_t r = 0; r < c->plan->ranks.size(); ++r)
      for (const auto& s : c->plan->ranks[r].steps)
        if (s.peer == rank) {
          // Get/GetReduce name the peer's memory in src, Put in dst.
          const bool reads = s.kind == plan::StepKind::Get || s.kind == plan::StepKind::GetReduce;
          const plan::Span* theirs = reads ? &s.src : s.kind == plan::StepKind::Put ? &s.dst : nullptr;
          if (theirs && theirs->buf == plan::Buf::Input) c->peers_use_input = true;
          if (theirs && theirs->buf == plan::Buf::Output) c->peers_use_output = true;
        }
    c->output_write_only = !c->peers_use_output;
    for (const auto& s : steps) {
      if (s.kind == plan::StepKind::Copy && s.dst.buf == plan::Buf::Scratch) c->scratch_copy_count += s.src.count;
      const bool reads_dst = s.kind == plan::StepKind::Reduce || s.kind == plan::StepKind::RecvReduce;
      const bool reads_src = s.kind == plan::StepKind::Copy || s.kind == plan::StepKind::Reduce ||
                             s.kind == plan::StepKind::Put || s.kind == plan::StepKind::Send;
      if ((reads_src && s.src.buf == plan::Buf::Output) || (reads_dst && plan::operand(s).buf == plan::Buf::Output) ||
          (s.kind == plan::StepKind::GetReduce && s.acc.buf == plan::Buf::Output))
        c->output_write_only = false;
    }
  }
  c->output_in_blocks = output_stays_in_blocks(*c, steps);
  c->fastbox = fastbox && plan::fits_fastbox(*c->plan) && lay_out_boxes(*c->plan, rank, &c->box_line);
  if (c->fastbox) c->order = straight_order(*c->plan, rank);
  c->shape = call_shape(c->plan->args, c->plan->algorithm);
  // Uneven all-to-all: each rank's count and algorithm are its own (its
  // choice follows its own bytes; pairwise and direct plans exchange the same
  // messages), so its messages carry what all share.
  if (c->plan->args.coll == plan::Collective::AllToAll && !c->plan->args.splits.empty()) {
    plan::PlanArgs shared = c->plan->args;
    shared.count = 0;
    c->message_shape = call_shape(shared, "");
  } else {
    c->message_shape = c->shape;
  }
  for (std::size_t i = 0; i < n; ++i) c->next_begin[i + 1] += c->next_begin[i];
  c->next.resize(static_cast<std::size_t>(c->next_begin[n]));
  std::vector<std::int32_t> fill(c->next_begin.begin(), c->next_begin.end() - 1);
  for (std::size_t i = 0; i < n; ++i)
    for (auto d : steps[i].deps) c->next[static_cast<std::size_t>(fill[static_cast<std::size_t>(d)]++)] = static_cast<std::int32_t>(i);
  return c;
}

void StepSchedule::begin(const CompiledPlan& plan) {
  plan_ = &plan;
  waiting_.assign(plan.dep_count.begin(), plan.dep_count.end());
  ready_.clear();
  urgent_.clear();
  done_ = 0;
  total_ = waiting_.size();
  for (std::size_t i = 0; i < total_; ++i)
    if (waiting_[i] == 0) make_ready(static_cast<std::int32_t>(i));
}

void StepSchedule::make_ready(std::int32_t i) {
  switch (plan_->steps().steps[static_cast<std::size_t>(i)].kind) {
    case plan::StepKind::Copy:
    case plan::StepKind::Reduce:
    case plan::StepKind::Get:
    case plan::StepKind::GetReduce:
    case plan::StepKind::Put:
      ready_.push_back(i);
      std::push_heap(ready_.begin(), ready_.end(), std::greater<>{});
      return;
    default: urgent_.push_back(i); return;
  }
}

void StepSchedule::finish(std::int32_t i) {
  ++done_;
  const auto b = plan_->next_begin[static_cast<std::size_t>(i)];
  const auto end = plan_->next_begin[static_cast<std::size_t>(i) + 1];
  for (auto k = b; k < end; ++k) {
    const auto j = plan_->next[static_cast<std::size_t>(k)];
    if (--waiting_[static_cast<std::size_t>(j)] == 0) make_ready(j);
  }
}

void StepSchedule::stalled(const char* what) const {
  fail(ErrorCode::Internal, "{}: plan {} stalled with {} of {} steps done", what, plan_->plan->algorithm, done_,
       total_);
}

namespace {

// Per-thread storage reused by every call on that thread, so a small
// collective allocates nothing: requests, step bookkeeping, small staging.
struct Arena {
  std::unique_ptr<Request[]> reqs;
  std::size_t req_cap = 0;
  StepSchedule sched;
  std::vector<std::int32_t> inflight;
  std::vector<Request*> inflight_reqs;
  std::vector<char> scratch, stage;
  bool busy = false;  // a nested call (none today) would take fresh storage
};
// Buffers up to this are kept by the thread between calls: a fresh large
// buffer page-faults on every call (measured: ~12 ms per 64 MiB all_reduce).
// Above it (rare: over 1 GiB of staging) they are allocated per call.
constexpr std::size_t kKeepBytes = std::size_t(1) << 30;
// A large Copy step runs in pieces of this many bytes, with a progress pass
// after each (Runner::copy): about 50-100 us of copying here, within a
// socket buffer's worth of sending.
constexpr std::size_t kCopyPiece = std::size_t(512) << 10;

struct Runner {
  Engine& e;
  const ExecCall& call;
  const plan::RankPlan& rp;
  const std::size_t elem;
  Arena own;    // used when the thread's arena is busy
  Arena& a;
  std::unique_ptr<char[]> big_scratch, big_stage;  // above kKeepBytes
  char* scratch = nullptr;
  char* stage = nullptr;
  Request* reqs = nullptr;
  StepSchedule& sched;
  onesided::Window* window = nullptr;            // one host: the group's (look_at_peers)
  std::vector<std::int32_t>& inflight;     // step indices
  std::vector<Request*>& inflight_reqs;    // same order
  const std::uint32_t shape = message_shape_of(call);  // every message of the call carries it
  PositionPublisher position{call};  // hang diagnosis (positions.hpp)
  GaveUpWatch gave_up{call};  // a peer's record in the store
  // A first send to a rank on another host dials it first (position.dialing).
  struct DialNote final : Engine::Dialing {
    Runner& r;
    explicit DialNote(Runner& runner) : r(runner) {}
    void dialing(int peer) override {
      const auto& g = *r.call.group;
      const auto q = static_cast<std::size_t>(g.group_of_global[static_cast<std::size_t>(peer)]);
      const auto me = static_cast<std::size_t>(g.my_rank);
      if (q < g.host_of.size() && me < g.host_of.size() && g.host_of[q] != g.host_of[me]) r.position.dialing(r.e, peer);
    }
  } dial_note{*this};

  static char* buffer(std::vector<char>& keep, std::unique_ptr<char[]>& big, std::size_t bytes) {
    if (bytes == 0) return nullptr;
    if (bytes > kKeepBytes) {
      big.reset(new char[bytes]);
      return big.get();
    }
    if (keep.size() < bytes) keep.resize(bytes);
    return keep.data();
  }

  // The thread's arena, or `own` for a call nested in another (none today).
  static Arena& arena_or(Arena& own) {
    Arena& t = per_thread<Arena>();
    return t.busy ? own : t;
  }

  Runner(Engine& engine, const ExecCall& c)
      : e(engine), call(c), rp(c.plan->steps()), elem(dtype_size(c.dtype)),
        a(arena_or(own)), sched(a.sched), inflight(a.inflight), inflight_reqs(a.inflight_reqs) {
    a.busy = true;
    scratch = buffer(a.scratch, big_scratch, static_cast<std::size_t>(rp.scratch_count) * elem);
    stage = buffer(a.stage, big_stage, static_cast<std::size_t>(c.plan->stage_count) * elem);
    const std::size_t n = rp.steps.size();
    if (a.req_cap < n) {
      a.reqs.reset(new Request[n]);
      a.req_cap = n;
    }
    reqs = a.reqs.get();
    sched.begin(*c.plan);
    inflight.clear();
    inflight_reqs.clear();
  }
  ~Runner() { a.busy = false; }

  char* ptr(const plan::Span& s) const { return span_ptr(call.buffers, scratch, elem, s); }
  std::size_t bytes(const plan::Span& s) const { return static_cast<std::size_t>(s.count) * elem; }

  void finish(std::int32_t i) { sched.finish(i); }

  // A Copy step. Steps that post messages start first (StepSchedule), so a
  // large copy often runs while sends are in flight: a broadcast root's copy
  // of Input into Output (PlanBuilder::root_reads_input), an all-gather's
  // own block. Copied whole, the sockets would sit idle behind it once their
  // buffers drained (and a rendezvous's CTS would wait); so it goes in
  // pieces, with a progress pass between them. The identity (an in-place
  // call's copy of Input onto itself) is skipped; overlapping ranges go
  // whole (pieces would need the right order).
  void copy(char* dst, const char* src, std::size_t n) {
    if (n == 0 || dst == src) return;
    const bool overlap = dst < src + n && src < dst + n;
    if (inflight_reqs.empty() || n < 2 * kCopyPiece || overlap) {
      std::memmove(dst, src, n);
      return;
    }
    for (std::size_t off = 0; off < n; off += kCopyPiece) {
      std::memcpy(dst + off, src + off, std::min(kCopyPiece, n - off));
      // A pass needs a request still in flight (test() of a done one
      // returns at once); with none left the rest is copied without.
      Request* pending = nullptr;
      for (Request* r : inflight_reqs)
        if (!r->done.load(std::memory_order_acquire)) {
          pending = r;
          break;
        }
      if (pending) e.test(*pending);
    }
  }

  void start(std::int32_t i) {
    const plan::Step& s = rp.steps[static_cast<std::size_t>(i)];
    Request& r = reqs[static_cast<std::size_t>(i)];
    r.reset();
    const auto tag = static_cast<std::int64_t>((call.seq << 24) | static_cast<std::uint64_t>(s.slot));
    switch (s.kind) {
      case plan::StepKind::Send:
        r.peer = call.group->ranks[static_cast<std::size_t>(s.peer)];
        r.env = Envelope{coll_ctx(*call.group), tag, wire_dtype(call.dtype), shape};
        r.buf = ptr(s.src);
        r.bytes = bytes(s.src);
        r.timeout = call.timeout;
        e.post_send(r, call.deadline, &dial_note);
        break;
      case plan::StepKind::Recv:
      case plan::StepKind::RecvReduce:
        r.peer = call.group->ranks[static_cast<std::size_t>(s.peer)];
        r.env = Envelope{coll_ctx(*call.group), tag, wire_dtype(call.dtype), shape};
        r.buf = s.kind == plan::StepKind::Recv
                    ? ptr(s.dst)
                    : stage + static_cast<std::size_t>(call.plan->stage_offset[static_cast<std::size_t>(i)]) * elem;
        r.bytes = bytes(s.dst);
        r.timeout = call.timeout;
        r.deadline = call.deadline;
        e.post_recv(r);
        break;
      case plan::StepKind::Copy:
        copy(ptr(s.dst), ptr(s.src), bytes(s.src));
        finish(i);
        return;
      case plan::StepKind::Reduce:
        if (s.acc.count > 0) reduction::reduce3(ptr(s.dst), ptr(s.acc), ptr(s.src), s.dst.count, call.dtype, call.op);
        else reduction::reduce_into(ptr(s.dst), ptr(s.src), s.src.count, call.dtype, call.op);
        finish(i);
        return;
      case plan::StepKind::Signal:
      case plan::StepKind::Wait:
      case plan::StepKind::Get:
      case plan::StepKind::GetReduce:
      case plan::StepKind::Put:
        fail(ErrorCode::Internal, "plan {} mixes one-sided steps into a message plan", call.plan->plan->algorithm);
    }
    inflight.push_back(i);
    inflight_reqs.push_back(&r);
  }

  // A message arrived (or a send left): finish its step.
  void complete(std::int32_t i) {
    const plan::Step& s = rp.steps[static_cast<std::size_t>(i)];
    Request& r = reqs[static_cast<std::size_t>(i)];
    try {
      e.rethrow(r);
    } catch (const Error& x) {
      // A message of another call, or a send refused for one: name both.
      if (r.other_shape && !(s.kind != plan::StepKind::Send && same_call_kind(call, r.other_shape) && r.received != r.bytes))
        throw other_arguments(call, s.kind == plan::StepKind::Send ? r.peer : r.source, r.other_shape);
      if (r.other_shape) throw count_mismatch(r);  // the sizes say more than the fingerprint
      // A receive that refused its message (receive_error), or a send that
      // a peer's receive refused: say which op.
      if (x.code() != ErrorCode::InvalidArgument) throw;
      throw Error(x.code(), fmt::format("{}: {}", call.what, x.what()), x.peer());
    }
    if (s.kind != plan::StepKind::Send && r.received != r.bytes) throw count_mismatch(r);
    if (s.kind == plan::StepKind::RecvReduce) {
      if (s.acc.count > 0) reduction::reduce3(ptr(s.dst), ptr(s.acc), r.buf, s.dst.count, call.dtype, call.op);
      else reduction::reduce_into(ptr(s.dst), r.buf, s.dst.count, call.dtype, call.op);
    }
    finish(i);
  }

  Error count_mismatch(const Request& r) const {
    return Error(ErrorCode::InvalidArgument,
                 fmt::format("{}: rank {} sent {}[{}] ({} bytes) where this rank expected {}[{}]: every rank must "
                             "pass the same counts, dtype and root",
                             call.what, r.source, dtype_name(call.dtype), r.received / elem, r.received,
                             dtype_name(call.dtype), r.bytes / elem),
                 r.source);
  }

  void abandon(std::exception_ptr why) {
    for (Request* r : inflight_reqs)
      if (!r->done.load(std::memory_order_acquire)) e.cancel(*r, why);
  }

  // The peers' windows (one host only): see run().
  void look_at_peers() const {
    const std::uint64_t me = call_identity(call);
    for (int q = 0; q < window->size(); ++q) {
      if (q == window->me()) continue;
      const int peer = window->world_rank(q);
      onesided::Failure f;
      if (window->ledger().peer_failed(q, &f) && f.call == me) throw_peer_gave_up(e, *window, q, f, call);
      if (window->ledger().peer_doing(q, true) == me) throw runs_otherwise(call, peer, true);
    }
  }

  void run() {
    for (;;) {
      sched.start_ready([&](std::int32_t i) { start(i); });
      if (sched.all_done()) break;
      if (inflight.empty()) sched.stalled(call.what);
      // On one host, wait in slices and look at the peers' windows between
      // them: a peer that runs this call through shared memory (it passed
      // other counts) or gave up on it would otherwise be waited on until
      // the deadline.
      const Deadline until{std::min({call.deadline.at, Clock::now() + kPeerLook, gave_up.next()})};
      if (!e.wait_any(inflight_reqs.data(), inflight_reqs.size(), until,
                      inflight_reqs.size() == 1 ? inflight_reqs[0]->peer : -1)) {
        if (!call.deadline.expired()) {
          // A member of the group failed meanwhile (this rank heard of it,
          // or read it in the failure log): the call cannot complete, and
          // a send to a live peer that gave up on it would otherwise wait
          // out the deadline. Throws, naming the failure the group met first.
          e.check_group(call.group->id);
          position.maybe(e, [&] {
            std::vector<int> awaits;
            for (Request* r : inflight_reqs)
              if (!r->done.load()) awaits.push_back(r->peer);
            return awaits;
          });
          if (window) look_at_peers();
          gave_up.maybe(e);
          continue;
        }
        std::vector<int> peers;
        for (Request* r : inflight_reqs)
          if (!r->done.load()) peers.push_back(r->peer);
        int behind = -1;
        const std::string where = diagnose(e, call, &behind, peers);
        auto err = std::make_exception_ptr(Error(
            ErrorCode::Timeout,
            fmt::format("{} #{} timed out after {} ms waiting for rank(s) {}{}", call.what, call_number(call),
                        call.timeout.count(), rank_list(peers), where),
            behind >= 0 ? behind : inflight_reqs.empty() ? -1 : inflight_reqs[0]->peer));
        abandon(err);
        std::rethrow_exception(err);
      }
      for (std::size_t k = 0; k < inflight.size();) {
        if (!inflight_reqs[k]->done.load(std::memory_order_acquire)) {
          ++k;
          continue;
        }
        const auto i = inflight[k];
        inflight[k] = inflight.back();
        inflight.pop_back();
        inflight_reqs[k] = inflight_reqs.back();
        inflight_reqs.pop_back();
        try {
          complete(i);
        } catch (const Error& x) {
          abandon(std::current_exception());
          // A peer that gave up on this call (and may have exited since)
          // knows why better than its disconnection does: its mark in the
          // window (one host), or its record in the store.
          if (x.code() == ErrorCode::PeerFailure) {
            if (window) look_at_peers();
            gave_up.now(e);
          }
          throw;
        } catch (...) {
          abandon(std::current_exception());
          throw;
        }
      }
    }
  }
};

}  // namespace

bool same_call_kind(const ExecCall& call, std::uint32_t theirs) { return (theirs & 0xfff) == (shape_of(call) & 0xfff); }

Error other_arguments(const ExecCall& call, int who, std::uint32_t theirs) {
  const std::uint32_t mine = shape_of(call);
  const unsigned their_dtype = theirs & 0xf, their_op = (theirs >> 4) & 0xf, their_coll = (theirs >> 8) & 0xf;
  const plan::Collective coll = call.plan->plan->args.coll;
  if (their_coll != ((mine >> 8) & 0xf) && their_coll >= 1 && their_coll <= plan::kNumCollectives)
    return Error(ErrorCode::InvalidArgument,
                 fmt::format("{}: rank {} is in {} where this rank is in {} (call {} on this group): every rank "
                             "must make the same collective calls in the same order",
                             call.what, who, plan::collective_name(static_cast<plan::Collective>(their_coll - 1)),
                             plan::collective_name(coll), call.seq + call.ticket),
                 who);
  if (their_dtype != (mine & 0xf) && their_dtype >= 1 && their_dtype <= kNumDTypes)
    return Error(ErrorCode::InvalidArgument,
                 fmt::format("{}: rank {} passed {} where this rank passed {}[{}]: every rank must pass the same "
                             "dtype and counts", call.what, who, dtype_name(static_cast<DType>(their_dtype - 1)),
                             dtype_name(call.dtype), call.plan->plan->args.count),
                 who);
  if (their_op != ((mine >> 4) & 0xf) && their_op >= 1 && their_op <= 8)
    return Error(ErrorCode::InvalidArgument,
                 fmt::format("{}: rank {} passed ReduceOp {} where this rank passed {}: every rank must pass the "
                             "same op", call.what, who, reduce_op_name(static_cast<ReduceOp>(their_op - 1)),
                             reduce_op_name(call.op)),
                 who);
  return Error(ErrorCode::InvalidArgument,
               fmt::format("{}: rank {} runs this call with other arguments than this rank ({}[{}], root {} or "
                           "algorithm {}): every rank must pass the same counts, dtype and root",
                           call.what, who, dtype_name(call.dtype), call.plan->plan->args.count,
                           call.plan->plan->args.root, call.plan->plan->algorithm),
               who);
}

Error runs_otherwise(const ExecCall& call, int peer, bool peer_through_window) {
  const char* window = "through shared memory";
  const char* messages = "as messages";
  return Error(ErrorCode::InvalidArgument,
               fmt::format("{}: rank {} runs this call {} where this rank runs it {}: every rank must pass the same "
                           "counts, dtype and root",
                           call.what, peer, peer_through_window ? window : messages,
                           peer_through_window ? messages : window),
               peer);
}

std::string rank_list(std::vector<int> ranks) {
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  std::string s;
  for (int r : ranks) s += (s.empty() ? "" : ", ") + std::to_string(r);
  return s;
}

bool left_knowing(Engine& e, const onesided::Window& w, int q) {
  const int knew = w.ledger().peer_knew_failed(q, e.world_size());
  if (knew < 0 || knew == e.rank() || knew == w.world_rank(q)) return false;
  e.note_reported_before(knew, w.world_rank(q),
                         fmt::format("reported by rank {} (in the group's window) before it exited", w.world_rank(q)));
  return true;
}

void throw_peer_gave_up(Engine& e, const onesided::Window& w, int peer, const onesided::Failure& f,
                        const ExecCall& call) {
  const auto known = static_cast<int>(ErrorCode::Internal);
  const int about = f.about >= 0 && f.about != w.world_rank(w.me()) ? f.about : w.world_rank(peer);
  if (f.code == static_cast<int>(ErrorCode::PeerFailure) && about != w.world_rank(peer))
    e.note_reported(about, fmt::format("reported by rank {}", w.world_rank(peer)));
  int named = about;
  const int third = about != w.world_rank(peer) ? about : -1;  // the rank the peer named, if not itself
  const std::string why =
      f.code == static_cast<int>(ErrorCode::Timeout) ? with_own_diagnosis(e, call, f.why, &named, third) : f.why;
  throw Error(f.code >= 0 && f.code <= known ? static_cast<ErrorCode>(f.code) : ErrorCode::PeerFailure,
              fmt::format("{}: rank {} gave up on this call: {}", call.what, w.world_rank(peer), why), named);
}

void execute(Engine& engine, const ExecCall& call) {
  if (call.plan->runs_one_sided()) {
    try {
      return execute_one_sided(engine, call);
    } catch (...) {
      // Peers on the window read its mark; one that meets this rank gone
      // later (a point-to-point receive, a message plan) reads the store.
      publish_gave_up(engine, call, std::current_exception());
      throw;
    }
  }
  Runner r(engine, call);
  // Ranks of one host say in the group's window that they run this call as
  // messages, for a peer that runs it through the window (Ledger::doing).
  std::optional<Doing> doing;
  if (call.group->shared_memory && call.group->ranks.size() > 1) {
    r.window = &group_window(engine, *call.group, call.deadline);
    doing.emplace(*r.window, false, call);
  }
  try {
    r.run();
  } catch (const Error& x) {
    // Nothing of ours may stay posted: the requests die with the runner.
    r.abandon(std::current_exception());
    // A peer that left while we waited on it (or before we posted) may have
    // given up first, on another rank's account: name that rank.
    if (x.code() == ErrorCode::PeerFailure && x.peer() >= 0 && engine.left(x.peer()))
      if (auto why = read_left_after_giving_up(engine, call, x.peer())) throw *why;
    // Or it said in the group's window which failure it learned of (the
    // store's host may be the one that failed: then the above finds nothing).
    if (x.code() == ErrorCode::PeerFailure && x.peer() >= 0 && r.window && engine.gone(x.peer()))
      if (const int q = call.group->group_of_global[static_cast<std::size_t>(x.peer())]; q >= 0)
        if (left_knowing(engine, *r.window, q))
          engine.check_group(call.group->id);  // throws, naming the failure the group met first
    // A failed member poisons the group: say so in its window too, for a
    // peer waiting there on this rank, which may exit now (with the store's
    // host dead, the window is where that peer can read why).
    if (x.code() == ErrorCode::PeerFailure && r.window)
      r.window->ledger().mark_failed({static_cast<int>(x.code()), x.peer(), x.what(), call_identity(call)});
    publish_gave_up(engine, call, std::current_exception());
    throw;
  } catch (...) {
    r.abandon(std::current_exception());
    publish_gave_up(engine, call, std::current_exception());
    throw;
  }
}

}  // namespace braid
