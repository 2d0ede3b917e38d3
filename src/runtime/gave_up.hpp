// Giving up on a call, in the store (gave_up.cpp): what a rank whose call
// failed leaves there, and how peers waiting on it, or finding it gone, read
// it.
#pragma once

#include <chrono>
#include <cstdint>
#include <exception>
#include <optional>
#include <string>

#include "braid/error.hpp"
#include "src/common/time.hpp"

namespace braid {

class Engine;
struct ExecCall;

// A call that failed: notes whom its error named (the engine's leaving
// word), and for InvalidArgument and Timeout writes the record, once per
// call (first writer wins) and as this rank's last word on the group.
void publish_gave_up(Engine& e, const ExecCall& c, const std::exception_ptr& why);

// A peer's timeout relayed: its text without its view of the positions (cut
// short on the way), with this rank's, which names the rank behind; *about
// becomes that rank where the diagnosis finds one. `hint`: the third rank
// the peer's error named (-1: none), preferred among the ranks behind.
std::string with_own_diagnosis(Engine& e, const ExecCall& c, std::string why, int* about, int hint);

// For a peer that left the job while this call waited on it: its record of
// giving up on the group's previous call or the one before (a neighbour in a
// pipelined plan runs a call or two ahead of a rank that gave up), whose
// culprit is then this call's too. An older record says nothing about why
// it left now.
std::optional<Error> read_left_after_giving_up(Engine& e, const ExecCall& c, int peer);

// For a point-to-point op (`what`) whose peer left the job: that peer's
// record of giving up on a collective of group `group_id` (any call: point-
// to-point is not ordered with them), whose culprit is then this op's too;
// nullopt where it left without giving up.
std::optional<Error> left_after_giving_up(Engine& e, std::uint32_t group_id, int peer, const std::string& what);

// A peer's record in the store of giving up on this call (the executor
// writes one when a call fails with InvalidArgument or Timeout), looked at
// while a call waits: the one sign that survives the peer, whichever way
// each rank runs the call (a peer's "doing" line in the window is gone once
// it has thrown). First look 50 ms after the first maybe(), then 4x later
// each time, up to every 500 ms; no clock is read until the call waits.
class GaveUpWatch {
 public:
  explicit GaveUpWatch(const ExecCall& c) : call_(c) {}
  // Throws the peer's error if it is time to look and there is a record.
  void maybe(Engine& e);
  // Looks now (a peer's disconnection: its reason, if it left one, is better).
  void now(Engine& e) const;
  // When the next look is due (max() before the first maybe()).
  Clock::time_point next() const { return next_; }

 private:
  const ExecCall& call_;
  Clock::duration step_{};
  Clock::time_point next_ = Clock::time_point::max();
};

}  // namespace braid
