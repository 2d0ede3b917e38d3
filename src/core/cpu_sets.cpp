#include "core/cpu_sets.hpp"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstdlib>

#include <fmt/format.h>

namespace braid::cpus {

std::string mine() {
  std::vector<int> v;
  // A dynamically sized set: hosts with more CPUs than CPU_SETSIZE exist.
  const long online = sysconf(_SC_NPROCESSORS_CONF);
  const int n = static_cast<int>(std::clamp<long>(online, 1, kMaxCpu));
  const int alloc = std::max(n, CPU_SETSIZE);
  cpu_set_t* set = CPU_ALLOC(alloc);
  const std::size_t size = CPU_ALLOC_SIZE(alloc);
  if (set && sched_getaffinity(0, size, set) == 0) {
    for (int c = 0; c < alloc; ++c)
      if (CPU_ISSET_S(c, size, set)) v.push_back(c);
  }
  if (set) CPU_FREE(set);
  if (v.empty())
    for (int c = 0; c < n; ++c) v.push_back(c);
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

bool parse(std::string_view list, std::vector<int>* out) {
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
    for (int c = lo; c <= hi; ++c) out->push_back(c);
    if (s.empty()) break;
    if (s.front() != ',' || s.size() == 1) return false;
    s.remove_prefix(1);
  }
  return !out->empty();
}

int in_union(const std::vector<std::string>& lists) {
  std::vector<int> all, one;
  for (const auto& l : lists)
    if (parse(l, &one)) all.insert(all.end(), one.begin(), one.end());
  std::sort(all.begin(), all.end());
  return static_cast<int>(std::unique(all.begin(), all.end()) - all.begin());
}

}  // namespace braid::cpus
