// The alpha-beta-gamma simulator and the algorithm choice built on it.
#include "algorithms/cost_model.hpp"
#include "algorithms/estimate.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <limits>
#include <queue>
#include <span>
#include <unordered_map>
#include <vector>

#include "algorithms/hosts.hpp"
#include "src/common/errors.hpp"

namespace braid::plan {

namespace {

// See the Put rule in Simulator::run.
constexpr double kHotPutBytes = 1024.0 * 1024;
// A round of signals when the ranks share CPUs (sharing_cpus).
constexpr double kSharedCpuRound = 5e-6;
// What a message costs more per rank beyond one to a CPU, for hosts
// emulated on one machine: fitted to 8-byte all_reduce (recursive doubling)
// at 2 x 2, 4 x 1 and 4 x 2 ranks on 2 CPUs, 34-67 us for 2 rounds at 2
// ranks to a CPU and 144-146 us for 3 rounds at 4, where 12-13 us is a
// round's latency with a CPU each (bench/RESULTS.md section 28).
constexpr double kSharedTcpTurn = 14e-6;

// A resource's busy spans from the event being handled on, in order of
// their start. Work goes in the first gap long enough (first fit): what is
// booked ahead does not stall what is ready sooner.
class Calendar {
 public:
  // Plans are symmetric, and a gap is often exactly as long as the work
  // offered to it: it fits to within kSlack, so that rounding does not
  // decide (it made some plans' times drop by a quarter from one size to
  // the next).
  static constexpr double kSlack = 1e-12;  // seconds: far below any cost priced

  // The earliest time from `ready` at which `work` fits; spans that ended
  // by `now` (the event being handled: nothing is ready before it) are
  // dropped first.
  double first_fit(double now, double ready, double work) {
    std::size_t gone = 0;
    while (gone < busy_.size() && busy_[gone].to <= now) ++gone;
    busy_.erase(busy_.begin(), busy_.begin() + static_cast<std::ptrdiff_t>(gone));
    double at = ready;
    for (const Busy& b : busy_) {
      if (b.to <= at + kSlack) continue;
      if (b.from >= at + work - kSlack) break;
      at = b.to;
    }
    return at;
  }
  void book(double at, double work) {
    const auto pos = std::upper_bound(busy_.begin(), busy_.end(), at, [](double t, const Busy& b) { return t < b.from; });
    busy_.insert(pos, Busy{at, at + work});
  }

 private:
  struct Busy {
    double from, to;
  };
  std::vector<Busy> busy_;
};

// A calendar, and how long a message holds it.
struct Hold {
  Calendar* cal = nullptr;
  double span = 0.0;
};

// The earliest time from `ready` at which every hold fits its calendar
// (`now`: the event being handled).
double first_fit(std::span<const Hold> holds, double now, double ready) {
  for (double tried = -1; tried != ready;) {
    tried = ready;
    for (const Hold& h : holds) ready = h.cal->first_fit(now, ready, h.span);
  }
  return ready;
}

struct Loc {
  int rank = -1;
  int step = -1;
};

// Elements the executor copies into each rank's Output before the plan, as
// the buffer contract wants (plan.hpp), out of place: the contribution of
// an all-reduce or reduce, the own block of an all-gather; none for a plan
// that reads its Input itself (Plan::reads_input). Without it such a plan
// would pay for a copy the others get free.
std::int64_t contract_copy(const Plan& p) {
  if (p.reads_input) return 0;
  switch (p.coll) {
    case Collective::AllReduce:
    case Collective::Reduce:
    case Collective::AllGather: return p.args.count;
    default: return 0;
  }
}

// The bytes of Input, Output and Scratch (or of Scratch alone) of the ranks
// of the host that holds the most (CostParams::cache_bytes: whether a
// call's data fits in its cache). One host where the plan has no layout.
double host_buffer_bytes(const Plan& p, bool scratch_only = false) {
  const std::vector<int>& host_of = p.args.topology.host_of;
  std::unordered_map<int, double> on;
  double most = 0.0;
  for (int r = 0; r < static_cast<int>(p.ranks.size()); ++r) {
    const std::int64_t elems = (scratch_only ? 0 : input_count(p, r) + output_count(p.args, r)) +
                               p.ranks[static_cast<std::size_t>(r)].scratch_count;
    const int h = static_cast<std::size_t>(r) < host_of.size() ? host_of[static_cast<std::size_t>(r)] : 0;
    most = std::max(most, on[h] += static_cast<double>(elems) * static_cast<double>(p.args.elem_size));
  }
  return most;
}

// Discrete-event simulation of one plan (see cost_model.hpp for the rules).
class Simulator {
 public:
  // `one_call`: the plan one call runs, where `p` is several back to back
  // (back_to_back.cpp); whether it fits the fast boxes is a matter of one call.
  Simulator(const Plan& p, const LinkCosts& links, const Plan* one_call = nullptr)
      : p_(p), c_(links.local), remote_(links.remote), n_(static_cast<int>(p.ranks.size())),
        hosts_(several_hosts(p.args.topology.host_of, static_cast<std::size_t>(n_)) ? &p.args.topology.host_of : nullptr),
        boxed_(!hosts_ && c_.fastbox_alpha_s > 0 && fits_fastbox(one_call ? *one_call : p)),
        in_cache_(c_.cache_bytes > 0 && host_buffer_bytes(one_call ? *one_call : p) <= 0.5 * c_.cache_bytes),
        local_factor_(in_cache_ ? c_.cache_factor : 1.0),
        by_operand_(c_.cache_bytes > 0 && !in_cache_),
        scratch_in_cache_(by_operand_ && host_buffer_bytes(one_call ? *one_call : p, true) <= 0.25 * c_.cache_bytes) {
    const Topology& t = p.args.topology;
    if (hosts_ && t.machine_cpus > 0 && t.machine_of.size() == static_cast<std::size_t>(n_)) {
      machines_ = &t.machine_of;
      // k ranks to a CPU: a message is seen once its receiver runs again,
      // behind the k-1 others' turns (each of which polls, yields, and
      // reads its sockets): kSharedTcpTurn each, on every message.
      std::unordered_map<int, int> ranks_on;
      int most = 0;
      for (int m : t.machine_of) most = std::max(most, ++ranks_on[m]);
      const double turns = std::max(0.0, static_cast<double>(most) / t.machine_cpus - 1.0);
      turn_s_ = turns * kSharedTcpTurn;
      c_.alpha_s += turn_s_;
      remote_.alpha_s += turn_s_;
      if (t.machine_stream_s_per_byte > 0) stream_s_per_byte_ = t.machine_stream_s_per_byte;
    }
  }

