// The hand-off chooser (handoff.hpp): a two-armed bandit on time per byte.
#include "src/runtime/handoff.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "src/common/errors.hpp"
#include "src/common/log.hpp"

namespace braid {

namespace {
// For the log: where a mode's chunks go.
const char* through(Handoff h) { return h == Handoff::Stream ? "memory" : "the cache"; }
}  // namespace

std::optional<Handoff> parse_handoff(const char* value) {
  if (!value || !*value || std::strcmp(value, "auto") == 0) return std::nullopt;
  if (std::strcmp(value, "cache") == 0) return Handoff::Cache;
  if (std::strcmp(value, "stream") == 0) return Handoff::Stream;
  fail(ErrorCode::InvalidArgument, "BRAID_HANDOFF='{}' is not valid: expected auto, cache or stream", value);
}

std::optional<Handoff> handoff_setting() {
  static const std::optional<Handoff> setting = parse_handoff(std::getenv("BRAID_HANDOFF"));
  return setting;
}

HandoffChooser::Pick HandoffChooser::pick() {
  const bool due = ++calls_ % kTrialEvery == kFirstTrial % kTrialEvery || trial_next_;
  trial_next_ = false;
  const bool trial = due && recent_count_ > 0;
  const Handoff other = mode_ == Handoff::Cache ? Handoff::Stream : Handoff::Cache;
  return {trial ? other : mode_, trial};
}

void HandoffChooser::record(Pick p, double seconds, std::size_t bytes) {
  if (bytes == 0 || !(seconds > 0)) return;
  const double per_byte = seconds / static_cast<double>(bytes);
  if (p.trial) {
    const double before = recent_median();
    // A trial that lost leaves the current mode's record alone.
    if (!(per_byte < kSwitchBelow * before)) return;
    BRAID_INFO("staged hand-offs through {} from now: a trial took {:.3f} ns a byte, against {:.3f} through {}",
               through(p.mode), per_byte * 1e9, before * 1e9, through(mode_));
    mode_ = p.mode;
    recent_count_ = 0;  // the old mode's times say nothing of the new one
  }
  const double old = recent_count_ >= kRecent ? recent_median() : 0.0;
  recent_[recent_count_ % kRecent] = per_byte;
  ++recent_count_;
  // The median moved, not one call: the phase changed under this mode.
  if (!p.trial && old > 0 && recent_median() > kSlowerAbove * old) trial_next_ = true;
}

double HandoffChooser::recent_median() const {
  const std::size_t n = std::min(recent_count_, kRecent);
  std::array<double, kRecent> v = recent_;
  std::sort(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(n));
  return v[n / 2];
}

}  // namespace braid
