// Survivors continue: after a rank fails, the groups that hold it are
// poisoned (their ops fail with PeerFailure naming it), every other group
// goes on, and the survivors of a poisoned group can agree and rebuild it,
// as MPI's ULFM (MPIX_Comm_agree, MPIX_Comm_shrink) and NCCL's
// ncclCommShrink allow.
//
// Both calls below go through the job's store. When rank 0 hosts the store
// (env://, tcp://) and rank 0 is among the dead, nothing can be agreed: every
// op fails with PeerFailure naming rank 0. With an external braid-store (or a
// file:// store) survivors of any rank's death can go on.
#pragma once

#include <vector>

#include "braid/group.hpp"
#include "braid/options.hpp"

namespace braid {

// Global ranks known to this process to have failed, ascending. After an op
// threw PeerFailure naming a rank, that rank is in it.
std::vector<int> failed_ranks();

// Every surviving member of options.group (the default group if null) calls
// it, in the same order relative to other agree/shrink_group calls on that
// group. Returns the group of the survivors, in the old group's order, the
// same list on every survivor. A member that neither calls it nor is known to
// have failed within options.timeout is named in a Timeout error. A rank the
// others found failed, which calls it anyway, gets PeerFailure.
Group shrink_group(const OpOptions& options = {});

// The AND of `flag` over the surviving members of options.group (default
// group if null), called by each of them in the same order relative to other
// agree/shrink_group calls on the group. Every survivor gets the same answer,
// even if a member dies during the call.
bool agree(bool flag, const OpOptions& options = {});

}  // namespace braid