  double run() {
    setup();
    while (!events_.empty()) {
      const Event e = events_.top();
      events_.pop();
      now_ = e.time;
      const Step& s = step(e.rank, e.step);
      if (s.kind == StepKind::Copy || s.kind == StepKind::Reduce || s.kind == StepKind::Get ||
          s.kind == StepKind::GetReduce || s.kind == StepKind::Put) {
        // Local work at the rank's own costs; reaching a peer at the link's.
        const CostParams& l = link(e.rank, s.peer);
        const bool copies = s.kind == StepKind::Copy || s.kind == StepKind::Get || s.kind == StepKind::Put;
        double work = (copies ? c_.copy_s_per_byte : c_.gamma_s_per_byte) * bytes(s.dst.count) * local_factor_;
        // The span in the peer's memory: a Get's source, a Put's destination.
        // A Put is priced like a Get of the same bytes, on the writer's CPU.
        const bool remote = s.kind == StepKind::Get || s.kind == StepKind::GetReduce || s.kind == StepKind::Put;
        const Span& theirs = s.kind == StepKind::Put ? s.dst : s.src;
        if (by_operand_) work = by_operand(e.rank, s, l, copies, remote);
        if (remote && theirs.count) {
          if (theirs.buf != Buf::Scratch || l.remote_scratch) {
            work += l.peer_read_s + l.peer_read_s_per_byte * bytes(theirs.count);
          } else if (!by_operand_) {  // (by_operand prices a peer's Scratch itself)
            // Hot only while every rank's share fits in cache (~8 MiB in
            // all): a pipeline's chunks do, whatever the size of the whole.
            const bool hot = bytes(theirs.count) * p_.args.nranks <= 8.0 * 1024 * 1024;
            // Across CPUs, from the peer's cache: a copy is the crossing
            // alone, a reduction its own work and the crossing. Where the
            // buffers do not fit the cache, memory's traffic sets the pace,
            // and the fraction of a copy that was fitted so stands.
            if (hot && in_cache_ && l.cross_s_per_byte > 0)
              work = (copies ? 0.0 : work) + l.cross_s + l.cross_s_per_byte * bytes(theirs.count);
            else work *= hot ? l.hot_read_factor : 1.0;
          }
        }
        // A Put of what the step it follows has just written, no more than
        // kHotPutBytes, reads it from cache: only the write into the peer
        // costs (push's chunks on host memory).
        if (!by_operand_ && s.kind == StepKind::Put && bytes(s.src.count) <= kHotPutBytes && wrote_before(e.rank, s))
          work = std::max(0.0, work - 0.5 * c_.copy_s_per_byte * bytes(s.src.count) * local_factor_);
        // Broadcasts are priced in place (contract_copy: none), as torch and
        // most callers run them: there a root's copy of its Input into the
        // same span of its Output (a reads_input plan's) is the identity,
        // which the runtime skips.
        if (s.kind == StepKind::Copy && p_.coll == Collective::Broadcast && s.src.buf == Buf::Input &&
            s.dst.buf == Buf::Output && s.src.offset == s.dst.offset)
          work = 0.0;
        if (machines_) {
          complete(e.rank, e.step, take_cpu(machine(e.rank), e.time, work));
          continue;
        }
        if (!p_.one_sided) {
          complete(e.rank, e.step, e.time + work);
          continue;
        }
        double& cpu = cpu_port_[static_cast<std::size_t>(e.rank)];
        cpu = std::max(e.time, cpu) + work;
        complete(e.rank, e.step, cpu);
        continue;
      }
      if (s.kind == StepKind::Signal) {
        complete(e.rank, e.step, e.time);
        const Loc w = partner_[idx(e.rank, e.step)];
        if (w.rank >= 0 && is_ready_[idx(w.rank, w.step)])
          events_.push({std::max(ready_at_[idx(w.rank, w.step)], e.time + link(e.rank, w.rank).signal_s), w.rank,
                        w.step});
        continue;
      }
      if (s.kind == StepKind::Wait) {  // its time already includes the signal's
        complete(e.rank, e.step, e.time);
        continue;
      }
      if (s.kind == StepKind::Recv || s.kind == StepKind::RecvReduce) {
        // An eager message that arrived before this Recv was ready: it has
        // it now (e.time is the later of the two).
        receive(e.rank, e.step, e.time, bytes(s.dst.count));
        continue;
      }
      // A message, keyed by its Send: both ends are ready at e.time (or,
      // eager, the Send is).
      const Loc rcv = partner_[idx(e.rank, e.step)];
      const double b = bytes(s.src.count);
      // Across hosts the ranks of a host share its link: the bytes also
      // hold the sending host's way out and the receiving host's way in.
      // A rank's messages across hosts and those with its host-mates go
      // through ports of their own (another transport: TCP beside shared
      // memory): with one pair of ports, a rank's exchanges with its
      // host-mates queued behind crossings that waited for a busy link, as
      // the ports are taken in the order events pop. Hierarchical plans
      // share one slice inside while the next crosses, and were priced as
      // if they could not (all_gather of 2 MiB on 2 hosts x 2 ranks at 4
      // Gbit/s: 5.1 ms, so ring was chosen, 3.3 ms measured, where
      // hierarchical measured 2.2 ms).
      const bool crosses = hosts_ && host(e.rank) != host(rcv.rank);
      const CostParams& l = link(e.rank, rcv.rank);
      const double alpha = boxed_ ? l.fastbox_alpha_s : l.alpha_s + protocol_s(l, b);
      // Where the bytes are (CostParams::cache_bytes): beta holds while
      // they are in cache; from memory each of the transport's own copies
      // costs what memory's rate adds to a copy (on one host: a link's
      // rate is its wire's).
      const double from_memory = c_.cache_bytes > 0 && !in_cache_ && !crosses
                                     ? l.transport_copies * l.copy_s_per_byte * (1.0 - l.cache_factor)
                                     : 0.0;
      const double per_byte = (boxed_ ? l.fastbox_beta_s_per_byte : l.beta_s_per_byte + from_memory) * b;
      // When the ends are through with it (send_share): neither the wire's
      // part of alpha nor, on a shared machine, the receiver's wait for its
      // turn on a CPU (turn_s_) holds them.
      const double own = l.send_share > 0 ? l.send_share * (alpha - (boxed_ ? 0.0 : turn_s_)) : 0.0;
      const double hold = l.send_share > 0 ? own + per_byte : alpha + per_byte;
      // On several hosts each of what the message holds (its ends' ports
      // and, across hosts, both hosts' links) is a calendar, and it takes
      // the first time all are free for it. One that must wait for a busy
      // link leaves the gaps before it to messages ready later. When each
      // was a time it is free from, a wait booked all of them up to the
      // message's start, and hierarchical all_gather, whose every rank sends
      // to every other host at once, was priced 3.4x ring's time where it
      // measures the same (4 hosts x 2 ranks at 4 Gbit/s, 32 MiB: 210 ms
      // against 62 measured). On one host the ports keep the old rule: the
      // one-host constants were fitted under it.
      Hold holds[4] = {};
      std::span<Hold> held;
      double start = e.time;
      if (hosts_) {
        holds[0] = {&(crosses ? xsend_cal_ : send_cal_)[static_cast<std::size_t>(e.rank)], hold};
        holds[1] = {&(crosses ? xrecv_cal_ : recv_cal_)[static_cast<std::size_t>(rcv.rank)], hold};
        if (crosses) {
          holds[2] = {&nic_out_[host(e.rank)], l.beta_s_per_byte * b};
          holds[3] = {&nic_in_[host(rcv.rank)], l.beta_s_per_byte * b};
        }
        held = std::span<Hold>(holds, crosses ? 4 : 2);
        start = first_fit(held, now_, e.time);
      } else {
        start = std::max({start, send_port_[static_cast<std::size_t>(e.rank)], recv_port_[static_cast<std::size_t>(rcv.rank)]});
      }
      double arrive = start + alpha + per_byte;
      double through = l.send_share > 0 ? start + own + per_byte : arrive;
      // Hosts emulated on one machine: both ends' work on the bytes takes a
      // CPU of the machine each (cost_model.hpp, kMachineStreamSPerByte):
      // over TCP the sender's kernel carries the stream and the receiver
      // copies it out; between host-mates that share memory each copies
      // (into the shared ring, out of it). The message arrives no sooner
      // than both are through. The link itself is not held longer: a shaped
      // one leaves the CPUs time to spare.
      if (machines_ && machine(e.rank) == machine(rcv.rank)) {
        const bool tcp = crosses || !p_.args.topology.host_shares_memory;
        const double sent = take_cpu(machine(e.rank), start, (tcp ? stream_s_per_byte_ : l.copy_s_per_byte) * b);
        arrive = std::max({arrive, sent + l.alpha_s, take_cpu(machine(rcv.rank), start, l.copy_s_per_byte * b) + l.alpha_s});
        through = l.send_share > 0 ? std::max(through, sent) : arrive;
      }
      if (hosts_) {
        holds[0].span = holds[1].span = through - start;
        for (const Hold& h : held) h.cal->book(start, h.span);
      } else {
        send_port_[static_cast<std::size_t>(e.rank)] = recv_port_[static_cast<std::size_t>(rcv.rank)] = through;
      }
      // A rendezvous Send completes when the message arrives, an eager one
      // when its sender is through with it.
      complete(e.rank, e.step, eager(e.rank, rcv.rank, b) ? through : arrive);
      const std::size_t k = idx(rcv.rank, rcv.step);
      if (!is_ready_[k]) {  // eager, ahead of its Recv: held until that is ready (on_ready)
        arrived_at_[k] = arrive;
        continue;
      }
      receive(rcv.rank, rcv.step, std::max(arrive, ready_at_[k]), b);
    }
    if (finished_ != total_) return std::numeric_limits<double>::infinity();
    return latest_;
  }

