#include "src/runtime/agreement.hpp"

#include <algorithm>
#include <chrono>
#include <sstream>
#include <thread>

#include "src/common/errors.hpp"
#include "src/runtime/executor.hpp"
#include "src/runtime/peers.hpp"

namespace braid {

namespace {
// Store polling: quick at first (members usually arrive together), then
// backing off, so that a long wait for a slow member costs the store little.
constexpr auto kFirstPoll = std::chrono::microseconds(500);
constexpr auto kLongestPoll = std::chrono::milliseconds(20);
// How often members that have not posted are probed for liveness (a store
// read and a process or listener check each).
constexpr auto kProbeEvery = std::chrono::milliseconds(100);
// The stored outcome "<outcome>|<gone global ranks>": records the gone ones
// as failed and returns the outcome. Checked: anyone who reaches the store
// could have written it.
std::string accept(Context& c, const detail::GroupImpl& g, const std::string& stored, const char* what) {
  const auto bar = stored.rfind('|');
  std::vector<int> gone;
  bool ok = bar != std::string::npos;
  if (ok) {
    std::istringstream in(stored.substr(bar + 1));
    std::string word;
    while (ok && in >> word) {
      const auto r = decimal(word, 9);
      ok = r && *r < static_cast<std::uint64_t>(c.world_size) && g.group_of_global[*r] >= 0;
      if (ok) gone.push_back(static_cast<int>(*r));
    }
  }
  if (!ok)
    fail(ErrorCode::Store, "{}: the store holds a malformed outcome '{}' (expected '<outcome>|<ranks of group {}>')",
         what, stored.substr(0, 80), g.id);
  for (int r : gone)
    if (r != c.rank) c.engine->note_reported(r, "the survivors found it gone");
  return stored.substr(0, bar);
}
}  // namespace

namespace {
std::string decide_through_store(Context& c, detail::GroupImpl& g, const char* what, const std::string& mine,
                                 const DecideFn& outcome, Deadline deadline) {
  Engine& e = *c.engine;
  store::Store& st = *c.store;
  const std::uint64_t seq = g.decisions++;
  const std::string prefix = fmt::format("decide/{}/{}/", g.id, seq);
  const std::string decided_key = prefix + "outcome";
  st.set(prefix + std::to_string(g.my_rank), store::to_bytes(mine));

  const std::size_t n = g.ranks.size();
  std::vector<std::optional<std::string>> posted(n);
  posted[static_cast<std::size_t>(g.my_rank)] = mine;
  auto poll = kFirstPoll;
  auto next_probe = Clock::now();
  for (;;) {
    if (auto d = st.try_get(decided_key)) return accept(c, g, store::to_string(*d), what);
    std::vector<int> missing;
    for (std::size_t i = 0; i < n; ++i) {
      if (posted[i]) continue;
      if (auto v = st.try_get(prefix + std::to_string(i))) {
        posted[i] = store::to_string(*v);
        continue;
      }
      if (!e.gone(g.ranks[i])) missing.push_back(g.ranks[i]);
    }
    if (missing.empty()) {
      // Everyone is accounted for: decide, unless someone already did. A
      // member gone after it posted is left out too (it would be the first
      // to fail whatever comes next).
      auto live = posted;
      std::string gone;
      for (std::size_t i = 0; i < n; ++i) {
        if (static_cast<int>(i) != g.my_rank && e.gone(g.ranks[i])) live[i].reset();
        if (!live[i]) gone += fmt::format(" {}", g.ranks[i]);
      }
      // The members left out go with the outcome: every survivor then knows
      // them failed (failed_ranks() is the same everywhere).
      const std::string mine_outcome = outcome(live) + "|" + gone;
      return accept(c, g, store::to_string(st.compare_set(decided_key, {}, store::to_bytes(mine_outcome))), what);
    }
    if (deadline.expired())
      throw Error(ErrorCode::Timeout,
                  fmt::format("{}: rank(s) {} neither called it nor failed within the timeout: every surviving "
                              "member of the group (ranks {}) calls it, in the same order",
                              what, rank_list(missing), rank_list(g.ranks)),
                  missing.front());
    if (Clock::now() >= next_probe) {
      e.refresh_failures(missing);  // reads the failure log, probes the missing
      next_probe = Clock::now() + kProbeEvery;
      continue;
    }
    std::this_thread::sleep_for(poll);
    poll = std::min<std::chrono::microseconds>(poll * 2, kLongestPoll);
  }
}

}  // namespace

std::string decide(Context& c, detail::GroupImpl& g, const char* what, const std::string& mine,
                   const DecideFn& outcome, Deadline deadline) {
  try {
    return decide_through_store(c, g, what, mine, outcome, deadline);
  } catch (const Error& e) {
    // No store, no agreement: with rank 0 its host, that is rank 0's death.
    if (e.code() == ErrorCode::Store) c.engine->store_call_failed(e);
    throw;
  }
}

}  // namespace braid
