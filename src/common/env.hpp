// Integer settings from the environment (BRAID_*), checked the same way
// everywhere: unset or empty means "not given"; anything else must be a
// whole decimal number in [lo, hi], or braid::Error names the variable, its
// value and what was expected.
#pragma once

#include <cerrno>
#include <cstdlib>
#include <optional>

#include "src/common/errors.hpp"

namespace braid {

inline std::optional<long long> env_integer(const char* name, long long lo, long long hi,
                                            const char* expected) {
  const char* v = std::getenv(name);
  if (!v || !*v) return std::nullopt;
  char* end = nullptr;
  errno = 0;
  const long long n = std::strtoll(v, &end, 10);
  if (end == v || *end != '\0' || errno == ERANGE || n < lo || n > hi)
    fail(ErrorCode::InvalidArgument, "{}='{}' is not valid: expected {}", name, v, expected);
  return n;
}

}  // namespace braid
