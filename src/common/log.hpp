// Logging, off by default. BRAID_DEBUG=WARN|INFO|TRACE turns it on; lines go
// to stderr prefixed with "braid[rank]".
#pragma once

#include <fmt/core.h>

#include <string_view>

namespace braid::log {

enum class Level { Off = 0, Warn = 1, Info = 2, Trace = 3 };

Level level();                 // read once from BRAID_DEBUG
void set_rank(int rank);       // for the prefix; -1 before init
void write(Level lvl, std::string_view msg);

template <class... Args>
void emit(Level lvl, fmt::format_string<Args...> f, Args&&... args) {
  if (static_cast<int>(level()) >= static_cast<int>(lvl))
    write(lvl, fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace braid::log

#define BRAID_WARN(...) ::braid::log::emit(::braid::log::Level::Warn, __VA_ARGS__)
#define BRAID_INFO(...) ::braid::log::emit(::braid::log::Level::Info, __VA_ARGS__)
#define BRAID_TRACE(...) ::braid::log::emit(::braid::log::Level::Trace, __VA_ARGS__)
