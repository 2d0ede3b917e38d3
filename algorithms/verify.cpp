// The symbolic verifier (see verify.hpp for what it proves).
//
// Why one file of ~1200 lines: it is one interpreter of the plan IR -- the
// symbolic buffer state, the step semantics (message and one-sided), the
// matching of sends to receives and the final check share their data
// structures; most of its length is the error messages that name the step.
#include "algorithms/verify.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <bit>
#include <set>
#include <cstdint>
#include <unordered_map>
#include <utility>
#include <vector>

namespace braid::plan {

namespace {

using i64 = std::int64_t;
using Mask = std::uint64_t;  // set of group ranks (bit r = rank r)

// The first failure found; thrown inside the verifier, caught by verify().
struct Failure {
  std::string message;
};

template <class... Args>
[[noreturn]] void reject(fmt::format_string<Args...> f, Args&&... args) {
  throw Failure{fmt::format(f, std::forward<Args>(args)...)};
}

Mask bit(int r) { return Mask{1} << r; }
Mask all_ranks(int n) { return n >= 64 ? ~Mask{0} : bit(n) - 1; }

// "{0-3,5}"
std::string mask_text(Mask m) {
  std::string s = "{";
  for (int r = 0; r < 64;) {
    if (!(m & bit(r))) {
      ++r;
      continue;
    }
    int e = r;
    while (e + 1 < 64 && (m & bit(e + 1))) ++e;
    if (s.size() > 1) s += ',';
    s += e == r ? fmt::format("{}", r) : fmt::format("{}-{}", r, e);
    r = e + 1;
  }
  return s + "}";
}

const char* buf_name(Buf b) {
  switch (b) {
    case Buf::Input: return "in";
    case Buf::Output: return "out";
    case Buf::Scratch: return "scratch";
  }
  return "?";
}

// A run of `len` elements from `start` holding consecutive symbolic values:
// element start+k holds (mask, index+k). For a reduction `mask` is the set of
// ranks whose contributions were combined; for data movement it is the one
// rank the data came from. mask == 0 means unwritten (index unused).
struct Run {
  i64 start;
  i64 len;
  Mask mask;
  i64 index;
};
using Values = std::vector<Run>;  // runs covering [0, n) of some span

bool continues(const Run& a, const Run& b) {
  return a.mask == b.mask && (a.mask == 0 || b.index == a.index + a.len);
}

std::string value_text(Mask mask, i64 index, i64 len, bool reduction) {
  if (mask == 0) return "nothing (unwritten)";
  const std::string elems = len == 1 ? fmt::format("element {}", index)
                                     : fmt::format("elements [{}..{})", index, index + len);
  if (reduction) return fmt::format("ranks {} combined, {}", mask_text(mask), elems);
  if (std::has_single_bit(mask)) return fmt::format("rank {}'s {}", std::countr_zero(mask), elems);
  return fmt::format("a mix of ranks {}, {}", mask_text(mask), elems);
}

// One buffer of one rank as runs of consecutive values. Cost is in runs, not
// elements: that is what keeps verification independent of `count`.
class SymBuffer {
 public:
  explicit SymBuffer(i64 size = 0) : size_(size) {
    if (size > 0) runs_.push_back({0, size, 0, 0});
  }
  const Values& runs() const { return runs_; }

  void fill(i64 off, i64 n, Mask mask, i64 index) {
    if (n > 0) write(off, {Run{0, n, mask, index}});
  }

  Values read(i64 off, i64 n) const {
    Values out;
    if (n <= 0) return out;
    auto it = std::upper_bound(runs_.begin(), runs_.end(), off,
                               [](i64 p, const Run& r) { return p < r.start; });
    for (--it; it != runs_.end() && it->start < off + n; ++it) {
      const i64 lo = std::max(it->start, off), hi = std::min(it->start + it->len, off + n);
      out.push_back({lo - off, hi - lo, it->mask, it->index + (lo - it->start)});
    }
    return out;
  }

  // `vals` covers [0, n) and lands at [off, off + n).
  void write(i64 off, const Values& vals) {
    if (vals.empty()) return;
    const i64 n = vals.back().start + vals.back().len;
    const std::size_t first = split(off);
    const std::size_t last = split(off + n);
    runs_.erase(runs_.begin() + static_cast<std::ptrdiff_t>(first),
                runs_.begin() + static_cast<std::ptrdiff_t>(last));
    Values shifted = vals;
    for (Run& r : shifted) r.start += off;
    runs_.insert(runs_.begin() + static_cast<std::ptrdiff_t>(first), shifted.begin(), shifted.end());
    coalesce(first == 0 ? 0 : first - 1, first + shifted.size());
  }

 private:
  // Makes a run start at p; returns its index (runs_.size() when p == size_).
  std::size_t split(i64 p) {
    if (p >= size_) return runs_.size();
    auto it = std::upper_bound(runs_.begin(), runs_.end(), p,
                               [](i64 q, const Run& r) { return q < r.start; });
    auto i = static_cast<std::size_t>(it - runs_.begin()) - 1;
    Run& r = runs_[i];
    if (r.start == p) return i;
    const Run tail{p, r.start + r.len - p, r.mask, r.index + (p - r.start)};
    r.len = p - r.start;
    runs_.insert(runs_.begin() + static_cast<std::ptrdiff_t>(i + 1), tail);
    return i + 1;
  }
  // Merges mergeable neighbours among runs [lo, hi].
  void coalesce(std::size_t lo, std::size_t hi) {
    hi = std::min(hi, runs_.size() - 1);
    std::size_t keep = lo;
    for (std::size_t i = lo + 1; i <= hi; ++i) {
      if (continues(runs_[keep], runs_[i]))
        runs_[keep].len += runs_[i].len;
      else
        runs_[++keep] = runs_[i];
    }
    runs_.erase(runs_.begin() + static_cast<std::ptrdiff_t>(keep + 1),
                runs_.begin() + static_cast<std::ptrdiff_t>(hi + 1));
  }

  i64 size_;
  Values runs_;
};

struct Loc {
  int rank = -1;
  int step = -1;
};

class Verifier {
 public:
  // `aliased`: verify a reads_input plan as an in-place call, where Input
  // and Output are the same memory (plan.hpp, Plan::reads_input).
  Verifier(const Plan& p, bool aliased) : p_(p), a_(p.args), n_(p.args.nranks), aliased_(aliased) {}

  void run() {
    check_args();
    for (int r = 0; r < n_; ++r) check_steps(r);
    if (p_.reads_input && a_.coll == Collective::AllGather) check_own_block_writes();
    check_step_family();
    match_messages();
    if (one_sided_) check_signal_order();
    for (int r = 0; r < n_; ++r) check_races(r);
    if (one_sided_) check_cross_rank();
    execute();
    check_result();
  }

 private:
  const Step& step(int r, int i) const {
    return p_.ranks[static_cast<std::size_t>(r)].steps[static_cast<std::size_t>(i)];
  }
  int nsteps(int r) const { return static_cast<int>(p_.ranks[static_cast<std::size_t>(r)].steps.size()); }

  // "rank 2 step 5 (send -> 3 slot 0 out[0..4))"
  std::string at(int r, int i) const {
    std::string s = to_string(step(r, i)), compact;
    for (char ch : s)
      if (ch != ' ' || (!compact.empty() && compact.back() != ' ')) compact += ch;
    while (!compact.empty() && compact.back() == ' ') compact.pop_back();
    return fmt::format("rank {} step {} ({})", r, i, compact);
  }

