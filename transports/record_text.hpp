// Numbers in a peer's record: what another process wrote, into the store or
// into shared memory, parsed strictly (sscanf's %d is undefined on
// overflow and takes "12abc" for 12). tests/fuzz feeds it arbitrary text.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

namespace braid {

// Exactly out.size() decimal ints separated by single spaces, each with an
// optional '-', within int's range, and nothing else; false otherwise.
inline bool parse_ints(std::string_view text, std::span<int> out) {
  std::size_t at = 0;
  for (std::size_t k = 0; k < out.size(); ++k) {
    if (k > 0) {
      if (at >= text.size() || text[at] != ' ') return false;
      ++at;
    }
    const bool negative = at < text.size() && text[at] == '-';
    if (negative) ++at;
    const std::size_t first = at;
    std::int64_t v = 0;
    while (at < text.size() && text[at] >= '0' && text[at] <= '9') {
      v = v * 10 + (text[at] - '0');
      if (v > std::int64_t{1} << 31) return false;
      ++at;
    }
    if (at == first) return false;
    if (negative) v = -v;
    if (v > 0x7fffffff || v < -(std::int64_t{1} << 31)) return false;
    out[k] = static_cast<int>(v);
  }
  return at == text.size();
}

}  // namespace braid
