#include "src/common/error_record.hpp"

#include <algorithm>
#include <charconv>

#include <fmt/core.h>

namespace braid {

std::string error_record_text(const ErrorRecord& r) {
  return fmt::format("{} {} {} {}", static_cast<int>(r.code), r.named, r.by, r.what);
}

std::optional<ErrorRecord> parse_error_record(std::string_view s, int world, std::initializer_list<ErrorCode> codes) {
  int f[3] = {};
  for (int& x : f) {
    const auto sp = s.find(' ');
    if (sp == std::string_view::npos || sp == 0 || sp > 9) return std::nullopt;
    const auto digits = s.substr(0, sp);
    if (!std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) return std::nullopt;
    std::from_chars(digits.data(), digits.data() + digits.size(), x);
    s.remove_prefix(sp + 1);
  }
  const auto code = static_cast<ErrorCode>(f[0]);
  if (f[1] >= world || f[2] >= world || std::find(codes.begin(), codes.end(), code) == codes.end()) return std::nullopt;
  return ErrorRecord{code, f[1], f[2], std::string(s.data(), std::min<std::size_t>(s.size(), 400))};
}

}  // namespace braid
