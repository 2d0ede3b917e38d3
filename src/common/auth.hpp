// The job's secret and the challenge-response that proves it.
//
// A job may carry a secret (BRAID_JOB_TOKEN, or the file BRAID_JOB_TOKEN_FILE
// names; braidrun makes one per job). Where it does, every connection a
// stranger could open -- to the store, to a rank's TCP listener -- is
// authenticated both ways before anything else crosses it:
//
//   opener -> acceptor   nonce_o
//   acceptor -> opener   nonce_a, HMAC(K, label_a | nonce_o | nonce_a)
//   opener -> acceptor   HMAC(K, label_o | nonce_o | nonce_a)
//
// Each side proves the secret over a nonce the other chose (no replay), the
// two labels differ (no reflection of one side's proof as the other's), and
// the secret never crosses the wire. HMAC-SHA256 and the nonces come from
// OpenSSL's libcrypto; a build without it refuses a job that has a secret
// rather than run it unauthenticated.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

namespace braid::auth {

inline constexpr std::size_t kNonceBytes = 32;
inline constexpr std::size_t kMacBytes = 32;
using Nonce = std::array<std::uint8_t, kNonceBytes>;
using Mac = std::array<std::uint8_t, kMacBytes>;
using View = std::span<const std::uint8_t>;

// What every refusal says, so that a user knows where to look.
inline constexpr std::string_view kHint =
    "every process of a job needs the same BRAID_JOB_TOKEN (or BRAID_JOB_TOKEN_FILE)";

class Secret {
 public:
  explicit Secret(std::string key) : key_(std::move(key)) {}
  // HMAC-SHA256 of label, a zero byte, a and b.
  Mac mac(std::string_view label, View a, View b) const;
  // Whether `m` is mac(label, a, b), compared in constant time.
  bool check(const Mac& m, std::string_view label, View a, View b) const;

 private:
  std::string key_;
};

// The job's secret from the environment (read at each call), or null where
// there is none: BRAID_JOB_TOKEN unset or empty and no BRAID_JOB_TOKEN_FILE.
// Throws braid::Error(InvalidArgument) for an unreadable or empty token file,
// and (NotSupported) where there is a secret but no libcrypto in this build.
std::shared_ptr<const Secret> secret_from_env();

// A fresh random nonce (libcrypto's RAND_bytes).
Nonce fresh_nonce();

// A new secret for a job, as 64 hex digits (braidrun's BRAID_JOB_TOKEN).
std::string new_token();

// Whether this build can authenticate (it was built with libcrypto).
bool available();

inline View view(const Nonce& n) { return {n.data(), n.size()}; }

}  // namespace braid::auth
