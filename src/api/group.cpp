// Group: rank translation, and new_group.
#include "braid/group.hpp"

#include "braid/process_group.hpp"
#include "src/common/errors.hpp"
#include "src/runtime/context.hpp"

namespace braid {

static const detail::GroupImpl& impl_of(const std::shared_ptr<detail::GroupImpl>& g) {
  if (!g) fail(ErrorCode::InvalidArgument, "this Group is empty: expected one made by braid::new_group() or braid::world()");
  return *g;
}

int Group::rank() const { return impl_of(impl_).my_rank; }
int Group::size() const { return static_cast<int>(impl_of(impl_).ranks.size()); }
const std::vector<int>& Group::ranks() const { return impl_of(impl_).ranks; }
std::uint32_t Group::id() const { return impl_of(impl_).id; }

bool Group::contains_global(int global_rank) const {
  const auto& g = impl_of(impl_);
  return global_rank >= 0 && global_rank < static_cast<int>(g.group_of_global.size()) &&
         g.group_of_global[static_cast<std::size_t>(global_rank)] >= 0;
}

int Group::global_rank(int group_rank) const {
  const auto& g = impl_of(impl_);
  if (group_rank < 0 || group_rank >= static_cast<int>(g.ranks.size()))
    fail(ErrorCode::InvalidArgument, "group rank {} is out of range: the group has {} ranks", group_rank,
         g.ranks.size());
  return g.ranks[static_cast<std::size_t>(group_rank)];
}

int Group::group_rank(int global) const {
  const auto& g = impl_of(impl_);
  check_member(g, global, "rank", "Group::group_rank");
  return g.group_of_global[static_cast<std::size_t>(global)];
}

int get_rank(const Group& group) { return group.rank(); }
int get_world_size(const Group& group) { return group.size(); }

Group new_group_in(const std::shared_ptr<Context>& ctx, const std::vector<int>& ranks) {
  Context& c = *ctx;
  if (ranks.empty())
    fail(ErrorCode::InvalidArgument, "new_group: the rank list is empty: expected at least one rank");
  auto g = make_group(c.next_group_id, ranks, c.world_size, c.rank);
  g->owner = ctx;
  // Ids come from a per-process counter: the same on every rank because every
  // rank calls new_group in the same order, which agree_on_group checks.
  agree_on_group(c, *g);
  ++c.next_group_id;
  return Group(std::move(g));
}

Group new_group(const std::vector<int>& ranks, const OpOptions&) {
  context();  // InvalidState before init
  return new_group_in(shared_context(), ranks);
}

}  // namespace braid