 private:
  // A local step of a plan whose buffers do not fit the cache, priced by
  // where each operand is: the rank's own Input and Output in memory, its
  // Scratch in cache where every rank's Scratch fits in a quarter of it (a
  // pipeline's chunks stay there while Input and Output stream through; a
  // one-shot plan's whole Scratch does not: priced in cache at half, a
  // 2-rank all_gather of 16 MiB took oneshot, 16 MiB of Scratch in all,
  // and measured 1.44x staged's time), a peer's freshly written Scratch
  // across CPUs, a cache line's round trip to start and cross_s_per_byte;
  // and what the step before a hot Put wrote, in cache. A copy's source and
  // destination carry half of its rate each, a reduction's source a third
  // and its destination (read and written) two. Memory's traffic and the
  // rest overlap, so the step takes the longer of the two (a roofline):
  // `staged` all_reduce of 16 MiB at 2 ranks reads each Input byte once and
  // writes each Output byte once, 1.40-1.50 ms in the host's usual phase
  // (two CPUs copying at once move 43-46 GB/s), 2.04-2.15 in its slow one,
  // where the crossings take longer than memory's part; priced as a sum,
  // 1.94 in both (bench/RESULTS.md section 50).
  double by_operand(int r, const Step& s, const CostParams& l, bool copies, bool remote) const {
    const double b = bytes(s.dst.count);
    const double rate = (copies ? c_.copy_s_per_byte : c_.gamma_s_per_byte) * b;
    const double src_share = copies ? 0.5 : 1.0 / 3.0;
    double memory = 0.0, near = 0.0;
    auto operand = [&](const Span& span, bool peers, bool just_written, double share) {
      if (span.buf == Buf::Scratch && peers && !l.remote_scratch && scratch_in_cache_ && l.cross_s_per_byte > 0)
        near += l.cross_s + l.cross_s_per_byte * b;
      else if (just_written || (span.buf == Buf::Scratch && !peers && scratch_in_cache_))
        near += share * rate * c_.cache_factor;
      else
        memory += share * rate;
    };
    const bool hot_put = s.kind == StepKind::Put && bytes(s.src.count) <= kHotPutBytes && wrote_before(r, s);
    operand(s.src, remote && s.kind != StepKind::Put, hot_put, src_share);
    operand(s.dst, s.kind == StepKind::Put, false, 1.0 - src_share);
    return std::max(memory, near);
  }

