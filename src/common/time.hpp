// Deadlines: every wait in Braid has one.
#pragma once

#include <chrono>

namespace braid {

using Clock = std::chrono::steady_clock;
using Millis = std::chrono::milliseconds;

struct Deadline {
  Clock::time_point at;
  static Deadline after(Millis d) { return {Clock::now() + d}; }
  bool expired() const { return Clock::now() >= at; }
  // Milliseconds left, clamped to [0, cap]; suitable for poll/epoll timeouts.
  int poll_ms(int cap = 1 << 30) const {
    auto left = std::chrono::duration_cast<Millis>(at - Clock::now()).count();
    if (left < 0) return 0;
    return left > cap ? cap : static_cast<int>(left);
  }
};

}  // namespace braid
