#include "src/runtime/cpu_sets.hpp"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <fstream>
#include <set>

#include <fmt/format.h>

namespace braid::cpus {

std::string mine() {
  std::vector<int> v;
  // Sized up from the configured count until the kernel's mask fits (it
  // says EINVAL while the set is smaller than its own).
  const long conf = sysconf(_SC_NPROCESSORS_CONF);
  for (int n = std::max(static_cast<int>(std::clamp<long>(conf, 1, kMaxCpu)), CPU_SETSIZE); n <= 4 * kMaxCpu; n *= 2) {
    cpu_set_t* set = CPU_ALLOC(n);
    if (!set) break;
    const std::size_t size = CPU_ALLOC_SIZE(n);
    const int rc = sched_getaffinity(0, size, set);
    const int err = errno;
    if (rc == 0)
      for (int c = 0; c < n && c < kMaxCpu; ++c)
        if (CPU_ISSET_S(c, size, set)) v.push_back(c);
    CPU_FREE(set);
    if (rc == 0 || err != EINVAL) break;
  }
  if (v.empty())
    for (int c = 0; c < std::clamp<long>(conf, 1, kMaxCpu); ++c) v.push_back(c);
  return format(std::move(v));
}

std::string format(std::vector<int> cpus) {
  std::sort(cpus.begin(), cpus.end());
  cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
  std::string s;
  for (std::size_t i = 0; i < cpus.size();) {
    std::size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    if (!s.empty()) s += ',';
    s += j == i ? fmt::format("{}", cpus[i]) : fmt::format("{}-{}", cpus[i], cpus[j]);
    i = j + 1;
  }
  return s;
}

bool parse(std::string_view list, std::vector<Range>* out) {
  out->clear();
  auto number = [&](std::string_view& s, int* v) {
    const auto r = std::from_chars(s.data(), s.data() + s.size(), *v);
    if (r.ec != std::errc() || *v < 0 || *v >= kMaxCpu) return false;
    s.remove_prefix(static_cast<std::size_t>(r.ptr - s.data()));
    return true;
  };
  std::string_view s = list;
  while (!s.empty()) {
    int lo = 0, hi = 0;
    if (!number(s, &lo)) return false;
    hi = lo;
    if (!s.empty() && s.front() == '-') {
      s.remove_prefix(1);
      if (!number(s, &hi) || hi < lo) return false;
    }
    out->emplace_back(lo, hi);
    if (s.empty()) break;
    if (s.front() != ',' || s.size() == 1) return false;
    s.remove_prefix(1);
  }
  return !out->empty();
}

int in_union(const std::vector<std::string>& lists) {
  std::vector<Range> all, one;
  for (const auto& l : lists)
    if (parse(l, &one)) all.insert(all.end(), one.begin(), one.end());
  std::sort(all.begin(), all.end());
  // Merged in one pass: the count is the sum of the merged ranges' lengths.
  long count = 0;
  int covered_to = -1;  // every CPU up to here is counted
  for (const auto& [lo, hi] : all) {
    if (hi <= covered_to) continue;
    count += hi - std::max(lo, covered_to + 1) + 1;
    covered_to = hi;
  }
  return static_cast<int>(count);
}

bool oversubscribed(const std::vector<std::string>& lists) {
  if (static_cast<long>(lists.size()) > in_union(lists)) return true;
  std::set<int> pinned;  // CPUs some rank is pinned to alone
  std::vector<Range> r;
  for (const auto& l : lists)
    if (parse(l, &r) && r.size() == 1 && r[0].first == r[0].second && !pinned.insert(r[0].first).second) return true;
  return false;
}

int spread_cpu(const std::vector<std::string>& lists, int index) {
  if (lists.empty() || index < 0) return -1;
  for (const auto& l : lists)
    if (l != lists.front()) return -1;
  std::vector<Range> ranges;
  if (!parse(lists.front(), &ranges)) return -1;
  std::vector<int> all;
  for (const auto& [a, b] : ranges)
    for (int c = a; c <= b && static_cast<int>(all.size()) <= static_cast<int>(lists.size()); ++c) all.push_back(c);
  if (static_cast<int>(all.size()) < static_cast<int>(lists.size())) return -1;
  return all[static_cast<std::size_t>(index)];
}

double last_level_cache_bytes() {
  static const double bytes = [] {
    // index0..indexN: L1d, L1i, L2, L3 on x86; the last that exists is
    // the highest level. Its size reads "32768K" (or "M").
    double found = 0.0;
    for (int i = 0; i < 8; ++i) {
      std::ifstream in(fmt::format("/sys/devices/system/cpu/cpu0/cache/index{}/size", i));
      double v = 0.0;
      char unit = 0;
      if (!(in >> v)) break;
      in >> unit;
      found = v * (unit == 'M' ? 1024.0 * 1024 : unit == 'K' ? 1024.0 : 1.0);
    }
    return found;
  }();
  return bytes;
}

}  // namespace braid::cpus
