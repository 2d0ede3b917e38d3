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

}  // namespace braid
