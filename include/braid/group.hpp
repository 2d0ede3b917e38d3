// Group: an ordered subset of the world's ranks with its own message space.
// Ranks passed to ops (src, dst, root) are always global ranks, as in
// torch.distributed; Group translates.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

namespace braid {

namespace detail { struct GroupImpl; }

class Group {
 public:
  Group() = default;  // an invalid group; use new_group() or world()

  bool valid() const { return impl_ != nullptr; }
  // The caller's rank in this group, or -1 if the caller is not a member.
  int rank() const;
  int size() const;
  bool contains_global(int global_rank) const;
  // Translation; both throw braid::Error for a rank outside the group.
  int global_rank(int group_rank) const;
  int group_rank(int global_rank) const;
  const std::vector<int>& ranks() const;  // global ranks, in group order
  std::uint32_t id() const;                // the same on every member

  explicit Group(std::shared_ptr<detail::GroupImpl> impl) : impl_(std::move(impl)) {}
  const std::shared_ptr<detail::GroupImpl>& impl() const { return impl_; }

 private:
  std::shared_ptr<detail::GroupImpl> impl_;
};

}  // namespace braid