  // Whether one of s's dependencies wrote exactly the span s reads.
  bool wrote_before(int r, const Step& s) const {
    for (auto d : s.deps) {
      const Step& w = step(r, d);
      if (w.kind != StepKind::Send && w.dst.buf == s.src.buf && w.dst.offset == s.src.offset &&
          w.dst.count == s.src.count)
        return true;
    }
    return false;
  }

  struct Event {
    double time;
    int rank;
    int step;
    bool operator>(const Event& o) const {
      if (time != o.time) return time > o.time;
      return rank != o.rank ? rank > o.rank : step > o.step;
    }
  };

  const Step& step(int r, int i) const {
    return p_.ranks[static_cast<std::size_t>(r)].steps[static_cast<std::size_t>(i)];
  }
  std::size_t idx(int r, int i) const { return offset_[static_cast<std::size_t>(r)] + static_cast<std::size_t>(i); }
  double bytes(std::int64_t count) const {
    return static_cast<double>(count) * static_cast<double>(p_.args.elem_size);
  }

  void setup() {
    offset_.assign(static_cast<std::size_t>(n_) + 1, 0);
    for (int r = 0; r < n_; ++r)
      offset_[static_cast<std::size_t>(r) + 1] = offset_[static_cast<std::size_t>(r)] + p_.ranks[static_cast<std::size_t>(r)].steps.size();
    total_ = offset_.back();
    // The executor's copy into Output before the plan starts (contract_copy),
    // alike on every rank: every step, and every CPU, is free only after it.
    const double init = c_.copy_s_per_byte * bytes(contract_copy(p_)) * local_factor_;
    latest_ = init;
    partner_.assign(total_, Loc{});
    pending_.assign(total_, 0);
    ready_at_.assign(total_, init);
    is_ready_.assign(total_, 0);
    dependents_.assign(total_, {});
    send_port_.assign(static_cast<std::size_t>(n_), 0.0);
    recv_port_.assign(static_cast<std::size_t>(n_), 0.0);
    for (auto* cals : {&send_cal_, &recv_cal_, &xsend_cal_, &xrecv_cal_}) cals->assign(hosts_ ? static_cast<std::size_t>(n_) : 0, Calendar{});
    cpu_port_.assign(static_cast<std::size_t>(n_), init);
    signaled_at_.assign(total_, -1.0);
    arrived_at_.assign(total_, -1.0);

    std::unordered_map<std::uint64_t, Loc> sends;
    auto key = [](int from, int to, std::int32_t slot) {
      return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(from)) << 44) ^
             (static_cast<std::uint64_t>(static_cast<std::uint32_t>(to)) << 32) ^ static_cast<std::uint32_t>(slot);
    };
    std::unordered_map<std::uint64_t, Loc> signals;
    for (int r = 0; r < n_; ++r)
      for (int i = 0; i < nsteps(r); ++i) {
        if (step(r, i).kind == StepKind::Send) sends.emplace(key(r, step(r, i).peer, step(r, i).slot), Loc{r, i});
        if (step(r, i).kind == StepKind::Signal) signals.emplace(key(r, step(r, i).peer, step(r, i).slot), Loc{r, i});
      }
    for (int r = 0; r < n_; ++r) {
      for (int i = 0; i < nsteps(r); ++i) {
        const Step& s = step(r, i);
        if (s.kind == StepKind::Recv || s.kind == StepKind::RecvReduce || s.kind == StepKind::Wait) {
          auto& from = s.kind == StepKind::Wait ? signals : sends;
          auto it = from.find(key(s.peer, r, s.slot));
          if (it != from.end()) {  // an unmatched receive or wait just never runs
            partner_[idx(r, i)] = it->second;
            partner_[idx(it->second.rank, it->second.step)] = Loc{r, i};
          }
        }
        std::vector<std::int32_t> deps = s.deps;
        std::sort(deps.begin(), deps.end());
        deps.erase(std::unique(deps.begin(), deps.end()), deps.end());
        for (auto d : deps)
          if (d >= 0 && d < nsteps(r)) {
            dependents_[idx(r, d)].push_back(i);
            ++pending_[idx(r, i)];
          }
      }
    }
    for (int r = 0; r < n_; ++r)
      for (int i = 0; i < nsteps(r); ++i)
        if (pending_[idx(r, i)] == 0) on_ready(r, i);
  }

