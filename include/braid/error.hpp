// braid::Error: the one exception type Braid throws.
//
// Every message says what was wrong and what was expected; errors caused by
// another rank (death, timeout, a bad frame) name that rank in peer().
#pragma once

#include <stdexcept>
#include <string>

namespace braid {

enum class ErrorCode {
  InvalidArgument,  // the caller passed something wrong (rank, size, dtype, name)
  InvalidState,     // the call is not valid now (op before init, init twice)
  Timeout,          // a deadline passed; peer() names whom we waited for
  PeerFailure,      // a peer died or closed its connection; peer() names it
  Transport,        // an I/O error or a malformed frame from a peer
  Store,            // the bootstrap store failed or is unreachable
  NotSupported,     // built without the needed feature (CUDA, verbs)
  Internal,
};

const char* error_code_name(ErrorCode code);

class Error : public std::runtime_error {
 public:
  Error(ErrorCode code, const std::string& what, int peer = -1)
      : std::runtime_error(what), code_(code), peer_(peer) {}
  ErrorCode code() const noexcept { return code_; }
  // Global rank of the peer the error concerns, or -1.
  int peer() const noexcept { return peer_; }

 private:
  ErrorCode code_;
  int peer_;
};

}  // namespace braid
