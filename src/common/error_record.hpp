// An error as one rank records it in the store for others to read: a rank
// that gave up on a call (runtime/executor.cpp), the first member of a
// shared-memory window that failed while gathering the others' records
// (transports/shm/window.cpp). The reader fails as the writer did, naming
// the rank the writer's error named.
#pragma once

#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>

#include "braid/error.hpp"

namespace braid {

struct ErrorRecord {
  ErrorCode code;
  int named;         // the rank its error names
  int by;            // the rank that recorded it
  std::string what;  // its message
};

// "<code> <named> <by> <what>"
std::string error_record_text(const ErrorRecord& r);
// Parsed strictly (anyone who reaches the store could have written it): a
// code among `codes`, ranks in [0, world), the message cut at 400 bytes;
// nullopt otherwise.
std::optional<ErrorRecord> parse_error_record(std::string_view s, int world, std::initializer_list<ErrorCode> codes);

}  // namespace braid
