// What each rank publishes about itself when its engine starts, and what a
// rank needs to know of a peer before it connects: which host the peer runs
// on, its process, and each transport's address.
//
// Host identity belongs here, to the runtime, not to a transport: it decides
// which transports may reach a peer, which ranks form a host in a group's
// topology, and whether a silent peer's process can be checked directly.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "src/common/time.hpp"
#include "src/store/store.hpp"

namespace braid {

// Identifies "the same host": boot id, user, and the pid and network
// namespaces (not the host name: containers share it). Ranks in separate
// network namespaces count as separate hosts.
std::string host_identity();

// Is process `pid` (on this host) gone? pidfd_open, so no pid-reuse race
// once it is open.
bool process_gone(int pid);
// Is process `pid` (on this host) stopped (SIGSTOP, or a debugger's)? Its
// state in /proc/<pid>/stat: a stopped rank publishes nothing, so a
// diagnosis cannot otherwise tell it from a rank that has not waited long.
bool process_stopped(int pid);

struct PeerRecord {
  std::string host;  // host_identity() of its process
  int pid = 0;
  std::vector<std::pair<std::string, std::string>> addresses;  // transport name -> address ("" none)
  // The address published for transport `name`; empty if none.
  std::string address(const std::string& name) const;
};

// "host/<rank>" in the store.
void publish_peer_record(store::Store& s, int rank, const PeerRecord& r);
PeerRecord read_peer_record(store::Store& s, int rank, Millis timeout);

// The records every rank reads back from the store, parsed strictly: anyone
// who can write to the store could have written them (tests/fuzz feeds them
// arbitrary bytes). Each throws braid::Error(Store) saying what it expected.
//   host/<rank>  "identity|pid" then "name=address" lines; pid 1..2^31-1.
PeerRecord parse_peer_record(const std::string& v, int rank);
//   job          "<job id> <world size>", both decimal, the size 1..2^24.
struct JobRecord {
  std::uint64_t id = 0;
  int world_size = 0;
};
JobRecord parse_job_record(const std::string& v);
// A decimal number of 1 to `max_digits` digits, all of `t`: no sign, space
// or anything else (split ids, and the records below). Up to 19 digits it
// cannot wrap; a caller that allows 20 compares the text (job record).
std::optional<std::uint64_t> decimal(std::string_view t, std::size_t max_digits);
//   abort        "<rank>\n", -1 (no single rank) or a rank of the job; no
//                value (a stranger's record) for anything else.
std::optional<int> abort_rank(const std::string& v, int world_size);

}  // namespace braid