  i64 buf_size(int r, Buf b) const {
    const auto ur = static_cast<std::size_t>(r);
    switch (b) {
      case Buf::Input: return in_size_[ur];
      case Buf::Output: return out_size_[ur];
      case Buf::Scratch: return p_.ranks[ur].scratch_count;
    }
    return -1;
  }
  SymBuffer& buffer(int r, Buf b) {
    return bufs_[static_cast<std::size_t>(r) * 3 + static_cast<std::size_t>(phys(b))];
  }
  // The memory a buffer name stands for: in the in-place pass of a
  // reads_input plan, Input is Output.
  Buf phys(Buf b) const { return aliased_ && b == Buf::Input ? Buf::Output : b; }

  // Elements rank `from` sends rank `to` in an all-to-all, and where they sit.
  i64 split(int from, int to) const {
    return a_.splits.empty() ? a_.count
                             : a_.splits[static_cast<std::size_t>(from)][static_cast<std::size_t>(to)];
  }
  i64 in_offset(int from, int to) const {
    i64 off = 0;
    for (int j = 0; j < to; ++j) off += split(from, j);
    return off;
  }
  i64 out_offset(int at, int from) const {
    i64 off = 0;
    for (int i = 0; i < from; ++i) off += split(i, at);
    return off;
  }

  bool rooted() const {
    return a_.coll == Collective::Broadcast || a_.coll == Collective::Reduce || a_.coll == Collective::Gather ||
           a_.coll == Collective::Scatter;
  }

  void check_args() {
    if (n_ < 1 || n_ > kMaxVerifyRanks)
      reject("the verifier handles groups of 1..{} ranks; this plan has nranks = {}", kMaxVerifyRanks, n_);
    if (p_.ranks.size() != static_cast<std::size_t>(n_))
      reject("plan has {} rank plans but nranks = {}", p_.ranks.size(), n_);
    if (p_.coll != a_.coll)
      reject("plan.coll is {} but plan.args.coll is {}", collective_name(p_.coll), collective_name(a_.coll));
    if (a_.count < 0) reject("count = {} is negative", a_.count);
    if (rooted() && (a_.root < 0 || a_.root >= n_)) reject("root {} is not a rank of a {}-rank group", a_.root, n_);
    if (!a_.splits.empty()) {
      if (a_.coll != Collective::AllToAll) reject("splits are only meaningful for alltoall");
      if (a_.splits.size() != static_cast<std::size_t>(n_))
        reject("alltoall splits have {} rows, expected {} (one per sending rank)", a_.splits.size(), n_);
      for (int i = 0; i < n_; ++i) {
        const auto& row = a_.splits[static_cast<std::size_t>(i)];
        if (row.size() != static_cast<std::size_t>(n_))
          reject("alltoall splits row {} has {} entries, expected {}", i, row.size(), n_);
        for (int j = 0; j < n_; ++j)
          if (row[static_cast<std::size_t>(j)] < 0) reject("alltoall splits[{}][{}] is negative", i, j);
      }
    }
    if (p_.reads_input && a_.coll != Collective::AllReduce && a_.coll != Collective::Reduce &&
        a_.coll != Collective::AllGather && a_.coll != Collective::Broadcast)
      reject("reads_input is set, but only allreduce, reduce, allgather and broadcast plans may read their "
             "contribution from Input");
    for (int r = 0; r < n_; ++r) {
      // reads_input: Input[count] holds the contribution (plan.hpp).
      in_size_.push_back(input_count(p_, r));
      out_size_.push_back(output_count(a_, r));
      if (p_.ranks[static_cast<std::size_t>(r)].scratch_count < 0)
        reject("rank {} has negative scratch_count {}", r, p_.ranks[static_cast<std::size_t>(r)].scratch_count);
    }
  }

  // `owner` is the rank whose buffer `s` names: r itself, or the peer a
  // Get reads from.
  void check_span(int r, int i, const Span& s, const char* role, bool written, int owner = -1) const {
    if (owner < 0) owner = r;
    if (static_cast<int>(s.buf) > static_cast<int>(Buf::Scratch))
      reject("{}: {} names buffer #{}, which does not exist", at(r, i), role, static_cast<int>(s.buf));
    const i64 size = buf_size(owner, s.buf);
    if (s.offset < 0 || s.count < 0 || s.offset > size - s.count)
      reject("{}: {} {}[{}..{}) is outside the buffer, which has {} elements on rank {}", at(r, i), role,
             buf_name(s.buf), s.offset, s.offset + s.count, size, owner);
    if (written && s.buf == Buf::Input && s.count > 0) reject("{}: writes the read-only input", at(r, i));
  }

  void check_peer(int r, int i, int peer) const {
    if (peer < 0 || peer >= n_) reject("{}: peer {} is not a rank of the {}-rank group", at(r, i), peer, n_);
    if (peer == r) {
      const StepKind k = step(r, i).kind;
      reject("{}: {} itself", at(r, i),
             k == StepKind::Get || k == StepKind::GetReduce ? "reads from"
             : k == StepKind::Put                           ? "writes to"
             : is_one_sided(k)                              ? "signals or waits on"
                                                            : "sends to or receives from");
    }
  }

  // Whether two spans of one rank touch the same memory (Input and Output
  // are one buffer in the in-place pass).
  bool overlap(const Span& x, const Span& y) const {
    return phys(x.buf) == phys(y.buf) && x.count > 0 && y.count > 0 && x.offset < y.offset + y.count &&
           y.offset < x.offset + x.count;
  }
  bool same_memory(const Span& x, const Span& y) const {
    return phys(x.buf) == phys(y.buf) && x.offset == y.offset && x.count == y.count;
  }

  // A reads_input all-gather, in place, has its Input at its own block of
  // Output (plan.hpp): every write there must be the rank's own Copy from
  // Input at the same place, the identity in place, so the plan runs alike
  // both ways. (The in-place pass of all-reduce plans aliases whole
  // buffers; this one aliases at an offset, so it is checked this way.)
  void check_own_block_writes() {
    const i64 c = a_.count;
    for (int r = 0; r < n_; ++r)
      for (int i = 0; i < nsteps(r); ++i) {
        const Step& s = step(r, i);
        const bool writes_local = s.kind == StepKind::Copy || s.kind == StepKind::Reduce || s.kind == StepKind::Recv ||
                                  s.kind == StepKind::RecvReduce || s.kind == StepKind::Get ||
                                  s.kind == StepKind::GetReduce;
        const int owner = s.kind == StepKind::Put ? s.peer : writes_local ? r : -1;
        if (owner < 0 || s.dst.buf != Buf::Output || s.dst.count == 0) continue;
        const i64 lo = static_cast<i64>(owner) * c;
        if (s.dst.offset >= lo + c || s.dst.offset + s.dst.count <= lo) continue;
        const bool identity = s.kind == StepKind::Copy && owner == r && s.src.buf == Buf::Input &&
                              s.src.offset == s.dst.offset - lo && s.src.count == s.dst.count &&
                              s.dst.offset >= lo && s.dst.offset + s.dst.count <= lo + c;
        if (!identity)
          reject("{} writes rank {}'s own block of Output, which is its Input in place: in a reads_input allgather "
                 "only that rank's Copy from Input at the same place may",
                 at(r, i), owner);
      }
  }

  // A GetReduce's, RecvReduce's or Reduce's acc: a local span of dst's count.
  void check_operand(int r, int i, const Step& s) {
    check_span(r, i, s.acc, "operand", false);
    if (s.acc.count != s.dst.count)
      reject("{}: operand has {} elements but destination {}", at(r, i), s.acc.count, s.dst.count);
    // dst = acc op src element by element is safe in place (acc == dst),
    // not when one is shifted against the other.
    if (overlap(s.acc, s.dst) && !same_memory(s.acc, s.dst))
      reject("{}: operand and destination overlap without being the same span{}", at(r, i),
             aliased_ ? " (input and output are the same memory in place)" : "");
  }