  int nsteps(int r) const { return static_cast<int>(p_.ranks[static_cast<std::size_t>(r)].steps.size()); }

  void on_ready(int r, int i) {
    const std::size_t k = idx(r, i);
    is_ready_[k] = 1;
    const StepKind kind = step(r, i).kind;
    if (kind != StepKind::Send && kind != StepKind::Recv && kind != StepKind::RecvReduce && kind != StepKind::Wait)
      return events_.push({ready_at_[k], r, i});
    const Loc o = partner_[k];
    if (kind == StepKind::Wait) {  // done signal_s after its signal, once ready
      if (o.rank >= 0 && signaled_at_[idx(o.rank, o.step)] >= 0)
        events_.push({std::max(ready_at_[k], signaled_at_[idx(o.rank, o.step)] + link(o.rank, r).signal_s), r, i});
      return;
    }
    if (o.rank < 0) return;
    // Eager: the Send goes when it is ready; its Recv completes when it is
    // ready too, once the message has arrived.
    const bool sending = kind == StepKind::Send;
    const Loc from = sending ? Loc{r, i} : o;
    const Loc to = sending ? o : Loc{r, i};
    if (eager(from.rank, to.rank, bytes(step(from.rank, from.step).src.count))) {
      if (sending) events_.push({ready_at_[k], r, i});
      else if (arrived_at_[k] >= 0) events_.push({std::max(ready_at_[k], arrived_at_[k]), r, i});
      return;
    }
    if (!is_ready_[idx(o.rank, o.step)]) return;
    const double t = std::max(ready_at_[k], ready_at_[idx(o.rank, o.step)]);
    if (kind == StepKind::Send)
      events_.push({t, r, i});
    else
      events_.push({t, o.rank, o.step});
  }

