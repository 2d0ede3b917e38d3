// StoreService: the TCP store's protocol and its data, with no sockets.
//
// TcpStoreServer's event loop owns the connections and their I/O; this owns
// what the requests do: the keys and values, parked GETs and WAITs, the
// bounds on keys and bytes, and the job's secret (store_wire.hpp, Hello and
// Proof). The loop appends what a client sent to its `in`, calls process(),
// and sends what lands in its `out`. Keeping the two apart lets the protocol
// be driven directly, as the fuzz target of the store does.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "src/common/auth.hpp"
#include "src/store/store.hpp"
#include "src/store/store_wire.hpp"

namespace braid::store {

// One connection's protocol state.
struct Client {
  std::uint64_t id = 0;
  Bytes in;  // unconsumed input is in[in_pos..]
  std::size_t in_pos = 0;
  Bytes out;  // unsent output is out[out_pos..]
  std::size_t out_pos = 0;
  bool parked = false;
  bool authed = false;   // proved the secret, or the store has none
  bool closing = false;  // refused: to be closed once its last reply is out
  bool challenged = false;
  auth::Nonce client_nonce{}, server_nonce{};
  wire::Op parked_op = wire::Op::Get;
  std::vector<std::string> parked_keys;

  std::size_t pending_in() const { return in.size() - in_pos; }
  std::size_t pending_out() const { return out.size() - out_pos; }
};

class StoreService {
 public:
  // Reads its bounds (BRAID_STORE_MAX_KEYS, BRAID_STORE_MAX_BYTES) and the
  // job's secret from the environment. `who` names it in warnings.
  explicit StoreService(std::string who);
  // Logs (INFO) how many requests it served and from how many clients: the
  // store traffic a job's init and life cost (bench/store_ops.sh).
  ~StoreService();
  StoreService(const StoreService&) = delete;
  StoreService& operator=(const StoreService&) = delete;

  // A new client: it must prove the secret first where there is one.
  void opened(Client& c) {
    c.authed = !secret_;
    ++clients_;
  }
  // Serves every complete request in c.in while c is not parked, closing or
  // behind on replies; false if a request is malformed (close c).
  bool process(Client& c);
  // c is closing: forget its parked request.
  void closed(Client& c);
  // Clients parked on keys that have since been set, in order; the loop
  // passes each to try_answer() and serves what it pipelined after.
  std::deque<std::uint64_t>& ready() { return ready_; }
  // Answers c's parked request if all its keys exist.
  bool try_answer(Client& c);

  // Input a client may have buffered, and replies it may leave unread,
  // before the loop stops reading from it.
  static constexpr std::size_t kMaxPendingIn = wire::kHeaderSize + wire::kMaxBody;
  static constexpr std::size_t kOutHighWater = 4 << 20;
  static constexpr std::size_t kCompactAt = 1 << 20;  // consumed input kept before it is erased

 private:
  bool handle(Client& c, wire::Op op, const std::vector<wire::Field>& f);
  // Hello and Proof; false if malformed.
  bool handle_auth(Client& c, wire::Op op, const std::vector<wire::Field>& f);
  // Answers with an error that names BRAID_JOB_TOKEN; c closes after it.
  void refuse(Client& c, const std::string& why);
  // Accounts for storing `size` bytes under `key`; false (and an error
  // reply to c) when that would pass max_keys_ or max_bytes_.
  bool make_room(Client& c, const std::string& key, std::size_t size);
  void reply(Client& c, wire::Status st, const std::vector<wire::Field>& fields);
  void park(Client& c, wire::Op op, std::vector<std::string> keys);
  void unregister(Client& c);
  void notify(const std::string& key);

  std::string who_;
  std::size_t max_keys_, max_bytes_;
  std::uint64_t requests_ = 0, clients_ = 0;
  std::uint64_t by_op_[16] = {};  // requests per wire::Op code, for the log line
  std::shared_ptr<const auth::Secret> secret_ = auth::secret_from_env();
  std::unordered_map<std::string, Bytes> data_;
  std::size_t bytes_ = 0;  // keys and values held
  std::unordered_map<std::string, std::vector<std::uint64_t>> waiters_;  // key -> parked clients
  std::deque<std::uint64_t> ready_;
};

}  // namespace braid::store