  void check_steps(int r) {
    for (int i = 0; i < nsteps(r); ++i) {
      const Step& s = step(r, i);
      for (auto d : s.deps)
        if (d < 0 || d >= i)
          reject("{}: depends on step {}; deps must name earlier steps of the same rank", at(r, i), d);
      switch (s.kind) {
        case StepKind::Send:
          check_peer(r, i, s.peer);
          check_span(r, i, s.src, "source", false);
          break;
        case StepKind::Recv:
        case StepKind::RecvReduce:
          check_peer(r, i, s.peer);
          check_span(r, i, s.dst, "destination", true);
          if (s.kind == StepKind::RecvReduce && s.acc.count > 0) check_operand(r, i, s);
          break;
        case StepKind::Copy:
        case StepKind::Reduce:
          check_span(r, i, s.src, "source", false);
          check_span(r, i, s.dst, "destination", true);
          if (s.src.count != s.dst.count)
            reject("{}: source has {} elements but destination {}", at(r, i), s.src.count, s.dst.count);
          if (s.src.buf == s.dst.buf && s.src.count > 0 && s.src.offset < s.dst.offset + s.dst.count &&
              s.dst.offset < s.src.offset + s.src.count)
            reject("{}: source and destination overlap", at(r, i));
          // In place, a copy of in[x] to out[x] is a no-op; anything else
          // that overlaps reads what it is writing.
          if (aliased_ && overlap(s.src, s.dst) && (s.kind == StepKind::Reduce || !same_memory(s.src, s.dst)))
            reject("{}: source and destination overlap when input and output are the same memory", at(r, i));
          if (s.kind == StepKind::Reduce && s.acc.count > 0) check_operand(r, i, s);
          break;
        case StepKind::Signal:
        case StepKind::Wait: check_peer(r, i, s.peer); break;
        case StepKind::Get:
        case StepKind::GetReduce:
          check_peer(r, i, s.peer);
          check_span(r, i, s.src, "peer source", false, s.peer);
          check_span(r, i, s.dst, "destination", true);
          if (s.src.count != s.dst.count)
            reject("{}: reads {} elements of rank {} into a destination of {}", at(r, i), s.src.count, s.peer,
                   s.dst.count);
          if (s.kind == StepKind::GetReduce) check_operand(r, i, s);
          break;
        case StepKind::Put:
          check_peer(r, i, s.peer);
          check_span(r, i, s.src, "source", false);
          if (s.dst.buf == Buf::Input)
            reject("{}: writes rank {}'s input; a Put may not write a peer's Input (it is the caller's read-only "
                   "buffer): write its Output or Scratch",
                   at(r, i), s.peer);
          check_span(r, i, s.dst, "peer destination", true, s.peer);
          if (s.src.count != s.dst.count)
            reject("{}: writes {} elements into rank {}'s {} elements", at(r, i), s.src.count, s.peer, s.dst.count);
          break;
        default:
          reject("rank {} step {}: unknown step kind {}", r, i, static_cast<int>(s.kind));
      }
      if ((s.kind == StepKind::RecvReduce || s.kind == StepKind::Reduce || s.kind == StepKind::GetReduce) &&
          !is_reduction(a_.coll))
        reject("{}: reduces, but {} only moves data", at(r, i), collective_name(a_.coll));
    }
  }

  // A plan is all messages or all one-sided steps, and says which.
  void check_step_family() {
    Loc message, one_sided;
    for (int r = 0; r < n_; ++r)
      for (int i = 0; i < nsteps(r); ++i) {
        const StepKind k = step(r, i).kind;
        if (is_one_sided(k) && one_sided.rank < 0) one_sided = {r, i};
        if ((k == StepKind::Send || k == StepKind::Recv || k == StepKind::RecvReduce) && message.rank < 0)
          message = {r, i};
      }
    one_sided_ = one_sided.rank >= 0;
    if (one_sided_ && message.rank >= 0)
      reject("{} is a message and {} is one-sided: a plan uses messages or one-sided steps, never both",
             at(message.rank, message.step), at(one_sided.rank, one_sided.step));
    if (p_.one_sided != one_sided_)
      reject("plan.one_sided is {} but the plan {} one-sided steps", p_.one_sided, one_sided_ ? "has" : "has no");
  }

  static std::uint64_t msg_key(int from, int to, std::int32_t slot) {
    return (static_cast<std::uint64_t>(from) << 40) | (static_cast<std::uint64_t>(to) << 32) |
           static_cast<std::uint32_t>(slot);
  }

  void match_messages() {
    partner_.resize(static_cast<std::size_t>(n_));
    std::unordered_map<std::uint64_t, Loc> sends;
    for (int r = 0; r < n_; ++r) {
      partner_[static_cast<std::size_t>(r)].assign(static_cast<std::size_t>(nsteps(r)), Loc{});
      for (int i = 0; i < nsteps(r); ++i) {
        const Step& s = step(r, i);
        if (s.kind != StepKind::Send) continue;
        auto [it, fresh] = sends.emplace(msg_key(r, s.peer, s.slot), Loc{r, i});
        if (!fresh)
          reject("{} and {}: two sends to rank {} with slot {}; slots must be unique per pair", at(r, it->second.step),
                 at(r, i), s.peer, s.slot);
      }
    }
    for (int r = 0; r < n_; ++r) {
      for (int i = 0; i < nsteps(r); ++i) {
        const Step& s = step(r, i);
        if (s.kind != StepKind::Recv && s.kind != StepKind::RecvReduce) continue;
        auto it = sends.find(msg_key(s.peer, r, s.slot));
        if (it == sends.end()) reject("{}: no send from rank {} to rank {} has slot {}", at(r, i), s.peer, r, s.slot);
        const Loc snd = it->second;
        Loc& already = partner_[static_cast<std::size_t>(snd.rank)][static_cast<std::size_t>(snd.step)];
        if (already.rank >= 0)
          reject("{} and {}: both receive the same message (slot {} from rank {})", at(already.rank, already.step),
                 at(r, i), s.slot, s.peer);
        const Step& sent = step(snd.rank, snd.step);
        if (sent.src.count != s.dst.count)
          reject("{} sends {} elements but {} receives {}", at(snd.rank, snd.step), sent.src.count, at(r, i),
                 s.dst.count);
        already = Loc{r, i};
        partner_[static_cast<std::size_t>(r)][static_cast<std::size_t>(i)] = snd;
      }
    }
    for (auto& [key, loc] : sends)
      if (partner_[static_cast<std::size_t>(loc.rank)][static_cast<std::size_t>(loc.step)].rank < 0)
        reject("{}: rank {} never receives this message", at(loc.rank, loc.step), step(loc.rank, loc.step).peer);
    if (one_sided_) match_signals();
  }

  // Signal/Wait pairs match like Send/Recv: exactly one Wait per Signal.
  void match_signals() {
    std::unordered_map<std::uint64_t, Loc> signals;
    for (int r = 0; r < n_; ++r)
      for (int i = 0; i < nsteps(r); ++i) {
        const Step& s = step(r, i);
        if (s.kind != StepKind::Signal) continue;
        auto [it, fresh] = signals.emplace(msg_key(r, s.peer, s.slot), Loc{r, i});
        if (!fresh)
          reject("{} and {}: two signals to rank {} with slot {}; slots must be unique per pair",
                 at(r, it->second.step), at(r, i), s.peer, s.slot);
      }
    for (int r = 0; r < n_; ++r)
      for (int i = 0; i < nsteps(r); ++i) {
        const Step& s = step(r, i);
        if (s.kind != StepKind::Wait) continue;
        auto it = signals.find(msg_key(s.peer, r, s.slot));
        if (it == signals.end())
          reject("{}: no signal from rank {} to rank {} has slot {}", at(r, i), s.peer, r, s.slot);
        const Loc sig = it->second;
        Loc& already = partner_[static_cast<std::size_t>(sig.rank)][static_cast<std::size_t>(sig.step)];
        if (already.rank >= 0)
          reject("{} and {}: both wait for the same signal (slot {} from rank {})", at(already.rank, already.step),
                 at(r, i), s.slot, s.peer);
        already = Loc{r, i};
        partner_[static_cast<std::size_t>(r)][static_cast<std::size_t>(i)] = sig;
      }
    for (auto& [key, loc] : signals)
      if (partner_[static_cast<std::size_t>(loc.rank)][static_cast<std::size_t>(loc.step)].rank < 0)
        reject("{}: rank {} never waits for this signal", at(loc.rank, loc.step), step(loc.rank, loc.step).peer);
  }