  void complete(int r, int i, double finish) {
    ++finished_;
    if (step(r, i).kind == StepKind::Signal) signaled_at_[idx(r, i)] = finish;
    latest_ = std::max(latest_, finish);
    for (int j : dependents_[idx(r, i)]) {
      const std::size_t k = idx(r, j);
      ready_at_[k] = std::max(ready_at_[k], finish);
      if (--pending_[k] == 0) on_ready(r, j);
    }
  }

  // Recv step i of rank r has its message (of b bytes) at `got`: done then,
  // a RecvReduce once it has combined it (on a CPU of the shared machine,
  // where there is one).
  void receive(int r, int i, double got, double b) {
    double done = got;
    if (step(r, i).kind == StepKind::RecvReduce)
      done = machines_ ? take_cpu(machine(r), got, c_.gamma_s_per_byte * local_factor_ * b)
                       : got + c_.gamma_s_per_byte * local_factor_ * b;
    complete(r, i, done);
  }

  // Whether a message of `n` bytes from rank `from` to rank `to` leaves
  // before its Recv is ready (CostParams::eager_bytes); never in one-sided
  // plans.
  bool eager(int from, int to, double n) const {
    if (p_.one_sided) return false;
    const double limit = link(from, to).eager_bytes;
    return limit > 0 && n <= limit;
  }

  // The costs between ranks a and b (a local step: a == b, or b < 0).
  const CostParams& link(int a, int b) const {
    if (!hosts_ || b < 0 || a == b) return c_;
    return host(a) == host(b) ? c_ : remote_;
  }
  int host(int r) const { return (*hosts_)[static_cast<std::size_t>(r)]; }
  int machine(int r) const { return (*machines_)[static_cast<std::size_t>(r)]; }
  // Hosts emulated on one machine share its CPUs (Topology::machine_cpus):
  // work ready at `ready` runs on the CPU that can finish it first, in the
  // first gap long enough. Gaps matter: a message reserves CPU time when
  // its link frees, later than steps popped after it may be ready, and
  // queueing those behind it priced a shaped ring broadcast three times
  // what it measures.
  double take_cpu(int m, double ready, double work) {
    auto& cpus = cpus_[m];
    if (cpus.empty()) cpus.resize(static_cast<std::size_t>(p_.args.topology.machine_cpus));
    Calendar* best = nullptr;
    double best_at = 0.0;
    for (Calendar& cpu : cpus) {
      const double at = cpu.first_fit(now_, ready, work);
      if (!best || at < best_at) best = &cpu, best_at = at;
    }
    best->book(best_at, work);
    return best_at + work;
  }

  const Plan& p_;
  CostParams c_;       // on one host (and every local step)
  CostParams remote_;  // between hosts
  const int n_;
  const std::vector<int>* hosts_;  // null: one host
  const bool boxed_;               // the plan runs over fast boxes
  // Its buffers fit the host's cache (CostParams::cache_bytes; in half of
  // it, which also holds the rest of the ranks' and the kernel's data: a
  // 2-rank broadcast of 16 MiB, 32 MiB in all, runs at memory's pace), and
  // local work runs at cache_factor of memory's rates (1: memory's).
  const bool in_cache_;
  const double local_factor_;
  // Beyond the cache (where it is modelled) a local step is priced by where
  // each of its operands is (by_operand), and Scratch may still fit.
  const bool by_operand_;
  const bool scratch_in_cache_;
  const std::vector<int>* machines_ = nullptr;  // null: each host its own machine
  double turn_s_ = 0.0;  // kSharedTcpTurn's part of every message's alpha (machines_)
  // A stream's time per byte on its sender's CPU between hosts of one machine (machines_).
  double stream_s_per_byte_ = kMachineStreamSPerByte;
  // Per machine, per CPU: its busy spans.
  std::unordered_map<int, std::vector<Calendar>> cpus_;
  double now_ = 0.0;  // the time of the event being handled
  std::vector<std::size_t> offset_;  // first flat index of each rank's steps
  std::size_t total_ = 0, finished_ = 0;
  double latest_ = 0.0;
  std::vector<Loc> partner_;
  std::vector<int> pending_;
  std::vector<double> ready_at_;
  std::vector<char> is_ready_;
  std::vector<std::vector<int>> dependents_;
  std::vector<double> send_port_, recv_port_;     // one host: when each rank's ports are next free
  std::vector<Calendar> send_cal_, recv_cal_;     // several hosts: each rank's ports for its host-mates
  std::vector<Calendar> xsend_cal_, xrecv_cal_;   // and for messages across hosts
  std::unordered_map<int, Calendar> nic_out_, nic_in_;  // per host id: its link each way
  std::vector<double> cpu_port_;               // one-sided plans: when each rank's CPU is next free
  std::vector<double> signaled_at_;            // per Signal: when it was issued (-1: not yet)
  std::vector<double> arrived_at_;             // per Recv: when its eager message arrived (-1: not yet)
  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> events_;
};

