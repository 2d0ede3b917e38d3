// Progress: one line on stderr, rewritten in place, for long runs (a
// braid-bench sweep, a braid-sim table) -- only when stderr is a terminal, so
// logs, pipes and CI output stay free of it.
#pragma once

#include <unistd.h>

#include <cstdio>
#include <string>

namespace braid {

class Progress {
 public:
  // `enabled`: the caller's own condition too (rank 0 only, say).
  explicit Progress(bool enabled = true) : on_(enabled && ::isatty(STDERR_FILENO) == 1) {}
  ~Progress() { done(); }
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  // Replaces the line with `text`.
  void show(const std::string& text) {
    if (!on_) return;
    std::fprintf(stderr, "\r\033[K%s", text.c_str());
    std::fflush(stderr);
    shown_ = true;
  }
  // Clears the line (also on destruction).
  void done() {
    if (!shown_) return;
    std::fprintf(stderr, "\r\033[K");
    std::fflush(stderr);
    shown_ = false;
  }

 private:
  bool on_;
  bool shown_ = false;
};

}  // namespace braid