  // The runtime counts signals per pair instead of tagging them, so the k-th
  // signal from r to p must be issued after the (k-1)-th, and p's waits on r
  // must likewise come in slot order.
  void check_signal_order() {
    for (int r = 0; r < n_; ++r) {
      local_closure(r);
      for (StepKind kind : {StepKind::Signal, StepKind::Wait}) {
        std::vector<std::pair<std::pair<int, std::int32_t>, int>> by_peer;  // ((peer, slot), step)
        for (int i = 0; i < nsteps(r); ++i)
          if (step(r, i).kind == kind) by_peer.push_back({{step(r, i).peer, step(r, i).slot}, i});
        std::sort(by_peer.begin(), by_peer.end());
        for (std::size_t k = 1; k < by_peer.size(); ++k) {
          const auto& [prev_key, prev] = by_peer[k - 1];
          const auto& [key, cur] = by_peer[k];
          if (prev_key.first != key.first || local_before(r, prev, cur)) continue;
          if (kind == StepKind::Signal)
            reject("{} and {}: signals from rank {} to rank {} (slots {} and {}) are not ordered by deps; the "
                   "runtime counts signals, so each must depend on the one before it",
                   at(r, prev), at(r, cur), r, key.first, prev_key.second, key.second);
          reject("{} and {}: waits of rank {} on rank {} (slots {} and {}) are not ordered by deps; the runtime "
                 "counts signals, so each must depend on the one before it",
                 at(r, prev), at(r, cur), r, key.first, prev_key.second, key.second);
        }
      }
    }
  }

  // Two steps of rank r with no dependency path between them may run at the
  // same time: they must not touch overlapping elements where one writes.
  //
  // Deps only point backwards, so an ordered pair is always ordered from the
  // lower index to the higher. Over a stretch of elements touched by the same
  // accesses, sorted by step index, it is then enough to check that each write
  // follows the previous write and every read since it, and that each read
  // follows the last write before it: transitivity covers every other pair.
  // That keeps the check linear in the accesses per stretch instead of
  // quadratic when many steps reuse one scratch chunk.
  void check_races(int r) {
    const int S = nsteps(r);
    if (S < 2) return;
    constexpr int kMaxSteps = 32768;  // the closure takes S*S/8 bytes
    if (S > kMaxSteps) reject("rank {} has {} steps; the race check handles at most {}", r, S, kMaxSteps);

    struct Access {
      Buf buf;
      i64 lo, hi;
      int step;
      bool writes;
    };
    std::vector<Access> acc;
    for (int i = 0; i < S; ++i) {
      const Step& s = step(r, i);
      auto add = [&](const Span& sp, bool writes) {
        if (sp.count > 0) acc.push_back({phys(sp.buf), sp.offset, sp.offset + sp.count, i, writes});
      };
      switch (s.kind) {
        case StepKind::Send: add(s.src, false); break;
        case StepKind::Recv: add(s.dst, true); break;
        case StepKind::RecvReduce:
          if (!same_memory(operand(s), s.dst)) add(operand(s), false);
          add(s.dst, true);
          break;
        case StepKind::Copy:
          // A copy onto itself (the in-place pass of a reads_input plan)
          // touches nothing: every runtime skips it.
          if (same_memory(s.src, s.dst)) break;
          add(s.src, false);
          add(s.dst, true);
          break;
        case StepKind::Reduce:
          if (!same_memory(s.src, s.dst)) add(s.src, false);  // an in-place reduce of x with x only "writes"
          if (!same_memory(operand(s), s.dst)) add(operand(s), false);
          add(s.dst, true);
          break;
        case StepKind::Get: add(s.dst, true); break;  // its source is the peer's memory
        case StepKind::Put: add(s.src, false); break;  // its destination is the peer's memory
        case StepKind::GetReduce:
          if (!same_memory(s.acc, s.dst)) add(s.acc, false);  // acc == dst: the write covers the read
          add(s.dst, true);
          break;
        case StepKind::Signal:
        case StepKind::Wait: break;
      }
    }
    if (std::none_of(acc.begin(), acc.end(), [](const Access& a) { return a.writes; })) return;

    local_closure(r);
    auto before = [&](int a, int b) { return local_before(r, a, b); };
    auto race = [&](const Access& x, const Access& y, i64 lo, i64 hi) {
      reject("race on rank {}: {} and {} both touch {}[{}..{}), one writes, and neither depends on the other", r,
             at(r, x.step), at(r, y.step), buf_name(x.buf), lo, hi);
    };

    // Sweep each buffer's boundaries; `active` holds the accesses covering
    // the current stretch, ordered by step.
    std::vector<int> starts, ends, in_buf;  // access indices
    std::vector<i64> bounds;
    std::set<std::pair<int, int>> active;  // (step, access)
    std::vector<const Access*> reads;
    for (Buf buf : {Buf::Input, Buf::Output, Buf::Scratch}) {
      in_buf.clear();
      bounds.clear();
      int writes = 0;
      for (std::size_t k = 0; k < acc.size(); ++k)
        if (acc[k].buf == buf) {
          in_buf.push_back(static_cast<int>(k));
          bounds.push_back(acc[k].lo);
          bounds.push_back(acc[k].hi);
          writes += acc[k].writes;
        }
      if (writes == 0) continue;
      std::sort(bounds.begin(), bounds.end());
      bounds.erase(std::unique(bounds.begin(), bounds.end()), bounds.end());
      starts = ends = in_buf;
      std::sort(starts.begin(), starts.end(), [&](int x, int y) { return acc[static_cast<std::size_t>(x)].lo < acc[static_cast<std::size_t>(y)].lo; });
      std::sort(ends.begin(), ends.end(), [&](int x, int y) { return acc[static_cast<std::size_t>(x)].hi < acc[static_cast<std::size_t>(y)].hi; });
      active.clear();
      int active_writes = 0;
      std::size_t si = 0, ei = 0;
      for (std::size_t b = 0; b + 1 < bounds.size(); ++b) {
        const i64 lo = bounds[b], hi = bounds[b + 1];
        for (; ei < ends.size() && acc[static_cast<std::size_t>(ends[ei])].hi <= lo; ++ei) {
          const Access& a = acc[static_cast<std::size_t>(ends[ei])];
          active.erase({a.step, ends[ei]});
          active_writes -= a.writes;
        }
        for (; si < starts.size() && acc[static_cast<std::size_t>(starts[si])].lo <= lo; ++si) {
          const Access& a = acc[static_cast<std::size_t>(starts[si])];
          active.insert({a.step, starts[si]});
          active_writes += a.writes;
        }
        if (active_writes == 0 || active.size() < 2) continue;
        const Access* last_write = nullptr;
        reads.clear();
        for (const auto& [st, k] : active) {
          const Access& a = acc[static_cast<std::size_t>(k)];
          if (a.writes) {
            if (last_write && !before(last_write->step, a.step)) race(*last_write, a, lo, hi);
            for (const Access* rd : reads)
              if (!before(rd->step, a.step)) race(*rd, a, lo, hi);
            reads.clear();
            last_write = &a;
          } else {
            if (last_write && !before(last_write->step, a.step)) race(*last_write, a, lo, hi);
            reads.push_back(&a);
          }
        }
      }
    }
  }