std::string lower_trimmed(const std::string& s) {
  std::size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  std::string out;
  for (std::size_t i = b; i < e; ++i) out += static_cast<char>(std::tolower(static_cast<unsigned char>(s[i])));
  return out;
}

std::string names_text(Collective coll) {
  const auto names = algorithm_names(coll);
  if (names.empty()) return "(none registered)";
  std::string s;
  for (const auto& n : names) s += (s.empty() ? "" : ", ") + n;
  return s;
}

std::string collective_names_text() {
  std::string s;
  for (int i = 0; i < kNumCollectives; ++i) s += (i ? ", " : "") + std::string(collective_name(static_cast<Collective>(i)));
  return s;
}

}  // namespace

CostParams sharing_cpus(const CostParams& p) {
  CostParams q = p;
  q.signal_s = std::max(q.signal_s, kSharedCpuRound);
  q.alpha_s = std::max(q.alpha_s, kSharedCpuRound);
  if (q.fastbox_alpha_s > 0) q.fastbox_alpha_s = std::max(q.fastbox_alpha_s, kSharedCpuRound);
  return q;
}

double predict_seconds(const Plan& plan, const CostParams& params) { return predict_seconds(plan, {params, params}); }

namespace {

// `plan` priced with the costs its topology implies; `one_call` as Simulator's.
double simulate(const Plan& plan, const LinkCosts& links, const Plan* one_call) {
  const Topology& t = plan.args.topology;
  if (!t.one_host || (!t.shared_cpus && !t.mapped_buffers)) return Simulator(plan, links, one_call).run();
  CostParams p = t.shared_cpus ? sharing_cpus(links.local) : links.local;
  if (t.mapped_buffers) p.peer_read_s = p.peer_read_s_per_byte = 0.0;  // a mapping: a local read
  return Simulator(plan, {p, p}, one_call).run();
}

}  // namespace

double predict_seconds(const Plan& plan, const LinkCosts& links) {
  return simulate(plan, links, nullptr) + links.local.call_s;
}

double predict_seconds_per_call(const Plan& plan, const LinkCosts& links, int calls) {
  if (calls <= 1) return predict_seconds(plan, links);
  return simulate(back_to_back(plan, calls, contract_copy(plan)), links, &plan) / calls + links.local.call_s;
}

CostParams with_caches(const CostParams& p, double cache_bytes, double line_exchange_s) {
  CostParams q = p;
  q.cache_bytes = cache_bytes;
  q.cache_factor = kCacheFactor;
  q.cross_s = line_exchange_s > 0 ? line_exchange_s : kLineExchangeS;
  q.cross_s_per_byte = kCrossPerLineExchange * q.cross_s;
  return q;
}

bool prices_caches(const PlanArgs& args) {
  const Topology& t = args.topology;
  return t.one_host && !t.shared_cpus && !t.mapped_buffers && t.device_of.empty() &&
         !several_hosts(t.host_of, static_cast<std::size_t>(args.nranks));
}

CostParams with_line_exchange(const CostParams& p, double line_exchange_s) {
  CostParams q = p;
  if (line_exchange_s <= 0) return q;
  if (q.fastbox_alpha_s > 0) {
    q.fastbox_alpha_s = fastbox_message_s(line_exchange_s);
    q.fastbox_beta_s_per_byte = fastbox_byte_s(line_exchange_s);
  }
  if (q.segment_bytes == kLoopbackSegmentBytes) {
    q.alpha_s = q.signal_s = tcp_message_s(line_exchange_s);
    q.beta_s_per_byte = tcp_byte_s(line_exchange_s);
  }
  return q;
}

double protocol_s(const CostParams& c, double bytes) {
  double t = 0;
  if (c.rendezvous_bytes > 0 && bytes > c.rendezvous_bytes) t += 2 * c.alpha_s;
  if (c.segment_bytes > 0 && bytes > c.segment_bytes) t += std::floor((bytes - 1) / c.segment_bytes) * c.segment_s;
  return t;
}

CostParams with_link(const CostParams& base, double latency_s, double s_per_byte) {
  CostParams c = base;
  if (latency_s > 0) {
    c.alpha_s = c.signal_s = latency_s;
    if (c.peer_read_s > 0) c.peer_read_s = 2 * latency_s;
  }
  if (s_per_byte > 0) {
    // A link measured between hosts: its rate has its segments' costs in
    // it; and its handshake (two of its latencies before a rendezvous's
    // data) is left out, as the choices between hosts were measured
    // without it (the grid, bench/RESULTS.md section 48): pricing it moved
    // up to 11 of them per grid configuration, not yet measured.
    c.beta_s_per_byte = s_per_byte;
    c.segment_bytes = c.segment_s = c.rendezvous_bytes = 0.0;
    if (c.peer_read_s_per_byte > 0) c.peer_read_s_per_byte = s_per_byte;
  }
  return c;
}

