// Hang diagnosis: where each rank is on a group. A call that has waited
// kPublishAfter publishes this rank's position in the store ("in call #N,
// what, bytes"); a call that times out reads every member's and says who is
// where: "rank 2 was last seen in all_reduce #418 (4 MiB); ranks 0, 1, 3
// wait in broadcast #419". A stopped or hung rank publishes nothing new, so its last
// position is older than the others': it is the one behind, and named.
// Nothing is written on the fast path: only calls that wait that long pay
// one store write. `braid-info --job` prints the same positions for a live
// job.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "src/common/time.hpp"
#include "src/store/store.hpp"

namespace braid {

class Engine;
struct ExecCall;

// A call's number on its group, from 1: every call takes one of the group's
// two counters (message plans a sequence number, one-sided plans a ticket)
// and reads the other, so their sum orders the calls alike on every rank.
std::uint64_t call_number(const ExecCall& c);

// Publishes the call's position once it has waited kPublishAfter (counted
// from its first slow wait, after the spinning).
// The most one store call made in the middle of a collective may take
// (store::CallCap): its position, a gave-up record, the diagnosis at its
// timeout (all of that together). A stopped rank 0 freezes the store it
// hosts; the op's error must still come within seconds of its timeout.
constexpr Millis kStoreCallLimit{1000};

class PositionPublisher {
 public:
  static constexpr auto kPublishAfter = std::chrono::milliseconds(50);
  // No clock is read until the call first waits (maybe()): a call that
  // never does pays nothing.
  explicit PositionPublisher(const ExecCall& c) : call_(c) {}
  // `awaits()`: the global ranks the call waits on now, published with the
  // position so that a rank that times out can follow who waits on whom.
  template <class Awaits>
  void maybe(Engine& e, Awaits&& awaits) {
    if (done_) return;
    const auto now = Clock::now();
    if (start_ == Clock::time_point{}) start_ = now;
    else if (now - start_ >= kPublishAfter) publish(e, awaits());
  }
  void publish(Engine& e, const std::vector<int>& awaits);
  // Before a dial to `peer` (global) on another host, which blocks for as
  // long as the link is down: the position now, awaiting it, however short
  // the wait so far. A host-mate that times out waiting on this rank then
  // follows the wait across the link (follow_waits) instead of naming this
  // rank, which was never seen waiting. Once per peer and process: only a
  // first send dials.
  void dialing(Engine& e, int peer);

 private:
  const ExecCall& call_;
  Clock::time_point start_{};
  bool done_ = false;
};

namespace detail { struct GroupImpl; }

// Publishes this rank's position (group_rank) on a group: in call #call (a
// point-to-point op: the group's next call, the one it has not reached),
// waiting on `awaits`. One store write, bounded by kStoreCallLimit; a gone
// store is ignored (the failure log says the rest).
void publish_position(Engine& e, std::uint32_t group_id, int group_rank, std::uint64_t call, const std::string& what,
                      std::uint64_t bytes, const std::vector<int>& awaits);
// The group's next call number (what a point-to-point op publishes).
std::uint64_t next_call_number(const detail::GroupImpl& g);

// A member's published position ("pos/<group id>/<group rank>").
struct Position {
  int rank = -1;             // global
  std::uint64_t call = 0;    // 0: never seen waiting in a call of this group
  std::string what;          // the op, as its error messages name it
  std::uint64_t bytes = 0;
  std::vector<int> awaits;   // global ranks it waited on when it published
};
std::string position_key(std::uint32_t group_id, int group_rank);
// "<call> <bytes> <what>[ <rank>,<rank>...]": the last field, the ranks it
// waits on, where it knows them.
std::string position_value(std::uint64_t call, const std::string& what, std::uint64_t bytes,
                           const std::vector<int>& awaits = {});
// Parsed strictly (anyone who reaches the store could have written it);
// nullopt when malformed.
std::optional<Position> parse_position(const std::string& v, int rank);
// Every member's position, by reading the store.
std::vector<Position> read_positions(store::Store& st, std::uint32_t group_id, const std::vector<int>& ranks);
// "rank 2 was last seen in all_reduce #418 (4 MiB); ranks 0, 1, 3 wait in
// broadcast #419"; *behind gets the first of `prefer` that is behind
// (last seen in an earlier call than the latest, or never; diagnose: a
// stopped process on this host, then the ranks the call waited on), else
// the rank seen least (-1 when all are in the same call). Positions alone
// cannot order the ranks behind: a rank publishes only when it waits, so one
// never seen, or seen long ago, may have passed every call since without
// waiting, or be stuck.
std::string describe_positions(const std::vector<Position>& ps, int* behind, const std::vector<int>& prefer = {});
// The rank this one waited on may itself wait on the cause (and where
// every rank is in the same call, none is behind): the one to name is at
// the end of who waits on whom. From `start` (a rank this one waited on),
// follows each rank's published awaits; a rank that waits on nobody known,
// is in `stopped`, or is behind call `top` and waits on a rank seen in a
// later call than its own (so its wait is stale), ends the chain and is
// returned. A chain that comes back on itself (two ranks that wait on each
// other across a cut link, or a stopped rank's stale awaits) names the rank
// of the loop on another host than `my_host` where there is one, else -1.
// host_of maps a global rank to its host (empty: unknown).
int follow_waits(const std::vector<Position>& ps, std::uint64_t top, int start, int me,
                 const std::vector<int>& host_of_global, int my_host, const std::vector<int>& stopped = {});

// For a call that timed out: publishes its own position, reads the others'
// and returns " (positions: ...)", naming in *behind the rank furthest
// behind, or -1. Never throws (the store may be gone). `hint`: a rank
// another rank's error named (a relayed timeout), preferred among the ranks
// behind after those waited on; unlike them it is not published as awaited.
std::string diagnose(Engine& e, const ExecCall& c, int* behind, const std::vector<int>& waited_for = {}, int hint = -1);
// The same for any op of group g: call #call (a point-to-point op: the
// group's next call), `what` on `bytes`; *chain_end, where given, gets the
// end of who waits on whom when it is not the rank waited on, else -1.
std::string diagnose(Engine& e, const detail::GroupImpl& g, std::uint64_t call, const std::string& what,
                     std::uint64_t bytes, int* behind, const std::vector<int>& waited_for, int* chain_end = nullptr,
                     int hint = -1);

}  // namespace braid