  // reach_[r]: for each step of rank r, the steps that must finish before it
  // starts (transitively through deps), as a bit row of words_[r] words.
  void local_closure(int r) {
    const auto ur = static_cast<std::size_t>(r);
    reach_.resize(static_cast<std::size_t>(n_));
    words_.resize(static_cast<std::size_t>(n_), 0);
    const int S = nsteps(r);
    if (words_[ur] > 0 || S == 0) return;  // done already
    constexpr int kMaxSteps = 32768;  // the closure takes S*S/8 bytes
    if (S > kMaxSteps) reject("rank {} has {} steps; the race check handles at most {}", r, S, kMaxSteps);
    const std::size_t words = (static_cast<std::size_t>(S) + 63) / 64;
    std::vector<std::uint64_t>& reach = reach_[ur];
    reach.assign(static_cast<std::size_t>(S) * words, 0);
    for (int i = 0; i < S; ++i) {
      std::uint64_t* row = &reach[static_cast<std::size_t>(i) * words];
      for (auto d : step(r, i).deps) {
        const std::uint64_t* dep = &reach[static_cast<std::size_t>(d) * words];
        for (std::size_t w = 0; w <= static_cast<std::size_t>(d) / 64; ++w) row[w] |= dep[w];
        row[static_cast<std::size_t>(d) / 64] |= std::uint64_t{1} << (d % 64);
      }
    }
    words_[ur] = words;
  }
  // Step a of rank r finishes before step b starts (through deps).
  bool local_before(int r, int a, int b) const {
    const auto ur = static_cast<std::size_t>(r);
    if (a >= b) return false;
    return (reach_[ur][static_cast<std::size_t>(b) * words_[ur] + static_cast<std::size_t>(a) / 64] >> (a % 64)) & 1;
  }

  // ---- one-sided plans: happens-before across ranks -----------------------
  //
  // hb = deps within a rank plus Signal -> matching Wait. Across ranks, data
  // and knowledge flow only through signals, so "x on rank p hb y on another
  // rank" is "some signal of p that x precedes locally hb y". We keep, per
  // step y, the set of all signals hb y (bits, one word range per rank, each
  // pair's signals being a prefix thanks to check_signal_order), and per step
  // x the signals of its own rank that it precedes locally.

  std::size_t sig_words() const { return sig_word0_.empty() ? 0 : sig_word0_.back(); }
  std::size_t rank_sig_words(int r) const {
    return sig_word0_[static_cast<std::size_t>(r) + 1] - sig_word0_[static_cast<std::size_t>(r)];
  }
  // Rank r's own signals that step i of r precedes: rank_sig_words(r) words.
  std::uint64_t* signals_after(int r, int i) {
    return &after_sigs_[after_base_[static_cast<std::size_t>(r)] + static_cast<std::size_t>(i) * rank_sig_words(r)];
  }
  const std::uint64_t* signals_after(int r, int i) const {
    return &after_sigs_[after_base_[static_cast<std::size_t>(r)] + static_cast<std::size_t>(i) * rank_sig_words(r)];
  }
  const std::uint64_t* signals_before(std::size_t flat_step) const { return &hb_sigs_[flat_step * sig_words()]; }

  void build_hb() {
    first_.assign(static_cast<std::size_t>(n_) + 1, 0);
    for (int r = 0; r < n_; ++r)
      first_[static_cast<std::size_t>(r) + 1] = first_[static_cast<std::size_t>(r)] + static_cast<std::size_t>(nsteps(r));
    const std::size_t total = first_.back();
    // Bit index of every signal within its rank's word range.
    sig_bit_.assign(total, -1);
    sig_word0_.assign(static_cast<std::size_t>(n_) + 1, 0);
    for (int r = 0; r < n_; ++r) {
      int k = 0;
      for (int i = 0; i < nsteps(r); ++i)
        if (step(r, i).kind == StepKind::Signal) sig_bit_[flat(r, i)] = k++;
      sig_word0_[static_cast<std::size_t>(r) + 1] = sig_word0_[static_cast<std::size_t>(r)] + (static_cast<std::size_t>(k) + 63) / 64;
    }
    const std::size_t W = sig_words();
    auto set_bit = [&](std::uint64_t* row, int r, int i) {
      const auto b = static_cast<std::size_t>(sig_bit_[flat(r, i)]);
      row[sig_word0_[static_cast<std::size_t>(r)] + b / 64] |= std::uint64_t{1} << (b % 64);
    };

    // Signals each step precedes on its own rank (itself included): rows of
    // only that rank's words, stored as if the row started at word 0.
    after_base_.assign(static_cast<std::size_t>(n_) + 1, 0);
    for (int r = 0; r < n_; ++r)
      after_base_[static_cast<std::size_t>(r) + 1] =
          after_base_[static_cast<std::size_t>(r)] + static_cast<std::size_t>(nsteps(r)) * rank_sig_words(r);
    after_sigs_.assign(after_base_.back(), 0);
    for (int r = 0; r < n_; ++r)
      for (int i = nsteps(r) - 1; i >= 0; --i) {
        std::uint64_t* row = signals_after(r, i);
        if (step(r, i).kind == StepKind::Signal) {
          const auto b = static_cast<std::size_t>(sig_bit_[flat(r, i)]);
          row[b / 64] |= std::uint64_t{1} << (b % 64);
        }
        for (auto d : step(r, i).deps) {
          std::uint64_t* dep = signals_after(r, d);
          for (std::size_t w = 0; w < rank_sig_words(r); ++w) dep[w] |= row[w];
        }
      }

    // Signals hb each step (itself included), in a topological order of the
    // whole graph. A cycle is a deadlock, which execute() reports.
    std::vector<int> pending(total, 0);
    std::vector<std::vector<std::size_t>> succ(total);
    for (int r = 0; r < n_; ++r)
      for (int i = 0; i < nsteps(r); ++i) {
        for (auto d : step(r, i).deps) {
          succ[flat(r, d)].push_back(flat(r, i));
          ++pending[flat(r, i)];
        }
        if (step(r, i).kind == StepKind::Wait) {
          const Loc sig = partner_[static_cast<std::size_t>(r)][static_cast<std::size_t>(i)];
          succ[flat(sig.rank, sig.step)].push_back(flat(r, i));
          ++pending[flat(r, i)];
        }
      }
    std::vector<Loc> of(total);
    for (int r = 0; r < n_; ++r)
      for (int i = 0; i < nsteps(r); ++i) of[flat(r, i)] = {r, i};
    hb_sigs_.assign(total * W, 0);
    std::vector<std::size_t> ready;
    for (std::size_t k = 0; k < total; ++k)
      if (pending[k] == 0) ready.push_back(k);
    std::size_t seen = 0;
    while (!ready.empty()) {
      const std::size_t k = ready.back();
      ready.pop_back();
      ++seen;
      std::uint64_t* row = &hb_sigs_[k * W];
      if (step(of[k].rank, of[k].step).kind == StepKind::Signal) set_bit(row, of[k].rank, of[k].step);
      for (std::size_t next : succ[k]) {
        std::uint64_t* to = &hb_sigs_[next * W];
        for (std::size_t w = 0; w < W; ++w) to[w] |= row[w];
        if (--pending[next] == 0) ready.push_back(next);
      }
    }
    hb_complete_ = seen == total;
  }

  // x hb y (x and y on any ranks).
  bool hb(Loc x, Loc y) const {
    if (x.rank == y.rank) return local_before(x.rank, x.step, y.step);
    const std::uint64_t* after = signals_after(x.rank, x.step);
    const std::uint64_t* before = signals_before(flat(y.rank, y.step)) + sig_word0_[static_cast<std::size_t>(x.rank)];
    for (std::size_t w = 0; w < rank_sig_words(x.rank); ++w)
      if (after[w] & before[w]) return true;
    return false;
  }