LinkCosts link_costs(const CostParams& local, const CostParams& remote, const std::vector<int>& host_of) {
  // Several hosts: nothing is one host's, so no fast boxes and no one-host
  // one-sided figures for the local pairs, only their message costs.
  if (!several_hosts(host_of, host_of.size())) return {local, local};
  CostParams l = local;
  l.fastbox_alpha_s = l.fastbox_beta_s_per_byte = 0.0;
  return {l, remote};
}

const Algorithm* choose(Collective coll, const PlanArgs& args, const CostParams& params,
                        const std::string& forced_name) {
  return choose(coll, args, LinkCosts{params, params}, forced_name);
}

const Algorithm* choose(Collective coll, const PlanArgs& args, const LinkCosts& params,
                        const std::string& forced_name) {
  PlanArgs a = args;
  a.coll = coll;
  if (!forced_name.empty()) {
    const Algorithm* alg = find_algorithm(coll, forced_name);
    if (!alg)
      fail(ErrorCode::InvalidArgument, "unknown {} algorithm '{}'; valid names: {}", collective_name(coll),
           forced_name, names_text(coll));
    if (alg->supports && !alg->supports(a))
      fail(ErrorCode::InvalidArgument, "{} algorithm '{}' does not support {} ranks with count {}{}; valid names: {}",
           collective_name(coll), forced_name, a.nranks, a.count,
           a.splits.empty() ? "" : " and uneven splits (the list form of all_to_all counts as uneven)",
           names_text(coll));
    return alg;
  }
  const Algorithm* best = nullptr;
  double best_time = std::numeric_limits<double>::infinity();
  for (const Algorithm& alg : algorithms()) {
    if (alg.coll != coll || !alg.automatic || (alg.supports && !alg.supports(a)) || (alg.offered && !alg.offered(a)))
      continue;
    // Above kSimulateRanks a whole plan is too large to play (estimate.hpp):
    // each algorithm is priced by its formula, and one without is not offered.
    const double t = a.nranks > kSimulateRanks ? estimate_seconds(alg, a, params) : predict_seconds(alg.build(a), params);
    if (t < 0) continue;
    if (!best || t < best_time) {
      best = &alg;
      best_time = t;
    }
  }
  if (!best)
    fail(ErrorCode::NotSupported, "no {} algorithm supports {} ranks with count {}; registered: {}",
         collective_name(coll), a.nranks, a.count, names_text(coll));
  return best;
}

std::map<Collective, std::string> parse_algo_env(const std::string& text) {
  std::map<Collective, std::string> chosen;
  std::size_t pos = 0;
  while (pos <= text.size()) {
    std::size_t end = text.find(';', pos);
    if (end == std::string::npos) end = text.size();
    const std::string item = text.substr(pos, end - pos);
    pos = end + 1;
    if (lower_trimmed(item).empty()) continue;

    const std::size_t colon = item.find(':');
    const std::string name = lower_trimmed(colon == std::string::npos ? item : item.substr(colon + 1));
    if (name.find(',') != std::string::npos || name.starts_with('^'))
      fail(ErrorCode::InvalidArgument,
           "BRAID_ALGO item '{}': expected one algorithm per collective (lists and '^' exclusions are not "
           "supported)",
           item);
    if (colon == std::string::npos) {
      // A bare name applies to every collective that has it.
      bool any = false;
      for (int i = 0; i < kNumCollectives; ++i) {
        const auto c = static_cast<Collective>(i);
        if (find_algorithm(c, name)) {
          chosen[c] = name;
          any = true;
        }
      }
      if (!any) {
        std::vector<std::string> known;
        for (const Algorithm& a : algorithms())
          if (std::find(known.begin(), known.end(), a.name) == known.end()) known.emplace_back(a.name);
        std::string all;
        for (const auto& k : known) all += (all.empty() ? "" : ", ") + k;
        fail(ErrorCode::InvalidArgument, "BRAID_ALGO: no collective has an algorithm named '{}'; known names: {}",
             name, all.empty() ? "(none registered)" : all);
      }
      continue;
    }
    Collective coll;
    const std::string coll_text = lower_trimmed(item.substr(0, colon));
    if (!parse_collective(coll_text, &coll))
      fail(ErrorCode::InvalidArgument, "BRAID_ALGO item '{}': unknown collective '{}'; expected one of: {}", item,
           coll_text, collective_names_text());
    if (!find_algorithm(coll, name))
      fail(ErrorCode::InvalidArgument, "BRAID_ALGO item '{}': unknown {} algorithm '{}'; valid names: {}", item,
           collective_name(coll), name, names_text(coll));
    chosen[coll] = name;
  }
  return chosen;
}

}  // namespace braid::plan
