// How a one-sided plan hands its staged chunks from one CPU to another:
// through the shared cache (ordinary stores into Scratch) or through memory
// (streaming stores), chosen per group from the calls' own times.
//
// Why a choice, and why at run time: plans such as `staged` copy each chunk
// into the rank's Scratch for a peer on another CPU to read. Left in cache,
// the chunk crosses between the two cores' caches, which is the fastest way
// when they share one; but the host that runs this machine's two vCPUs
// sometimes places them where they do not, and then a line one CPU wrote
// costs the other about four times as long to read (bench/RESULTS.md
// section 33: the bare relay of 64 MiB 6.58 ms in cache against 8.09 through
// memory in the usual phase, 19.5 against 6.24 in the other; 4-rank staged
// all_reduce of 16 MiB 6.1 ms against 8.0, and 17.1 against 6.9-10.3). The
// phase lasts seconds, comes and goes within a job, and the guest cannot see
// where its vCPUs run, so no setting made at init is right for a whole job.
//
// The chooser is a two-armed bandit on the calls' times per byte: it runs
// the mode that is faster now, and every kTrialEvery-th eligible call
// (kFirstTrial-th first) it runs the other one as a trial, switching when
// the trial beats the current mode's recent calls by kSwitchBelow. Every
// rank counts the same eligible calls (collectives run in one order), so
// these trials fall on the same call everywhere; each rank then decides
// from its own times, which in a lockstep plan are nearly the group's.
// Where the median of the current mode's last kRecent calls grows
// kSlowerAbove times at once (two slow calls in a row: the phase changed
// under it, not one call stalled), the next call is a trial at once, on
// every rank that saw it so (in a lockstep plan, all). The mode changes how bytes travel,
// never which bytes: ranks that decide differently still compute the same
// result, only not as fast.
//
// BRAID_HANDOFF=cache|stream fixes the mode (benchmarks, and a host whose
// CPUs are known); `auto` (the default) chooses.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>

namespace braid {

enum class Handoff : std::uint8_t { Cache = 0, Stream = 1 };

// A value of BRAID_HANDOFF: the mode it fixes, or nullopt for "auto" (and
// for null or empty). Anything else is a braid::Error naming the variable,
// the value and what it accepts.
std::optional<Handoff> parse_handoff(const char* value);
// BRAID_HANDOFF as parsed once per process (init reads it first, so a bad
// value fails there rather than in a collective).
std::optional<Handoff> handoff_setting();

class HandoffChooser {
 public:
  // Calls that stage fewer bytes per rank than this are not timed: their
  // time is signalling, not hand-offs (one_sided.cpp).
  static constexpr std::size_t kMinBytes = 1u << 20;
  static constexpr std::uint64_t kTrialEvery = 16;
  static constexpr std::uint64_t kFirstTrial = 4;  // after three calls of the first mode
  static constexpr double kSwitchBelow = 0.9;
  static constexpr double kSlowerAbove = 1.5;

  struct Pick {
    Handoff mode = Handoff::Cache;
    bool trial = false;
  };
  // The mode for the next eligible call.
  Pick pick();
  // That call took `seconds` for `bytes`.
  void record(Pick p, double seconds, std::size_t bytes);
  Handoff mode() const { return mode_; }

 private:
  // The current mode's last few times per byte; a trial is compared with
  // their median, so that one slow or fast call neither causes a switch nor
  // prevents one.
  static constexpr std::size_t kRecent = 3;
  Handoff mode_ = Handoff::Cache;
  std::array<double, kRecent> recent_{};
  std::size_t recent_count_ = 0;
  std::uint64_t calls_ = 0;
  bool trial_next_ = false;
  double recent_median() const;
};

}  // namespace braid
