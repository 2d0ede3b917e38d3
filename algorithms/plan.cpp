// Names, buffer sizes and the printed form of plans (see plan.hpp for the
// buffer contract these sizes implement).
#include "algorithms/plan.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <cctype>

#include "src/common/errors.hpp"
#include "algorithms/verify.hpp"  // to_string(const Step&)

namespace braid::plan {

namespace {

constexpr const char* kCollectiveNames[kNumCollectives] = {
    "broadcast", "allreduce", "reduce",        "allgather", "gather",
    "scatter",   "reducescatter", "alltoall", "barrier",
};

const char* buf_name(Buf b) {
  switch (b) {
    case Buf::Input: return "in";
    case Buf::Output: return "out";
    case Buf::Scratch: return "scratch";
  }
  return "?";
}

std::string span_text(const Span& s) {
  return fmt::format("{}[{}..{})", buf_name(s.buf), s.offset, s.offset + s.count);
}

// Elements rank `from` sends rank `to` in an all-to-all.
std::int64_t a2a_split(const PlanArgs& a, int from, int to) {
  if (a.splits.empty()) return a.count;
  const auto n = static_cast<std::size_t>(a.nranks);
  if (a.splits.size() != n || a.splits[static_cast<std::size_t>(from)].size() != n)
    fail(ErrorCode::InvalidArgument,
         "alltoall splits must be {} x {} (one row per sending rank), got {} rows", n, n,
         a.splits.size());
  return a.splits[static_cast<std::size_t>(from)][static_cast<std::size_t>(to)];
}

}  // namespace

const char* collective_name(Collective c) {
  const auto i = static_cast<int>(c);
  return i >= 0 && i < kNumCollectives ? kCollectiveNames[i] : "unknown";
}

bool parse_collective(const std::string& name, Collective* out) {
  // Accept NCCL's spelling and torch's ("all_reduce", "reduce_scatter"):
  // drop underscores/dashes and compare case-insensitively.
  std::string key;
  for (char ch : name)
    if (ch != '_' && ch != '-') key += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  for (int i = 0; i < kNumCollectives; ++i) {
    if (key == kCollectiveNames[i]) {
      if (out) *out = static_cast<Collective>(i);
      return true;
    }
  }
  return false;
}

const char* step_kind_name(StepKind k) {
  switch (k) {
    case StepKind::Send: return "send";
    case StepKind::Recv: return "recv";
    case StepKind::RecvReduce: return "recv_reduce";
    case StepKind::Copy: return "copy";
    case StepKind::Reduce: return "reduce";
    case StepKind::Signal: return "signal";
    case StepKind::Wait: return "wait";
    case StepKind::Get: return "get";
    case StepKind::GetReduce: return "get_reduce";
    case StepKind::Put: return "put";
  }
  return "unknown";
}

bool is_one_sided(StepKind k) {
  return k == StepKind::Signal || k == StepKind::Wait || k == StepKind::Get || k == StepKind::GetReduce ||
         k == StepKind::Put;
}

bool is_reduction(Collective c) {
  return c == Collective::AllReduce || c == Collective::Reduce || c == Collective::ReduceScatter;
}

bool fits_fastbox(const Plan& p) {
  if (p.one_sided || !p.args.splits.empty()) return false;
  const std::size_t n = p.ranks.size();
  std::vector<std::int64_t> lines(n);  // to each receiver, from one sender
  for (const RankPlan& rp : p.ranks) {
    std::fill(lines.begin(), lines.end(), 0);
    for (const Step& s : rp.steps) {
      if (s.kind != StepKind::Send) continue;
      if (s.peer < 0 || static_cast<std::size_t>(s.peer) >= n) return false;
      std::int64_t& l = lines[static_cast<std::size_t>(s.peer)];
      l += fastbox_lines(s.src.count * static_cast<std::int64_t>(p.args.elem_size));
      if (l > kFastboxLines) return false;
    }
  }
  return true;
}

bool splits_well_formed(const PlanArgs& a) {
  if (a.splits.empty()) return true;
  if (a.splits.size() != static_cast<std::size_t>(a.nranks)) return false;
  for (const auto& row : a.splits) {
    if (row.size() != static_cast<std::size_t>(a.nranks)) return false;
    for (std::int64_t v : row)
      if (v < 0) return false;
  }
  return true;
}

std::int64_t input_count(const PlanArgs& a, int rank) {
  const std::int64_t n = a.nranks, c = a.count;
  switch (a.coll) {
    case Collective::AllGather:
    case Collective::Gather: return c;
    case Collective::Scatter: return rank == a.root ? n * c : 0;
    case Collective::ReduceScatter: return n * c;
    case Collective::AllToAll: {
      if (a.splits.empty()) return n * c;
      std::int64_t total = 0;
      for (int j = 0; j < a.nranks; ++j) total += a2a_split(a, rank, j);
      return total;
    }
    case Collective::Broadcast:
    case Collective::AllReduce:
    case Collective::Reduce:
    case Collective::Barrier: return 0;
  }
  return 0;
}

std::int64_t input_count(const Plan& p, int rank) {
  if (p.reads_input && (p.coll == Collective::AllReduce || p.coll == Collective::Reduce)) return p.args.count;
  if (p.reads_input && p.coll == Collective::Broadcast) return rank == p.args.root ? p.args.count : 0;
  return input_count(p.args, rank);
}

std::int64_t output_count(const PlanArgs& a, int rank) {
  const std::int64_t n = a.nranks, c = a.count;
  switch (a.coll) {
    case Collective::Broadcast:
    case Collective::AllReduce:
    case Collective::Reduce:
    case Collective::Scatter:
    case Collective::ReduceScatter: return c;
    case Collective::AllGather: return n * c;
    case Collective::Gather: return rank == a.root ? n * c : 0;
    case Collective::AllToAll: {
      if (a.splits.empty()) return n * c;
      std::int64_t total = 0;
      for (int i = 0; i < a.nranks; ++i) total += a2a_split(a, i, rank);
      return total;
    }
    case Collective::Barrier: return 0;
  }
  return 0;
}

std::string to_string(const Step& s) {
  std::string line = fmt::format("{:<11}", step_kind_name(s.kind));
  switch (s.kind) {
    case StepKind::Send:
      line += fmt::format(" -> {:<3} slot {:<3} {}", s.peer, s.slot, span_text(s.src));
      break;
    case StepKind::Recv:
      line += fmt::format(" <- {:<3} slot {:<3} {}", s.peer, s.slot, span_text(s.dst));
      break;
    case StepKind::RecvReduce:
      line += fmt::format(" <- {:<3} slot {:<3} {}", s.peer, s.slot, span_text(s.dst));
      if (s.acc.count > 0) line += fmt::format(" = {} op received", span_text(s.acc));
      break;
    case StepKind::Copy:
      line += fmt::format(" {} -> {}", span_text(s.src), span_text(s.dst));
      break;
    case StepKind::Reduce:
      line += fmt::format(" {} -> {}", span_text(s.src), span_text(s.dst));
      if (s.acc.count > 0) line += fmt::format(" = {} op {}", span_text(s.acc), span_text(s.src));
      break;
    case StepKind::Signal:
      line += fmt::format(" -> {:<3} slot {:<3}", s.peer, s.slot);
      break;
    case StepKind::Wait:
      line += fmt::format(" <- {:<3} slot {:<3}", s.peer, s.slot);
      break;
    case StepKind::Get:
      line += fmt::format(" {}@{} -> {}", span_text(s.src), s.peer, span_text(s.dst));
      break;
    case StepKind::GetReduce:
      line += fmt::format(" {} op {}@{} -> {}", span_text(s.acc), span_text(s.src), s.peer, span_text(s.dst));
      break;
    case StepKind::Put:  // the mirror of get: the peer's span carries the @
      line += fmt::format(" {} -> {}@{}", span_text(s.src), span_text(s.dst), s.peer);
      break;
  }
  if (!s.deps.empty()) {
    line += "  after";
    for (auto d : s.deps) line += fmt::format(" {}", d);
  }
  return line;
}

std::string to_string(const Plan& p) {
  const PlanArgs& a = p.args;
  std::string text = fmt::format("{} / {}: {} ranks, count {}, {} bytes per element", collective_name(p.coll),
                                 p.algorithm, a.nranks, a.count, a.elem_size);
  if (p.coll == Collective::Broadcast || p.coll == Collective::Reduce || p.coll == Collective::Gather ||
      p.coll == Collective::Scatter)
    text += fmt::format(", root {}", a.root);
  if (!a.splits.empty()) text += ", uneven splits";
  if (p.one_sided) text += ", one-sided";
  if (p.reads_input) text += ", reads input";
  text += '\n';
  for (std::size_t r = 0; r < p.ranks.size(); ++r) {
    const RankPlan& rp = p.ranks[r];
    const int rank = static_cast<int>(r);
    std::string sizes;
    try {
      sizes = fmt::format("in {}, out {}, scratch {}", input_count(p, rank), output_count(a, rank),
                          rp.scratch_count);
    } catch (const Error& e) {
      sizes = e.what();  // malformed splits: still print the steps
    }
    text += fmt::format("rank {} ({}; {} steps)\n", rank, sizes, rp.steps.size());
    const int width = static_cast<int>(fmt::formatted_size("{}", rp.steps.empty() ? 0 : rp.steps.size() - 1));
    for (std::size_t i = 0; i < rp.steps.size(); ++i)
      text += fmt::format("  [{:>{}}] {}\n", i, width, to_string(rp.steps[i]));
  }
  return text;
}

}  // namespace braid::plan
