// Giving up on a call, in the store: a rank whose message-plan call fails
// (another call's message, a timeout) says why under the call's key, first
// writer wins, so that a peer waiting on it learns it within about a second
// instead of waiting out its own timeout (across hosts there is no window
// to mark: the one-sided runner's way), and a peer that finds it gone later
// reads why it left. Value: "<code> <rank named> <rank that gave up> <text>".
#include "src/runtime/gave_up.hpp"

#include <fmt/core.h>

#include <optional>
#include <utility>

#include "src/common/error_record.hpp"
#include "src/common/errors.hpp"
#include "src/runtime/engine.hpp"
#include "src/runtime/executor.hpp"
#include "src/runtime/peers.hpp"  // decimal
#include "src/runtime/positions.hpp"

namespace braid {

namespace {

// How often a waiting call looks in the store for a peer that gave up on it.
constexpr auto kStoreLook = std::chrono::milliseconds(500);
constexpr auto kFirstStoreLook = std::chrono::milliseconds(50);  // then 4x longer each time, up to kStoreLook

std::string gave_up_key(const ExecCall& c) { return fmt::format("gaveup/{}/{}", c.group->id, c.seq); }

// The last call of the group this rank gave up on, for peers that find it
// gone later: "<seq> " and the record.
std::string gave_up_by_key(std::uint32_t group_id, int rank) { return fmt::format("gaveup/{}/by/{}", group_id, rank); }

// A record as publish_gave_up writes it, checked (anyone who reaches the
// store could have written it): nullopt when malformed.
std::optional<ErrorRecord> parse_gave_up(const std::string& s, int world) {
  return parse_error_record(s, world, {ErrorCode::InvalidArgument, ErrorCode::Timeout});
}

std::optional<store::Bytes> try_read(Engine& e, const std::string& key) {
  store::CallCap cap(Deadline::after(kStoreCallLimit));
  try {
    return e.store().try_get(key);
  } catch (const Error&) {  // the store is gone: the engine's watchdog reports that
    return std::nullopt;
  }
}

// A peer's record of the last call of the group it gave up on ("<seq> "
// and the record), checked; nullopt where there is none, or it is not the
// peer's own.
std::optional<std::pair<std::uint64_t, ErrorRecord>> read_gave_up_by(Engine& e, std::uint32_t group_id, int peer) {
  const auto v = try_read(e, gave_up_by_key(group_id, peer));
  if (!v) return std::nullopt;
  const std::string s = store::to_string(*v);
  const auto sp = s.find(' ');
  const auto seq = sp == std::string::npos ? std::nullopt : decimal(std::string_view(s).substr(0, sp), 12);
  if (!seq) return std::nullopt;
  auto g = parse_gave_up(s.substr(sp + 1), e.world_size());
  if (!g || g->by != peer) return std::nullopt;
  return std::make_pair(*seq, std::move(*g));
}

// The error for `what` whose peer left after giving up on `which`: it names
// the rank the peer's own error named (or the peer, where that is us).
Error left_after(Engine& e, const std::string& what, int peer, const char* which, const ErrorRecord& g) {
  return Error(ErrorCode::PeerFailure,
               fmt::format("{}: rank {} left the job after giving up on {}: {}", what, peer, which, g.what),
               g.named == e.rank() ? g.by : g.named);
}

// A peer's record of giving up on this call.
std::optional<Error> read_gave_up(Engine& e, const ExecCall& c) {
  const auto v = try_read(e, gave_up_key(c));
  if (!v) return std::nullopt;
  const auto g = parse_gave_up(store::to_string(*v), e.world_size());
  if (!g) return Error(ErrorCode::Store, fmt::format("{}: the store holds a malformed record under {}", c.what, gave_up_key(c)));
  int about = g->named == e.rank() ? g->by : g->named;
  std::string why = g->what;
  if (g->code == ErrorCode::Timeout) why = with_own_diagnosis(e, c, why, &about, g->named == g->by ? -1 : g->named);
  return Error(g->code, fmt::format("{}: rank {} gave up on this call: {}", c.what, g->by, why), about);
}

}  // namespace

// A peer's timeout relayed: its text without its view of the positions
// (cut short on the way), with this rank's, which names the rank behind.
std::string with_own_diagnosis(Engine& e, const ExecCall& c, std::string why, int* about, int hint) {
  if (const auto at = why.find(" (where each rank is:"); at != std::string::npos) why.resize(at);
  int behind = -1;
  // The peer's culprit is a hint, not a verdict: where this rank's view of
  // the positions leaves it among the ranks behind (none seen waiting, as in
  // a job that lost a link while it started), it stays the one to name;
  // the peer met it (a connect that failed, a wait), the positions did not.
  why += diagnose(e, c, &behind, {}, hint != e.rank() ? hint : -1);
  if (behind >= 0) *about = behind;
  return why;
}

void publish_gave_up(Engine& e, const ExecCall& c, const std::exception_ptr& why) {
  try {
    std::rethrow_exception(why);
  } catch (const Error& x) {
    e.note_gave_up(x.peer());
    if (x.code() != ErrorCode::InvalidArgument && x.code() != ErrorCode::Timeout) return;
    store::CallCap cap(Deadline::after(kStoreCallLimit));
    try {
      const std::string record = error_record_text({x.code(), x.peer() >= 0 ? x.peer() : e.rank(), e.rank(), x.what()});
      e.store().compare_set(gave_up_key(c), {}, store::to_bytes(record));
      e.store().set(gave_up_by_key(c.group->id, e.rank()), store::to_bytes(fmt::format("{} {}", c.seq, record)));
    } catch (const Error&) {  // the store is gone: the failure log tells the rest
    }
  } catch (...) {
  }
}

// For a peer that left the job while this call waited on it: its record of
// giving up on the group's previous call or the one before (a neighbour in a
// pipelined plan runs a call or two ahead of a rank that gave up), whose
// culprit is then this call's too. An older record says nothing about why
// it left now.
std::optional<Error> read_left_after_giving_up(Engine& e, const ExecCall& c, int peer) {
  const auto r = read_gave_up_by(e, c.group->id, peer);
  if (!r || r->first > c.seq || c.seq - r->first > 2) return std::nullopt;
  return left_after(e, c.what, peer, r->first == c.seq ? "this call" : "an earlier call", r->second);
}

std::optional<Error> left_after_giving_up(Engine& e, std::uint32_t group_id, int peer, const std::string& what) {
  const auto r = read_gave_up_by(e, group_id, peer);
  if (!r) return std::nullopt;
  return left_after(e, what, peer, "a collective", r->second);
}

void GaveUpWatch::maybe(Engine& e) {
  const auto t = Clock::now();
  if (next_ == Clock::time_point::max()) {
    step_ = kFirstStoreLook;
    next_ = t + step_;
    return;
  }
  if (t < next_) return;
  step_ = std::min<Clock::duration>(step_ * 4, kStoreLook);
  next_ = t + step_;
  now(e);
}

void GaveUpWatch::now(Engine& e) const {
  if (auto why = read_gave_up(e, call_)) throw *why;
}

}  // namespace braid
