// Store: the bootstrap key-value store ranks use to find each other.
//
// Semantics follow torch.distributed's c10d::Store. Values are byte strings;
// add() treats a value as a decimal integer. Every call is bounded by a
// timeout and throws braid::Error (ErrorCode::Timeout naming the key, or
// ErrorCode::Store when the store is unreachable). Implementations are safe to
// call from several threads at once.
//
// Public because a Communicator bootstraps from any store its members share:
// Braid's own (tcp_store, file_store below), or an adapter over another
// framework's (braid_torch wraps torch's c10d::Store this way, as Gloo's
// rendezvous does).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace braid::store {

using Bytes = std::vector<std::uint8_t>;
using Millis = std::chrono::milliseconds;

inline Bytes to_bytes(const std::string& s) { return Bytes(s.begin(), s.end()); }
inline std::string to_string(const Bytes& b) { return std::string(b.begin(), b.end()); }

class Store {
 public:
  virtual ~Store() = default;

  virtual void set(const std::string& key, const Bytes& value) = 0;
  // Waits until the key exists (up to `timeout`), then returns its value.
  virtual Bytes get(const std::string& key, Millis timeout) = 0;
  Bytes get(const std::string& key) { return get(key, timeout_); }
  // Returns the value, or nothing if the key does not exist; never waits.
  virtual std::optional<Bytes> try_get(const std::string& key) = 0;
  // Adds delta to the integer stored at key (missing = 0); returns the new value.
  virtual std::int64_t add(const std::string& key, std::int64_t delta) = 0;
  // If the current value equals `expected` (a missing key matches an empty
  // `expected`), stores `desired`. Returns the value after the call.
  virtual Bytes compare_set(const std::string& key, const Bytes& expected,
                            const Bytes& desired) = 0;
  // Returns true if the key existed.
  virtual bool delete_key(const std::string& key) = 0;
  // Waits until every key exists, up to `timeout`.
  virtual void wait(const std::vector<std::string>& keys, Millis timeout) = 0;
  void wait(const std::vector<std::string>& keys) { wait(keys, timeout_); }
  // True if every key exists; never waits.
  virtual bool check(const std::vector<std::string>& keys) = 0;
  virtual std::int64_t num_keys() = 0;

  // Bound of each call that has no explicit timeout (connect, I/O, set, add...).
  Millis timeout() const { return timeout_; }
  void set_timeout(Millis t) { timeout_ = t; }

 protected:
  Millis timeout_{std::chrono::seconds(300)};
};

// Braid's own stores, as the init methods use them.
// A client of the TCP store at host:port; with `serve`, this process also
// hosts the store there (the returned store keeps the server alive, and when
// it is released waits, at most min(timeout, 30 s), until no other client
// is connected, so the members still using it are not cut off). With
// BRAID_JOB_TOKEN set, both ends authenticate (README, "Authenticated jobs").
std::shared_ptr<Store> tcp_store(const std::string& host, int port, bool serve, Millis timeout);
// A store kept in one file on a (possibly shared) file system.
std::shared_ptr<Store> file_store(const std::string& path, Millis timeout);

}  // namespace braid::store
