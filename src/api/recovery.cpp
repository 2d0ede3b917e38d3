// failed_ranks, agree, shrink_group: survivors continue after a failure
// (braid/recovery.hpp). Both calls are one decision among the group's
// survivors (runtime/agreement.hpp); what differs is what is decided.
#include "braid/recovery.hpp"

#include <algorithm>
#include <sstream>

#include <fmt/core.h>

#include "braid/process_group.hpp"
#include "src/common/errors.hpp"
#include "src/runtime/agreement.hpp"
#include "src/runtime/context.hpp"
#include "src/runtime/executor.hpp"
#include "src/runtime/peers.hpp"

namespace braid {

namespace {
detail::GroupImpl& group_for(const OpOptions& o, const char* op) {
  if (o.async_op) fail(ErrorCode::InvalidArgument, "{}: async_op is not supported: it runs to completion", op);
  // op_group checks membership; the group itself is not const to us: its
  // decision counter advances.
  return const_cast<detail::GroupImpl&>(op_group(o, op));
}
}  // namespace

std::vector<int> failed_ranks() { return context().engine->failed_ranks(); }

bool agree(bool flag, const OpOptions& options) {
  detail::GroupImpl& g = group_for(options, "agree");
  Context& c = op_context(options);
  const auto deadline = Deadline::after(op_timeout(options));
  const std::string out = decide(c, g, "agree", flag ? "1" : "0", [](const auto& posted) {
    bool all = true;
    for (const auto& v : posted)
      if (v) all = all && *v == "1";
    return std::string(all ? "1" : "0");
  }, deadline);
  if (out != "0" && out != "1")
    fail(ErrorCode::Store, "agree: the store holds a malformed outcome '{}' (expected 0 or 1)", out.substr(0, 40));
  return out == "1";
}

Group shrink_group(const OpOptions& options) {
  detail::GroupImpl& g = group_for(options, "shrink_group");
  Context& c = op_context(options);
  const auto deadline = Deadline::after(op_timeout(options));
  // The outcome: "<new group id> <global rank>..." of the members that took
  // part and are not known gone, in the old group's order.
  const std::string out = decide(c, g, "shrink_group", "1", [&](const auto& posted) {
    std::string s = std::to_string(take_group_id(c));
    for (std::size_t i = 0; i < posted.size(); ++i)
      if (posted[i]) s += " " + std::to_string(g.ranks[i]);
    return s;
  }, deadline);

  // Checked before use: anyone who reaches the store could have written it.
  std::istringstream in(out);
  std::string word;
  std::vector<std::uint64_t> nums;
  while (in >> word) {
    const auto v = decimal(word, 10);
    if (!v) break;
    nums.push_back(*v);
  }
  std::vector<int> ranks;
  bool ok = nums.size() >= 2 && taken_group_id(nums[0]);
  for (std::size_t i = 1; ok && i < nums.size(); ++i) {
    const auto r = static_cast<int>(nums[i]);
    ok = nums[i] < static_cast<std::uint64_t>(c.world_size) && g.group_of_global[static_cast<std::size_t>(r)] >= 0 &&
         std::find(ranks.begin(), ranks.end(), r) == ranks.end();
    ranks.push_back(r);
  }
  if (!ok)
    fail(ErrorCode::Store, "shrink_group: the store holds a malformed outcome '{}' (expected a group id and "
         "members of group {})", out.substr(0, 80), g.id);
  if (std::find(ranks.begin(), ranks.end(), c.rank) == ranks.end())
    throw Error(ErrorCode::PeerFailure,
                fmt::format("shrink_group: the other survivors of group {} found this rank (rank {}) failed and "
                            "left it out: they go on as ranks {}",
                            g.id, c.rank, rank_list(ranks)),
                c.rank);
  auto shrunk = make_group(static_cast<std::uint32_t>(nums[0]), ranks, c.world_size, c.rank);
  shrunk->owner = g.owner;
  agree_on_group(c, *shrunk);
  return Group(std::move(shrunk));
}

}  // namespace braid
