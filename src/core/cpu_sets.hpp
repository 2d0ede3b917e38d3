// CPU sets: which CPUs a rank may run on, as text for the store, and how many
// distinct CPUs the ranks of one host have between them.
//
// Whether waiters may poll depends on whether the ranks of a host share CPUs.
// Counting the CPUs in one's own affinity mask gets that wrong for pinned
// ranks: two ranks pinned to CPUs 0 and 1 each see one CPU and would believe
// the host oversubscribed, and yield on every wait. So every rank publishes
// its mask and each counts the union of the masks of its host's ranks.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace braid::cpus {

// The CPUs this thread may run on, as a list ("0-3,8"); all online CPUs when
// the kernel does not say.
std::string mine();

// The number of distinct CPUs in the union of lists made by mine(). A list
// that does not parse counts as no CPUs (a peer of another version, say).
int in_union(const std::vector<std::string>& lists);

// Parses "0-3,8" into CPU numbers; false on anything else (stray characters,
// a reversed range, a CPU beyond kMaxCpu).
bool parse(std::string_view list, std::vector<int>* out);

// The list text for a set of CPU numbers (sorted ranges).
std::string format(std::vector<int> cpus);

inline constexpr int kMaxCpu = 1 << 16;

}  // namespace braid::cpus