  // One step's access to one rank's memory: for the cross-rank rules.
  struct MemAccess {
    Loc at;
    Span span;  // in the memory of the rank whose list holds it
    bool writes;
  };

  // The memory each rank's own steps touch (local[p]) and the memory of p
  // that other ranks' Get/GetReduce/Put touch (remote[p]).
  void collect_accesses(std::vector<std::vector<MemAccess>>& local, std::vector<std::vector<MemAccess>>& remote) const {
    local.assign(static_cast<std::size_t>(n_), {});
    remote.assign(static_cast<std::size_t>(n_), {});
    for (int r = 0; r < n_; ++r)
      for (int i = 0; i < nsteps(r); ++i) {
        const Step& s = step(r, i);
        auto& mine = local[static_cast<std::size_t>(r)];
        auto add = [&](const Span& sp, bool writes) { mine.push_back({{r, i}, sp, writes}); };
        switch (s.kind) {
          case StepKind::Copy:
          case StepKind::Reduce:
            if (!same_memory(s.src, s.dst)) add(s.src, false);
            if (s.kind == StepKind::Reduce && !same_memory(operand(s), s.dst)) add(operand(s), false);
            add(s.dst, true);
            break;
          case StepKind::Get: add(s.dst, true); break;
          case StepKind::GetReduce:
            if (!same_memory(s.acc, s.dst)) add(s.acc, false);
            add(s.dst, true);
            break;
          case StepKind::Put: add(s.src, false); break;
          default: break;  // messages never meet one-sided steps; signals touch no data
        }
        if (s.kind == StepKind::Get || s.kind == StepKind::GetReduce)
          remote[static_cast<std::size_t>(s.peer)].push_back({{r, i}, s.src, false});
        if (s.kind == StepKind::Put) remote[static_cast<std::size_t>(s.peer)].push_back({{r, i}, s.dst, true});
      }
  }

  // x and y touch overlapping memory of rank p, one writes, and neither is hb
  // the other: the value seen (or left behind) depends on timing.
  void check_ordered(int p, const MemAccess& x, const MemAccess& y) const {
    if (!(x.writes || y.writes) || !overlap(x.span, y.span) || hb(x.at, y.at) || hb(y.at, x.at)) return;
    const i64 lo = std::max(x.span.offset, y.span.offset);
    const i64 hi = std::min(x.span.offset + x.span.count, y.span.offset + y.span.count);
    reject("race across ranks: {} {} rank {}'s {}[{}..{}) while {} {} it, and neither happens before the other (no "
           "chain of deps and signal->wait between them)",
           at(x.at.rank, x.at.step), x.writes ? "writes" : "reads", p, buf_name(phys(x.span.buf)), lo, hi,
           at(y.at.rank, y.at.step), y.writes ? "writes" : "reads");
  }

  // The cross-rank rules of plan.hpp, for every step g on rank r that reads
  // (Get/GetReduce) or writes (Put) span S of its peer p.
  void check_cross_rank() {
    for (int r = 0; r < n_; ++r) local_closure(r);
    build_hb();
    if (!hb_complete_) return;  // a cycle: execute() names the deadlock
    const std::size_t W = sig_words();
    // Signals hb some step of each rank: "the access is hb some step of p".
    std::vector<std::uint64_t> seen_by(static_cast<std::size_t>(n_) * W, 0);
    std::vector<char> waits_on(static_cast<std::size_t>(n_) * static_cast<std::size_t>(n_), 0);
    for (int p = 0; p < n_; ++p)
      for (int i = 0; i < nsteps(p); ++i) {
        const std::uint64_t* row = signals_before(flat(p, i));
        for (std::size_t w = 0; w < W; ++w) seen_by[static_cast<std::size_t>(p) * W + w] |= row[w];
        if (step(p, i).kind == StepKind::Wait)
          waits_on[static_cast<std::size_t>(p) * static_cast<std::size_t>(n_) + static_cast<std::size_t>(step(p, i).peer)] = 1;
      }
    std::vector<std::vector<MemAccess>> local, remote;
    collect_accesses(local, remote);
    for (int r = 0; r < n_; ++r)
      for (int i = 0; i < nsteps(r); ++i) {
        const Step& g = step(r, i);
        const bool writes = g.kind == StepKind::Put;
        if (g.kind != StepKind::Get && g.kind != StepKind::GetReduce && !writes) continue;
        const int p = g.peer;
        const Span& S = writes ? g.dst : g.src;
        const MemAccess mine{{r, i}, S, writes};
        const std::string where = fmt::format("rank {}'s {}[{}..{})", p, buf_name(S.buf), S.offset, S.offset + S.count);
        // (a) every step of the owner touching the span is ordered with the
        // access where either writes; a write is also ordered with every
        // other Get/GetReduce/Put of that memory, by any rank (a read meets
        // the writes of other ranks from their side).
        for (const MemAccess& y : local[static_cast<std::size_t>(p)]) check_ordered(p, mine, y);
        if (writes)
          for (const MemAccess& y : remote[static_cast<std::size_t>(p)])
            if (y.at.rank != r || y.at.step != i) check_ordered(p, mine, y);
        if (S.count == 0) continue;
        const char* verb = writes ? "writes" : "reads";
        // The owner must have entered the call: its buffers are only valid then.
        const std::uint64_t* before = signals_before(flat(r, i));
        bool started = false;
        for (std::size_t w = sig_word0_[static_cast<std::size_t>(p)]; w < sig_word0_[static_cast<std::size_t>(p) + 1]; ++w)
          started |= before[w] != 0;
        if (!started)
          reject("{}: {} {} with no signal from rank {} before it: the {} may run before rank {} has "
                 "entered the call (Wait on it first)",
                 at(r, i), verb, where, p, writes ? "write" : "read", p);
        // (b) a read of Input/Output, and any write, is hb some step of the
        // owner: the owner cannot return (and let the caller reuse the
        // buffer, or read a result that has not landed) first.
        if (writes || S.buf != Buf::Scratch) {
          const std::uint64_t* after = signals_after(r, i);
          const std::uint64_t* seen_by_p = &seen_by[static_cast<std::size_t>(p) * W + sig_word0_[static_cast<std::size_t>(r)]];
          bool seen = false;
          for (std::size_t w = 0; w < rank_sig_words(r); ++w) seen |= (after[w] & seen_by_p[w]) != 0;
          if (!seen && writes)
            reject("{}: writes {}, but no step of rank {} waits for the write (directly or through other ranks): "
                   "rank {} may return before it has landed; add an exit round (signal rank {} after the write, "
                   "and let it wait)",
                   at(r, i), where, p, p, p);
          if (!seen)
            reject("{}: reads {}, but no step of rank {} waits for the read (directly or through other ranks): "
                   "rank {} may return and reuse its buffer while the read is in flight; add an exit round "
                   "(signal rank {} after the read, and let it wait)",
                   at(r, i), where, p, p, p);
        }
        // (c) Scratch is double-buffered across calls: the owner's wait on
        // the accessor keeps call k+2 from reusing what call k touches.
        if (S.buf == Buf::Scratch && !waits_on[static_cast<std::size_t>(p) * static_cast<std::size_t>(n_) + static_cast<std::size_t>(r)])
          reject("{}: {} {}, but rank {} never waits on rank {}: scratch is double-buffered across calls, so "
                 "without such a wait rank {} could reuse it two calls later while the {} is in flight",
                 at(r, i), verb, where, p, r, p, writes ? "write" : "read");
      }
  }

  // ---- symbolic execution ----------------------------------------------

