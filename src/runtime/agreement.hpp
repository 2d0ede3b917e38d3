// One decision among the surviving members of a group, through the store:
// what agree and shrink_group are made of.
//
// Each survivor posts its value under the call's key. Once every member has
// either posted or is known gone (failed or left: Engine::gone, with peers'
// liveness probed while we wait), the first survivor to see it computes the
// outcome and writes it with compare-and-set; every survivor returns what
// that write left in the store. So all of them get the same answer, even
// when a member dies in the middle (it then either posted in time or not:
// whoever decides first fixes which), and no survivor waits on a dead one.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "src/runtime/context.hpp"

namespace braid {

// `posted[i]`: group rank i's value, or nullopt for a member that is gone
// without posting. Returns the outcome to store.
using DecideFn = std::function<std::string(const std::vector<std::optional<std::string>>& posted)>;

// `what` names the call in errors and keys ("agree", "shrink_group"). The
// members call decide() in the same order on the group (a sequence number
// of the group's, taken here, names the call). Throws Timeout naming the
// members that neither posted nor are known gone by `deadline`.
std::string decide(Context& c, detail::GroupImpl& g, const char* what, const std::string& mine,
                   const DecideFn& outcome, Deadline deadline);

}  // namespace braid
