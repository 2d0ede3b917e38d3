// split: new groups from a parent group by colour and key (MPI_Comm_split,
// ncclCommSplit). Only the parent's members take part, so a split group's id
// cannot come from new_group's per-process counter (which every rank of the
// default group advances alike): the first member of each colour takes one
// from a counter in the store, in a range of its own, and publishes it for
// the others under the parent's id, its split count and the colour.
#include <algorithm>
#include <cstdlib>
#include <cstdint>
#include <tuple>
#include <vector>

#include <fmt/core.h>

#include "braid/ops.hpp"
#include "braid/process_group.hpp"
#include "src/common/errors.hpp"
#include "src/runtime/context.hpp"
#include "src/runtime/peers.hpp"

namespace braid {

Group split(const Group& parent, int color, int key, const OpOptions& options) {
  if (!parent.valid())
    fail(ErrorCode::InvalidArgument, "split: the parent group is empty: expected one made by world(), new_group() or split()");
  if (color < 0 && color != NO_COLOR)
    fail(ErrorCode::InvalidArgument, "split: color {} is negative: expected a color >= 0, or NO_COLOR", color);
  const int me = parent.rank();
  if (me < 0)
    fail(ErrorCode::InvalidArgument, "split: this rank is not a member of the parent group (group {}): only its "
         "members call split", parent.id());
  detail::GroupImpl& p = *parent.impl();
  OpOptions o = options;
  o.group = &parent;
  o.async_op = false;
  Context& c = op_context(o);

  // Everyone's (color, key), in parent order.
  const int n = parent.size();
  std::vector<std::int64_t> mine{color, key}, all(static_cast<std::size_t>(2 * n));
  all_gather_into_tensor(tensor(all), tensor(mine), o);
  const std::uint64_t seq = p.splits++;
  if (color == NO_COLOR) return Group();

  std::vector<std::tuple<std::int64_t, int, int>> members;  // key, parent rank, global rank
  for (int i = 0; i < n; ++i)
    if (all[static_cast<std::size_t>(2 * i)] == color)
      members.emplace_back(all[static_cast<std::size_t>(2 * i + 1)], i, parent.global_rank(i));
  std::sort(members.begin(), members.end());
  std::vector<int> ranks;
  for (const auto& m : members) ranks.push_back(std::get<2>(m));

  const std::string where = fmt::format("split/{}/{}/{}", p.id, seq, color);
  std::uint64_t id = 0;
  if (ranks.front() == c.rank) {
    id = take_group_id(c);
    c.store->set(where, store::to_bytes(std::to_string(id)));
  } else {
    // Checked before use: anyone who reaches the store could have written it.
    const std::string v = store::to_string(c.store->get(where, op_timeout(o)));
    id = decimal(v, 10).value_or(0);
    if (!taken_group_id(id))
      fail(ErrorCode::Store, "split: the store holds a malformed group id '{}' under {} (expected 2^30..2^31-1)",
           v.substr(0, 40), where);
  }
  auto g = make_group(static_cast<std::uint32_t>(id), ranks, c.world_size, c.rank);
  g->owner = p.owner;
  agree_on_group(c, *g);
  return Group(std::move(g));
}

}  // namespace braid
