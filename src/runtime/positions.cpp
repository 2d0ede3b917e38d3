#include "src/runtime/positions.hpp"

#include <algorithm>
#include <map>
#include <utility>

#include <fmt/core.h>

#include "src/common/errors.hpp"
#include "src/runtime/engine.hpp"
#include "src/runtime/executor.hpp"
#include "src/runtime/peers.hpp"

namespace braid {

namespace {
constexpr std::size_t kMaxAwaits = 16;  // ranks a position names at most
}  // namespace

std::uint64_t call_number(const ExecCall& c) { return c.seq + c.ticket + 1; }

namespace {
// The bytes a call's position says it carries.
std::uint64_t call_bytes(const ExecCall& c) {
  return static_cast<std::uint64_t>(c.plan->plan->args.count) * c.plan->plan->args.elem_size;
}
}  // namespace

std::string position_key(std::uint32_t group_id, int group_rank) {
  return fmt::format("pos/{}/{}", group_id, group_rank);
}

std::string position_value(std::uint64_t call, const std::string& what, std::uint64_t bytes,
                           const std::vector<int>& awaits) {
  std::string v = fmt::format("{} {} {}", call, bytes, what);
  for (std::size_t i = 0; i < awaits.size() && i < kMaxAwaits; ++i) v += fmt::format("{}{}", i ? ',' : ' ', awaits[i]);
  return v;
}

std::optional<Position> parse_position(const std::string& v, int rank) {
  const auto a = v.find(' ');
  const auto b = a == std::string::npos ? a : v.find(' ', a + 1);
  if (b == std::string::npos) return std::nullopt;
  const auto call = decimal(std::string_view(v).substr(0, a), 19);
  const auto bytes = decimal(std::string_view(v).substr(a + 1, b - a - 1), 19);
  const auto c = v.find(' ', b + 1);
  std::string what = v.substr(b + 1, c == std::string::npos ? 64 : std::min<std::size_t>(c - b - 1, 64));
  if (!call || !bytes || what.empty() ||
      !std::all_of(what.begin(), what.end(), [](char ch) { return ch == '_' || ch == '(' || ch == ')' || (ch >= 'a' && ch <= 'z'); }))
    return std::nullopt;
  Position p{rank, *call, std::move(what), *bytes, {}};
  if (c != std::string::npos) {  // the awaited ranks: "r,r,..."
    std::string_view list = std::string_view(v).substr(c + 1);
    while (!list.empty() && p.awaits.size() < kMaxAwaits) {
      const auto comma = list.find(',');
      const auto r = decimal(list.substr(0, comma), 9);
      if (!r) return std::nullopt;
      p.awaits.push_back(static_cast<int>(*r));
      if (comma == std::string_view::npos) break;
      list.remove_prefix(comma + 1);
    }
  }
  return p;
}

int follow_waits(const std::vector<Position>& ps, std::uint64_t top, int start, int me,
                 const std::vector<int>& host_of_global, int my_host, const std::vector<int>& stopped) {
  auto position_of = [&](int r) -> const Position* {
    for (const auto& p : ps)
      if (p.rank == r) return &p;
    return nullptr;
  };
  auto host = [&](int r) {
    return r >= 0 && static_cast<std::size_t>(r) < host_of_global.size() ? host_of_global[static_cast<std::size_t>(r)] : -1;
  };
  std::vector<int> chain;
  int cur = start;
  for (;;) {
    chain.push_back(cur);
    const Position* p = position_of(cur);
    if (!p || p->awaits.empty()) return cur;  // waits on nobody we know of
    if (std::find(stopped.begin(), stopped.end(), cur) != stopped.end()) return cur;  // its awaits are stale
    int next = -1;
    for (int q : p->awaits)
      if (q != cur && q != me) {
        next = q;
        break;
      }
    if (next < 0) return cur;  // it waits on us only: it is where the chain ends
    if (p->call != top) {
      // Behind the latest call: alive and waiting there on `next` (a
      // host-mate one call behind, waiting across a cut), or stopped since
      // it published, its awaits stale. A rank that has been seen in a later
      // call than p's has finished with p's call, so p's wait on it is stale:
      // the chain ends at p. One not seen since (never, or in p's call or
      // before) may still hold p there.
      const Position* n = position_of(next);
      if (n && n->call > p->call) return cur;
    }
    if (const auto from = std::find(chain.begin(), chain.end(), next); from != chain.end()) {
      // A loop: name its rank on another host, where there is one.
      for (auto it = from; it != chain.end(); ++it)
        if (my_host >= 0 && host(*it) >= 0 && host(*it) != my_host) return *it;
      return -1;
    }
    cur = next;
  }
}

std::vector<Position> read_positions(store::Store& st, std::uint32_t group_id, const std::vector<int>& ranks) {
  std::vector<Position> out;
  for (std::size_t q = 0; q < ranks.size(); ++q) {
    Position p;
    p.rank = ranks[q];
    if (auto v = st.try_get(position_key(group_id, static_cast<int>(q))))
      if (auto parsed = parse_position(store::to_string(*v), ranks[q])) p = *parsed;
    out.push_back(std::move(p));
  }
  return out;
}

namespace {
std::string size_text(std::uint64_t b) {
  if (b >= (1u << 20) && b % (1u << 20) == 0) return fmt::format("{} MiB", b >> 20);
  if (b >= 1024 && b % 1024 == 0) return fmt::format("{} KiB", b >> 10);
  return fmt::format("{} B", b);
}
}  // namespace

std::string describe_positions(const std::vector<Position>& ps, int* behind, const std::vector<int>& prefer) {
  // Ranks by the call they were last seen in, the furthest behind first
  // (and by what they were doing there: a point-to-point op waits under
  // the number of the call after it).
  std::map<std::pair<std::uint64_t, std::string>, std::vector<const Position*>> by_call;
  for (const auto& p : ps) by_call[{p.call, p.call ? p.what : std::string()}].push_back(&p);
  *behind = -1;
  if (!by_call.empty() && by_call.begin()->first.first != by_call.rbegin()->first.first) {
    // A rank is behind when it was last seen in an earlier call than the
    // latest, or never: a rank publishes only when it waits, so one that
    // did not wait in the latest call may be ahead or stuck before it, and
    // the caller's hints (a stopped process, a rank it waited on) decide
    // among all of them; without a hint, the first of those seen least.
    const std::uint64_t top = by_call.rbegin()->first.first;
    *behind = by_call.begin()->second.front()->rank;
    bool hinted = false;
    for (int q : prefer) {
      for (const auto& p : ps)
        if (p.rank == q && p.call < top) {
          *behind = q;
          hinted = true;
          break;
        }
      if (hinted) break;
    }
  }
  std::string out;
  for (auto it = by_call.begin(); it != by_call.end(); ++it) {
    std::vector<int> ranks;
    for (const Position* p : it->second) ranks.push_back(p->rank);
    const bool one = ranks.size() == 1;
    const std::string who = fmt::format("rank{} {}", one ? "" : "s", rank_list(ranks));
    std::string part;
    if (it->first.first == 0) {
      part = fmt::format("{} {} not been seen waiting in a call of this group", who, one ? "has" : "have");
    } else {
      const Position& p = *it->second.front();
      const bool last = it->first.first == by_call.rbegin()->first.first;
      // The last call is where the waiting ranks are now; a rank last seen
      // in an earlier one may still be in it, or stuck (or stopped) since.
      part = last ? fmt::format("{} wait{} in {} #{} ({})", who, one ? "s" : "", p.what, p.call, size_text(p.bytes))
                  : fmt::format("{} {} last seen in {} #{} ({})", who, one ? "was" : "were", p.what, p.call,
                                size_text(p.bytes));
    }
    out += (out.empty() ? "" : "; ") + part;
  }
  return out;
}

void publish_position(Engine& e, std::uint32_t group_id, int group_rank, std::uint64_t call, const std::string& what,
                      std::uint64_t bytes, const std::vector<int>& awaits) {
  store::CallCap cap(Deadline::after(kStoreCallLimit));
  try {
    e.store().set(position_key(group_id, group_rank), store::to_bytes(position_value(call, what, bytes, awaits)));
  } catch (const Error&) {  // the store is gone: the failure log says the rest
  }
}

std::uint64_t next_call_number(const detail::GroupImpl& g) {
  return g.collective_seq.load(std::memory_order_relaxed) + g.one_sided_issued.load(std::memory_order_relaxed) + 1;
}

void PositionPublisher::publish(Engine& e, const std::vector<int>& awaits) {
  done_ = true;
  publish_position(e, call_.group->id, call_.group->my_rank, call_number(call_), call_.what, call_bytes(call_), awaits);
}

void PositionPublisher::dialing(Engine& e, int peer) {
  publish_position(e, call_.group->id, call_.group->my_rank, call_number(call_), call_.what, call_bytes(call_), {peer});
}

std::string diagnose(Engine& e, const ExecCall& c, int* behind, const std::vector<int>& waited_for, int hint) {
  return diagnose(e, *c.group, call_number(c), c.what, call_bytes(c), behind, waited_for, nullptr, hint);
}

std::string diagnose(Engine& e, const detail::GroupImpl& g, std::uint64_t call, const std::string& what,
                     std::uint64_t bytes, int* behind, const std::vector<int>& waited_for, int* chain_end, int hint) {
  *behind = -1;
  if (chain_end) *chain_end = -1;
  store::CallCap cap(Deadline::after(kStoreCallLimit));  // all of it: publish and read
  try {
    publish_position(e, g.id, g.my_rank, call, what, bytes, waited_for);
    const auto ps = read_positions(e.store(), g.id, g.ranks);
    // Among the ranks behind, a stopped one (this host) is the likeliest
    // cause, then one this call waited on.
    std::uint64_t top = 0;
    for (const auto& p : ps) top = std::max(top, p.call);
    // Stopped: only a host-mate can be seen so (one store read each), so
    // only they are asked, where the group knows its hosts.
    const int mine = static_cast<std::size_t>(g.my_rank) < g.host_of.size() ? g.host_of[static_cast<std::size_t>(g.my_rank)] : -1;
    std::vector<int> stopped;
    for (std::size_t q = 0; q < ps.size(); ++q) {
      const bool mate = mine < 0 || q >= g.host_of.size() || g.host_of[q] == mine;
      if (mate && ps[q].rank != e.rank() && e.stopped(ps[q].rank)) stopped.push_back(ps[q].rank);
    }
    std::vector<int> prefer = stopped;
    prefer.insert(prefer.end(), waited_for.begin(), waited_for.end());
    if (hint >= 0) prefer.push_back(hint);
    std::string where = describe_positions(ps, behind, prefer);
    // The rank this one waited on may itself wait on the cause (a host-mate
    // waiting across a cut link, in this call or one behind, on a stopped
    // rank, or in a point-to-point op on one): follow who waits on whom.
    // That wins over the ranks merely behind: a rank that never waited long
    // was never seen.
    if (!waited_for.empty()) {
      std::vector<int> host_of(static_cast<std::size_t>(e.world_size()), -1);
      for (std::size_t q = 0; q < g.ranks.size() && q < g.host_of.size(); ++q)
        host_of[static_cast<std::size_t>(g.ranks[q])] = g.host_of[q];
      const int end = follow_waits(ps, top, waited_for.front(), e.rank(), host_of, mine, stopped);
      if (end >= 0 && end != waited_for.front()) {
        *behind = end;
        if (chain_end) *chain_end = end;
        where += fmt::format("; rank {} waits in turn on rank {}", waited_for.front(), end);
      }
    }
    return fmt::format(" (where each rank is: {})", where);
  } catch (const Error& x) {
    // The store is frozen or gone: with it, most likely its host.
    if (x.code() != ErrorCode::Timeout && x.code() != ErrorCode::Store) return {};
    if (e.rank() != 0) *behind = 0;
    return fmt::format(" (the store did not answer ({}): rank 0, which hosts it unless a braid-store does, is "
                       "gone, stuck or stopped)", x.what());
  }
}

}  // namespace braid
