// Braid's stores: the concrete ones behind the public braid/store.hpp.
#pragma once

#include "braid/store.hpp"
#include "src/common/time.hpp"

namespace braid::store {

// While one lives, every TcpStore call its thread makes ends by `d` (or its
// own timeout, if sooner), waiting for the connection's lock included; nested
// caps keep the earliest. For the runtime's store traffic in the middle of a
// collective (positions, gave-up records): a store whose host is stopped
// answers nothing, and without a cap each such call would wait out the
// store's whole timeout, holding the op's error that long past its own.
class CallCap {
 public:
  explicit CallCap(Deadline d);
  ~CallCap();
  CallCap(const CallCap&) = delete;
  CallCap& operator=(const CallCap&) = delete;
  // This thread's innermost cap, or nullptr.
  static const Deadline* current();

 private:
  const Deadline* prev_;
  Deadline d_;
};

// Namespaces another store: every key is stored as "<prefix>/<key>".
// Groups and jobs sharing one store use it to stay apart.
class PrefixStore final : public Store {
 public:
  PrefixStore(std::string prefix, std::shared_ptr<Store> base);
  void set(const std::string& key, const Bytes& value) override;
  Bytes get(const std::string& key, Millis timeout) override;
  using Store::get;
  std::optional<Bytes> try_get(const std::string& key) override;
  std::int64_t add(const std::string& key, std::int64_t delta) override;
  Bytes compare_set(const std::string& key, const Bytes& expected, const Bytes& desired) override;
  bool delete_key(const std::string& key) override;
  void wait(const std::vector<std::string>& keys, Millis timeout) override;
  using Store::wait;
  bool check(const std::vector<std::string>& keys) override;
  std::int64_t num_keys() override;  // of the base store (as torch does)
  const std::shared_ptr<Store>& base() const { return base_; }

 private:
  std::string key(const std::string& k) const { return prefix_ + "/" + k; }
  std::vector<std::string> keys(const std::vector<std::string>& ks) const;
  std::string prefix_;
  std::shared_ptr<Store> base_;
};

// The server side of TcpStore: one thread serving any number of clients.
// Malformed requests close that client's connection; the server survives.
class TcpStoreServer {
 public:
  // Binds host:port (port 0 = any free port) or throws braid::Error.
  TcpStoreServer(const std::string& host, int port);
  // Returns nullptr if the port is already taken (another process hosts it).
  static std::unique_ptr<TcpStoreServer> try_create(const std::string& host, int port);
  ~TcpStoreServer();  // stops the thread, closes every connection
  TcpStoreServer(const TcpStoreServer&) = delete;
  TcpStoreServer& operator=(const TcpStoreServer&) = delete;
  int port() const;
  // Waits, at most `limit`, until no client is connected: a member that
  // hosts its group's store (tcp_store with serve) and is done keeps it up
  // while the others still use it, as rank 0 does for the default group.
  void linger(Millis limit);

  struct Impl;

 private:
  explicit TcpStoreServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// A client of TcpStoreServer. Connects lazily-retried until `timeout`.
class TcpStore final : public Store {
 public:
  TcpStore(const std::string& host, int port, Millis timeout);
  ~TcpStore() override;
  void set(const std::string& key, const Bytes& value) override;
  Bytes get(const std::string& key, Millis timeout) override;
  using Store::get;
  std::optional<Bytes> try_get(const std::string& key) override;
  std::int64_t add(const std::string& key, std::int64_t delta) override;
  Bytes compare_set(const std::string& key, const Bytes& expected, const Bytes& desired) override;
  bool delete_key(const std::string& key) override;
  void wait(const std::vector<std::string>& keys, Millis timeout) override;
  using Store::wait;
  bool check(const std::vector<std::string>& keys) override;
  std::int64_t num_keys() override;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

// A store kept in one file on a (possibly shared) file system, serialised with
// fcntl locks. The file is removed when the last FileStore using it closes.
class FileStore final : public Store {
 public:
  FileStore(const std::string& path, Millis timeout);
  ~FileStore() override;
  void set(const std::string& key, const Bytes& value) override;
  Bytes get(const std::string& key, Millis timeout) override;
  using Store::get;
  std::optional<Bytes> try_get(const std::string& key) override;
  std::int64_t add(const std::string& key, std::int64_t delta) override;
  Bytes compare_set(const std::string& key, const Bytes& expected, const Bytes& desired) override;
  bool delete_key(const std::string& key) override;
  void wait(const std::vector<std::string>& keys, Millis timeout) override;
  using Store::wait;
  bool check(const std::vector<std::string>& keys) override;
  std::int64_t num_keys() override;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace braid::store
