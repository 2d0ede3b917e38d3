#include "src/common/log.hpp"

#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>

namespace braid::log {

namespace {
std::atomic<int> g_rank{-1};

Level parse_level() {
  const char* v = std::getenv("BRAID_DEBUG");
  if (!v || !*v) return Level::Off;
  std::string s(v);
  for (auto& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (s == "WARN") return Level::Warn;
  if (s == "INFO") return Level::Info;
  if (s == "TRACE") return Level::Trace;
  return Level::Off;
}
}  // namespace

Level level() {
  static const Level lvl = parse_level();
  return lvl;
}

void set_rank(int rank) { g_rank.store(rank, std::memory_order_relaxed); }

void write(Level lvl, std::string_view msg) {
  static const char* names[] = {"", "WARN", "INFO", "TRACE"};
  // One write() per line so lines of concurrent threads do not interleave.
  std::string line = fmt::format("braid[{}] {} {}\n", g_rank.load(std::memory_order_relaxed),
                                 names[static_cast<int>(lvl)], msg);
  [[maybe_unused]] auto n = ::write(STDERR_FILENO, line.data(), line.size());
}

}  // namespace braid::log
