// Process-group lifetime: init, identity, groups, teardown.
//
// Thread safety: init_process_group, new_group and destroy_process_group must
// be called from one thread while no op is in flight. All ops and the queries
// below may be called from several threads at once, each op on its own
// buffers; ops issued concurrently on one group are matched between ranks in
// the order each rank issues them, so concurrent collectives on one group must
// be issued in the same order on every rank (as in torch.distributed).
#pragma once

#include <string>
#include <vector>

#include "braid/group.hpp"
#include "braid/options.hpp"

namespace braid {

void init_process_group(const InitOptions& options = {});
bool is_initialized();
void destroy_process_group();

int get_rank();
int get_world_size();
int get_rank(const Group& group);        // -1 if the caller is outside
int get_world_size(const Group& group);
std::string get_backend();

// The default group: every rank of the job.
Group world();
// Every rank of the default group calls it, with the same list, in the same
// order relative to other new_group calls (as in torch.distributed). Ranks are
// global; the group's order is the list's order.
Group new_group(const std::vector<int>& ranks, const OpOptions& options = {});

// A colour that puts the caller in no group of a split.
inline constexpr int NO_COLOR = -1;
// Splits `parent` by colour, as MPI_Comm_split and ncclCommSplit do: every
// member of parent calls it (and only they), in the same order relative to
// other collectives on parent. Members passing the same color >= 0 form one
// new group, ordered by key, then by their rank in parent; a member passing
// NO_COLOR gets an invalid Group (valid() is false). Ops on parent may use
// options (timeout); the split runs one all_gather on parent.
Group split(const Group& parent, int color, int key = 0, const OpOptions& options = {});

}  // namespace braid
