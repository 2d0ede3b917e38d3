// Deadlines: every wait in Braid has one.
#pragma once

#include <time.h>

#include <chrono>

namespace braid {

using Clock = std::chrono::steady_clock;
using Millis = std::chrono::milliseconds;

struct Deadline {
  Clock::time_point at;
  static Deadline after(Millis d) { return {Clock::now() + d}; }
  // The same from the kernel's coarse clock: ~3 ns to read instead of ~22
  // on this machine kind, and at most one tick (a few ms) behind
  // steady_clock, so the deadline may come that much early. For timeouts of
  // a second or more, set on every call of the small-message path.
  static Deadline after_coarse(Millis d) {
    timespec ts{};
    if (d < std::chrono::seconds(1) || ::clock_gettime(CLOCK_MONOTONIC_COARSE, &ts) != 0) return after(d);
    return {Clock::time_point(std::chrono::duration_cast<Clock::duration>(std::chrono::seconds(ts.tv_sec) +
                                                                          std::chrono::nanoseconds(ts.tv_nsec))) +
            d};
  }
  bool expired() const { return Clock::now() >= at; }
  // Milliseconds left, clamped to [0, cap]; suitable for poll/epoll timeouts.
  int poll_ms(int cap = 1 << 30) const {
    auto left = std::chrono::duration_cast<Millis>(at - Clock::now()).count();
    if (left < 0) return 0;
    return left > cap ? cap : static_cast<int>(left);
  }
};

}  // namespace braid
