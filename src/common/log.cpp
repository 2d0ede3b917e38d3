#include "src/common/log.hpp"

#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <ctime>
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
  // The time of day to the millisecond: ranks of one machine (or of hosts
  // whose clocks agree) can then be read side by side, as a failure's story
  // needs.
  timespec ts{};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  tm t{};
  ::gmtime_r(&ts.tv_sec, &t);
  // One write() per line so lines of concurrent threads do not interleave.
  std::string line = fmt::format("{:02}:{:02}:{:02}.{:03} braid[{}] {} {}\n", t.tm_hour, t.tm_min, t.tm_sec,
                                 ts.tv_nsec / 1000000, g_rank.load(std::memory_order_relaxed),
                                 names[static_cast<int>(lvl)], msg);
  [[maybe_unused]] auto n = ::write(STDERR_FILENO, line.data(), line.size());
}

}  // namespace braid::log
