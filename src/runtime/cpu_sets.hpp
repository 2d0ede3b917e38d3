// CPU sets: which CPUs a rank may run on, as text for the store, and whether
// the ranks of one host have a CPU each between them.
//
// Whether waiters may poll depends on whether the ranks of a host share CPUs.
// Counting the CPUs in one's own affinity mask gets that wrong for pinned
// ranks: two ranks pinned to CPUs 0 and 1 each see one CPU and would believe
// the host oversubscribed, and yield on every wait. So every rank publishes
// its mask at init and each looks at those of its host's ranks. (A mask
// changed after init is not seen.)
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace braid::cpus {

inline constexpr int kMaxCpu = 1 << 16;
using Range = std::pair<int, int>;  // first and last CPU, inclusive

// The CPUs this thread may run on, as a list ("0-3,8"); all configured CPUs
// when the kernel does not say.
std::string mine();

// Parses "0-3,8" into its ranges as written; false on anything else (stray
// characters, a reversed range, a CPU at or beyond kMaxCpu). The text comes
// from a peer: the work is linear in its length whatever the ranges span.
bool parse(std::string_view list, std::vector<Range>* out);

// The number of distinct CPUs in the union of lists made by mine(); a list
// that does not parse counts for none.
int in_union(const std::vector<std::string>& lists);

// Whether ranks with these CPU lists (one per rank of a host) share CPUs:
// more ranks than CPUs in the union, or two ranks pinned to the same single
// CPU (a union can hide that: {0}, {0}, {1-3}). Not a full matching: ranks
// pinned to overlapping sets of several CPUs each count as not sharing.
bool oversubscribed(const std::vector<std::string>& lists);

// A CPU for the index-th rank of a host whose ranks' lists are `lists`, each
// rank its own: only when every list is the same (no one pinned them) and
// holds at least as many CPUs as there are ranks; else -1.
int spread_cpu(const std::vector<std::string>& lists, int index);

// The list text for a set of CPU numbers (sorted ranges).
std::string format(std::vector<int> cpus);

// The size in bytes of CPU 0's last-level cache, as sysfs gives it
// (/sys/devices/system/cpu/cpu0/cache/index*/size, the highest level); 0
// where it does not say. Read once.
double last_level_cache_bytes();

}  // namespace braid::cpus
