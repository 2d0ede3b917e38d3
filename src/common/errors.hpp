// Helpers to build braid::Error with formatted messages.
#pragma once

#include <fmt/core.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "braid/error.hpp"

namespace braid {

template <class... Args>
[[noreturn]] void fail(ErrorCode code, fmt::format_string<Args...> f, Args&&... args) {
  throw Error(code, fmt::format(f, std::forward<Args>(args)...));
}

template <class... Args>
[[noreturn]] void fail_peer(ErrorCode code, int peer, fmt::format_string<Args...> f,
                            Args&&... args) {
  throw Error(code, fmt::format(f, std::forward<Args>(args)...), peer);
}

// "what: strerror(errno)"
inline std::string errno_text(int err = errno) { return std::strerror(err); }

}  // namespace braid