  void init_buffers() {
    bufs_.resize(static_cast<std::size_t>(n_) * 3);
    const i64 c = a_.count;
    for (int r = 0; r < n_; ++r) {
      for (Buf b : {Buf::Input, Buf::Output, Buf::Scratch}) buffer(r, b) = SymBuffer(buf_size(r, b));
      SymBuffer& in = buffer(r, Buf::Input);  // the Output buffer in the in-place pass
      SymBuffer& out = buffer(r, Buf::Output);
      switch (a_.coll) {
        case Collective::Broadcast:
          // reads_input: the root's data is in Input (which is Output in place).
          if (r == a_.root) (p_.reads_input ? in : out).fill(0, c, bit(r), 0);
          break;
        case Collective::AllReduce:
        case Collective::Reduce:
          // reads_input: the contribution is in Input (which is Output in place).
          (p_.reads_input ? in : out).fill(0, c, bit(r), 0);
          break;
        case Collective::AllGather:
          in.fill(0, c, bit(r), 0);
          if (!p_.reads_input) out.fill(static_cast<i64>(r) * c, c, bit(r), 0);
          break;
        case Collective::Gather:
          in.fill(0, c, bit(r), 0);
          if (r == a_.root) out.fill(static_cast<i64>(r) * c, c, bit(r), 0);
          break;
        case Collective::Scatter:
          if (r == a_.root) {
            in.fill(0, n_ * c, bit(r), 0);
            out.fill(0, c, bit(r), static_cast<i64>(r) * c);
          }
          break;
        case Collective::ReduceScatter: in.fill(0, n_ * c, bit(r), 0); break;
        case Collective::AllToAll:
          in.fill(0, in_size_[static_cast<std::size_t>(r)], bit(r), 0);
          out.fill(out_offset(r, r), split(r, r), bit(r), in_offset(r, r));
          break;
        case Collective::Barrier: break;
      }
    }
  }

  // `owner`: whose buffer s names (a Get reads its peer's).
  Values read_written(int r, int i, const Span& s, int owner = -1) {
    Values v = buffer(owner < 0 ? r : owner, s.buf).read(s.offset, s.count);
    for (const Run& run : v)
      if (run.mask == 0)
        reject("{}: reads {}{}[{}..{}) before anything wrote it", at(r, i),
               owner < 0 ? "" : fmt::format("rank {}'s ", owner), buf_name(s.buf), s.offset + run.start,
               s.offset + run.start + run.len);
    return v;
  }

  // dst (op)= src, element by element, as runs.
  Values combine(int r, int i, const Span& dst, const Values& src) {
    const Values cur = buffer(r, dst.buf).read(dst.offset, dst.count);
    Values out;
    std::size_t a = 0, b = 0;
    i64 pos = 0;
    while (pos < dst.count) {
      const Run& d = cur[a];
      const Run& s = src[b];
      const i64 end = std::min(d.start + d.len, s.start + s.len);
      const i64 di = d.index + (pos - d.start), si = s.index + (pos - s.start);
      const i64 len = end - pos;
      if (d.mask == 0)
        reject("{}: reduces into {}[{}..{}), which nothing wrote", at(r, i), buf_name(dst.buf), dst.offset + pos,
               dst.offset + end);
      if (di != si)
        reject("{}: combines {} with {} at {}[{}..{}): values for different elements", at(r, i),
               value_text(d.mask, di, len, true), value_text(s.mask, si, len, true), buf_name(dst.buf),
               dst.offset + pos, dst.offset + end);
      if (d.mask & s.mask)
        reject("{}: counts ranks {} twice at {}[{}..{}) ({} combined with {})", at(r, i), mask_text(d.mask & s.mask),
               buf_name(dst.buf), dst.offset + pos, dst.offset + end, value_text(d.mask, di, len, true),
               value_text(s.mask, si, len, true));
      out.push_back({pos, len, d.mask | s.mask, di});
      pos = end;
      if (end == d.start + d.len) ++a;
      if (end == s.start + s.len) ++b;
    }
    return out;
  }

  // Copy, Reduce, and the one-sided steps but Wait: a Get reads the peer's
  // current values and a Put sets them (the cross-rank rules made these the
  // only possible ones).
  void run_local(int r, int i) {
    const Step& s = step(r, i);
    know(r, i) = deps_knowledge(r, i);
    if (s.kind == StepKind::Signal) return;
    const bool remote = s.kind == StepKind::Get || s.kind == StepKind::GetReduce;
    Values v = read_written(r, i, s.src, remote ? s.peer : -1);
    if (s.kind == StepKind::Reduce) v = combine(r, i, operand(s), v);
    if (s.kind == StepKind::GetReduce) v = combine(r, i, s.acc, v);
    buffer(s.kind == StepKind::Put ? s.peer : r, s.dst.buf).write(s.dst.offset, v);
  }

  // A Wait whose Signal was issued: it learns what the signaller knew.
  void run_wait(int r, int i, Loc sig) {
    know(r, i) = deps_knowledge(r, i) | know(sig.rank, sig.step);
  }

  void run_message(Loc snd, Loc rcv) {
    const Step& s = step(snd.rank, snd.step);
    const Step& d = step(rcv.rank, rcv.step);
    Values v = read_written(snd.rank, snd.step, s.src);
    if (d.kind == StepKind::RecvReduce) v = combine(rcv.rank, rcv.step, operand(d), v);
    buffer(rcv.rank, d.dst.buf).write(d.dst.offset, v);
    know(snd.rank, snd.step) = deps_knowledge(snd.rank, snd.step);
    know(rcv.rank, rcv.step) = deps_knowledge(rcv.rank, rcv.step) | know(snd.rank, snd.step);
  }

  // Ranks whose start step (r, i) is known to follow, through its deps.
  Mask deps_knowledge(int r, int i) {
    Mask m = bit(r);
    for (auto d : step(r, i).deps) m |= know(r, d);
    return m;
  }
  Mask& know(int r, int i) { return know_[flat(r, i)]; }
  std::size_t flat(int r, int i) const { return first_[static_cast<std::size_t>(r)] + static_cast<std::size_t>(i); }

  void execute() {
    init_buffers();
    // Flat per-step state: step (r, i) is entry first_[r] + i.
    first_.assign(static_cast<std::size_t>(n_) + 1, 0);
    for (int r = 0; r < n_; ++r)
      first_[static_cast<std::size_t>(r) + 1] = first_[static_cast<std::size_t>(r)] + static_cast<std::size_t>(nsteps(r));
    const std::size_t total = first_.back();
    std::vector<int> pending(total, 0);
    std::vector<char> ready(total, 0), done(total, 0);
    know_.assign(total, 0);
    // Dependents in compressed rows: dep_of[dep_start[k] .. dep_start[k+1]).
    std::vector<std::size_t> dep_start(total + 1, 0);
    std::vector<int> dep_of;
    {
      std::vector<std::int32_t> deps;
      std::vector<std::pair<std::size_t, int>> edges;  // (dependency, dependent step)
      for (int r = 0; r < n_; ++r)
        for (int i = 0; i < nsteps(r); ++i) {
          deps = step(r, i).deps;
          std::sort(deps.begin(), deps.end());
          deps.erase(std::unique(deps.begin(), deps.end()), deps.end());
          pending[flat(r, i)] = static_cast<int>(deps.size());
          for (auto d : deps) edges.push_back({flat(r, d), i});
        }
      for (const auto& e : edges) ++dep_start[e.first + 1];
      for (std::size_t k = 0; k < total; ++k) dep_start[k + 1] += dep_start[k];
      dep_of.resize(edges.size());
      std::vector<std::size_t> fill(dep_start.begin(), dep_start.end() - 1);
      for (const auto& e : edges) dep_of[fill[e.first]++] = e.second;
    }
    std::vector<Loc> work;  // local steps, or the Send of a message ready to move
    std::size_t finished = 0;

    // Local: runs once its deps are done (a Signal is issued then).
    auto is_local = [&](int r, int i) {
      const StepKind k = step(r, i).kind;
      return k != StepKind::Send && k != StepKind::Recv && k != StepKind::RecvReduce && k != StepKind::Wait;
    };
    auto partner = [&](int r, int i) { return partner_[static_cast<std::size_t>(r)][static_cast<std::size_t>(i)]; };
    auto on_ready = [&](int r, int i) {
      ready[flat(r, i)] = 1;
      if (is_local(r, i)) return work.push_back({r, i});
      const Loc other = partner(r, i);
      if (step(r, i).kind == StepKind::Wait) {  // runs once its signal was issued
        if (done[flat(other.rank, other.step)]) work.push_back({r, i});
        return;
      }
      if (!ready[flat(other.rank, other.step)]) return;
      work.push_back(step(r, i).kind == StepKind::Send ? Loc{r, i} : other);
    };
    auto complete = [&](int r, int i) {
      const std::size_t k = flat(r, i);
      done[k] = 1;
      ++finished;
      for (std::size_t e = dep_start[k]; e < dep_start[k + 1]; ++e)
        if (--pending[flat(r, dep_of[e])] == 0) on_ready(r, dep_of[e]);
      if (step(r, i).kind == StepKind::Signal) {
        const Loc w = partner(r, i);
        if (ready[flat(w.rank, w.step)]) work.push_back(w);
      }
    };

    for (int r = 0; r < n_; ++r)
      for (int i = 0; i < nsteps(r); ++i)
        if (pending[flat(r, i)] == 0) on_ready(r, i);

    while (!work.empty()) {
      const Loc w = work.back();
      work.pop_back();
      if (is_local(w.rank, w.step)) {
        run_local(w.rank, w.step);
        complete(w.rank, w.step);
      } else if (step(w.rank, w.step).kind == StepKind::Wait) {
        run_wait(w.rank, w.step, partner(w.rank, w.step));
        complete(w.rank, w.step);
      } else {
        const Loc rcv = partner(w.rank, w.step);
        run_message(w, rcv);
        complete(w.rank, w.step);
        complete(rcv.rank, rcv.step);
      }
    }
    if (finished == total) return;

    // Every rank's first unfinished step has all its deps done, so it is a
    // send or receive whose partner never became ready: name a few.
    std::string why;
    int shown = 0;
    for (int r = 0; r < n_ && shown < 3; ++r) {
      for (int i = 0; i < nsteps(r); ++i) {
        if (done[flat(r, i)]) continue;
        if (ready[flat(r, i)]) {
          const Loc o = partner(r, i);
          why += fmt::format("; {} waits for {}, which waits on its deps", at(r, i), at(o.rank, o.step));
          ++shown;
        }
        break;
      }
    }
    if (one_sided_)
      reject("deadlock: {} of {} steps can never run (a wait completes only once its signal was issued){}",
             total - finished, total, why);
    reject("deadlock: {} of {} steps can never run (a message moves only once both its send and its "
           "receive are ready){}",
           total - finished, total, why);
  }

  // ---- the result --------------------------------------------------------

  // What Output must hold on rank r at the end; false if nothing is required.
  bool expected_output(int r, Values* want) const {
    const i64 c = a_.count;
    const Mask all = all_ranks(n_);
    want->clear();
    auto add = [&](i64 len, Mask m, i64 index) {
      const i64 start = want->empty() ? 0 : want->back().start + want->back().len;
      if (len > 0) want->push_back({start, len, m, index});
    };
    switch (a_.coll) {
      case Collective::Broadcast: add(c, bit(a_.root), 0); return true;
      case Collective::AllReduce: add(c, all, 0); return true;
      case Collective::Reduce:
        if (r != a_.root) return false;
        add(c, all, 0);
        return true;
      case Collective::Gather:
        if (r != a_.root) return false;
        [[fallthrough]];
      case Collective::AllGather:
        for (int j = 0; j < n_; ++j) add(c, bit(j), 0);
        return true;
      case Collective::Scatter: add(c, bit(a_.root), static_cast<i64>(r) * c); return true;
      case Collective::ReduceScatter: add(c, all, static_cast<i64>(r) * c); return true;
      case Collective::AllToAll:
        for (int i = 0; i < n_; ++i) add(split(i, r), bit(i), in_offset(i, r));
        return true;
      case Collective::Barrier: return false;
    }
    return false;
  }

  void check_result() {
    const bool reduction = is_reduction(a_.coll);
    Values want;
    for (int r = 0; r < n_; ++r) {
      if (a_.coll == Collective::Barrier) {
        Mask heard = bit(r);
        for (int i = 0; i < nsteps(r); ++i) heard |= know(r, i);
        if (heard != all_ranks(n_))
          reject("barrier: rank {} can finish before ranks {} have started", r, mask_text(all_ranks(n_) & ~heard));
        continue;
      }
      if (!expected_output(r, &want)) continue;
      const Values& got = buffer(r, Buf::Output).runs();
      std::size_t a = 0, b = 0;
      i64 pos = 0;
      while (b < want.size()) {
        const Run& g = got[a];
        const Run& w = want[b];
        const i64 end = std::min(g.start + g.len, w.start + w.len);
        const i64 gi = g.index + (pos - g.start), wi = w.index + (pos - w.start);
        if (g.mask != w.mask || (w.mask != 0 && gi != wi))
          reject("wrong result: rank {} out[{}..{}) holds {}, expected {}", r, pos, end,
                 value_text(g.mask, gi, end - pos, reduction), value_text(w.mask, wi, end - pos, reduction));
        pos = end;
        if (end == g.start + g.len) ++a;
        if (end == w.start + w.len) ++b;
      }
    }
  }

  const Plan& p_;
  const PlanArgs& a_;
  const int n_;
  std::vector<i64> in_size_, out_size_;
  std::vector<std::vector<Loc>> partner_;  // the other end of each message step
  std::vector<SymBuffer> bufs_;            // [rank * 3 + Buf]
  std::vector<std::size_t> first_;         // flat index of each rank's step 0
  std::vector<Mask> know_;                 // per flat step: ranks known to have started when it finishes
  const bool aliased_;                     // in-place pass of a reads_input plan
  bool one_sided_ = false;                 // the plan's steps are one-sided
  std::vector<std::vector<std::uint64_t>> reach_;  // per rank: local_closure()
  std::vector<std::size_t> words_;                 // per rank: words per reach_ row (0: not built)
  // Happens-before of one-sided plans (build_hb).
  std::vector<int> sig_bit_;                // per flat step: bit of a signal in its rank's range, else -1
  std::vector<std::size_t> sig_word0_;      // per rank: first word of its signals in a row; [n] = row width
  std::vector<std::uint64_t> hb_sigs_;      // per flat step: signals hb it (or it)
  std::vector<std::size_t> after_base_;     // per rank: start of its rows in after_sigs_
  std::vector<std::uint64_t> after_sigs_;   // per step: its rank's signals it precedes locally (or is)
  bool hb_complete_ = false;                // false: the graph has a cycle
};

}  // namespace

VerifyResult verify(const Plan& plan) {
  bool in_place = false;
  try {
    Verifier(plan, false).run();
    // A reads_input plan also runs in place, with Input and Output one
    // buffer (an all-gather's Input is a block of its Output: its own rule,
    // check_own_block_writes, covers it).
    in_place = true;
    if (plan.reads_input && plan.coll != Collective::AllGather) Verifier(plan, true).run();
    return {};
  } catch (const Failure& f) {
    return {false, fmt::format("{} / {} (nranks {}, count {}, root {}{}): {}", collective_name(plan.coll),
                               plan.algorithm, plan.args.nranks, plan.args.count, plan.args.root,
                               in_place ? ", in place: input and output are the same memory" : "", f.message)};
  } catch (const std::exception& e) {
    // input_count() rejects malformed alltoall splits with braid::Error.
    return {false, fmt::format("{} / {}: {}", collective_name(plan.coll), plan.algorithm, e.what())};
  }
}

}  // namespace braid::plan
