// TcpStoreServer: one thread, one epoll set, non-blocking sockets.
// (~520 lines: the event loop, the protocol's requests and parking, and the
// bounds are one state machine over one set of connections.)
//
// Each client's requests are served in order. A GET of a missing key or a
// WAIT on missing keys "parks" its client: the reply is sent when a later
// request sets the key(s), and the client's further requests wait behind it.
// The server never times a parked request out; the client does, and closes
// its connection, which unparks it here. Anything malformed closes only the
// connection that sent it.
//
// A server started with the job's secret (BRAID_JOB_TOKEN) serves a
// connection only once it has proved the secret (store_wire.hpp, Hello and
// Proof); anything else is answered with an error naming BRAID_JOB_TOKEN,
// and the connection is closed once that answer is out.
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <deque>
#include <thread>
#include <unordered_map>

#include "src/common/auth.hpp"
#include "src/common/env.hpp"
#include "src/common/errors.hpp"
#include "src/common/log.hpp"
#include "src/common/socket.hpp"
#include "src/store/store.hpp"
#include "src/store/store_wire.hpp"

namespace braid::store {

namespace {

using wire::Field;
using wire::Op;
using wire::Status;

constexpr std::size_t kReadChunk = 64 * 1024;
constexpr std::size_t kReadPerEvent = 1 << 20;  // so one busy client cannot starve the others
constexpr std::size_t kMaxPendingIn = wire::kHeaderSize + wire::kMaxBody;
constexpr std::size_t kOutHighWater = 4 << 20;  // stop serving a client that does not read replies
constexpr std::uint64_t kListenerId = 0;
constexpr std::uint64_t kWakeId = 1;

struct Conn {
  std::uint64_t id = 0;
  Fd fd;
  Bytes in;  // unconsumed input is in[in_pos..]
  std::size_t in_pos = 0;
  Bytes out;  // unsent output is out[out_pos..]
  std::size_t out_pos = 0;
  std::uint32_t events = 0;  // epoll interest registered now
  bool parked = false;
  bool authed = false;   // proved the secret, or the server has none
  bool closing = false;  // refused: closed once its last reply is out
  bool challenged = false;
  auth::Nonce client_nonce{}, server_nonce{};
  Op parked_op = Op::Get;
  std::vector<std::string> parked_keys;

  std::size_t pending_in() const { return in.size() - in_pos; }
  std::size_t pending_out() const { return out.size() - out_pos; }
};

}  // namespace

struct TcpStoreServer::Impl {
  explicit Impl(Fd listener);
  ~Impl();

  Fd listener_;
  Fd epoll_;
  Fd wake_;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;

  // Bounds (BRAID_STORE_MAX_*, read when the server starts): what one
  // client, or a stranger, can make the store hold.
  std::size_t max_conns_, max_keys_, max_bytes_;
  std::shared_ptr<const auth::Secret> secret_ = auth::secret_from_env();

  // Everything below belongs to the server thread.
  std::unordered_map<std::string, Bytes> data_;
  std::size_t bytes_ = 0;  // keys and values held
  bool refusing_ = false;  // connections over the cap are being refused (warned once)
  std::unordered_map<std::uint64_t, std::unique_ptr<Conn>> conns_;
  std::unordered_map<std::string, std::vector<std::uint64_t>> waiters_;  // key -> parked clients
  std::deque<std::uint64_t> ready_;  // parked clients whose keys may have arrived
  std::uint64_t next_id_ = 2;
  bool listener_paused_ = false;
  std::vector<std::uint8_t> scratch_ = std::vector<std::uint8_t>(kReadChunk);

  void run();
  void accept_all();
  void serve(Conn& c, std::uint32_t events);
  void after_io(Conn& c);
  bool read_some(Conn& c);
  bool flush(Conn& c);
  bool process(Conn& c);
  bool handle(Conn& c, Op op, const std::vector<Field>& f);
  // Hello and Proof; false if malformed.
  bool handle_auth(Conn& c, Op op, const std::vector<Field>& f);
  // Answers with an error that names BRAID_JOB_TOKEN and closes c after it.
  void refuse(Conn& c, const std::string& why);
  void reply(Conn& c, Status st, const std::vector<Field>& fields);
  void park(Conn& c, Op op, std::vector<std::string> keys);
  bool try_answer(Conn& c);
  void unregister(Conn& c);
  void notify(const std::string& key);
  void answer_ready();
  void set_interest(Conn& c, std::uint32_t events);
  void close(std::uint64_t id);
  // Accounts for storing `size` bytes under `key`; false (and an error
  // reply to c) when that would pass max_keys_ or max_bytes_.
  bool make_room(Conn& c, const std::string& key, std::size_t size);
};

TcpStoreServer::Impl::Impl(Fd listener)
    : listener_(std::move(listener)),
      max_conns_(static_cast<std::size_t>(
          env_integer("BRAID_STORE_MAX_CONNECTIONS", 1, 1 << 20, "a count of connections").value_or(4096))),
      max_keys_(static_cast<std::size_t>(
          env_integer("BRAID_STORE_MAX_KEYS", 1, 1LL << 32, "a count of keys").value_or(1 << 20))),
      max_bytes_(static_cast<std::size_t>(
          env_integer("BRAID_STORE_MAX_BYTES", 1024, 1LL << 40, "a byte count").value_or(1LL << 30))) {
  net::set_nonblocking(listener_.get());
  port_ = net::local_address(listener_.get()).port();
  epoll_ = Fd(epoll_create1(EPOLL_CLOEXEC));
  wake_ = Fd(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!epoll_.valid() || !wake_.valid())
    fail(ErrorCode::Store, "cannot create the store server's epoll/eventfd: {}", errno_text());
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = kListenerId;
  epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, listener_.get(), &ev);
  ev.data.u64 = kWakeId;
  epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, wake_.get(), &ev);
  thread_ = std::thread([this] { run(); });
}

TcpStoreServer::Impl::~Impl() {
  stop_.store(true);
  std::uint64_t one = 1;
  [[maybe_unused]] auto n = ::write(wake_.get(), &one, sizeof one);
  if (thread_.joinable()) thread_.join();
  // Connections and fds close with their owners.
}

void TcpStoreServer::Impl::run() {
  std::array<epoll_event, 64> evs;
  while (!stop_.load()) {
    int n = epoll_wait(epoll_.get(), evs.data(), static_cast<int>(evs.size()), -1);
    if (n < 0) {
      if (errno == EINTR) continue;
      BRAID_WARN("store server on port {}: epoll_wait failed: {}; stopping", port_, errno_text());
      return;
    }
    for (int i = 0; i < n; ++i) {
      std::uint64_t id = evs[i].data.u64;
      if (id == kWakeId) continue;  // stop_ is checked by the loop
      if (id == kListenerId) {
        accept_all();
        continue;
      }
      auto it = conns_.find(id);
      if (it != conns_.end()) serve(*it->second, evs[i].events);
    }
    answer_ready();
  }
}

void TcpStoreServer::Impl::accept_all() {
  for (;;) {
    int fd = accept4(listener_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      // Out of fds or memory: stop accepting (level-triggered epoll would spin)
      // until a connection closes.
      BRAID_WARN("store server on port {}: accept failed: {}; pausing accepts", port_, errno_text());
      epoll_event ev{};
      ev.data.u64 = kListenerId;
      epoll_ctl(epoll_.get(), EPOLL_CTL_MOD, listener_.get(), &ev);
      listener_paused_ = true;
      return;
    }
    if (conns_.size() >= max_conns_) {
      // Over the cap: refused at once, so a flood of connections cannot
      // take the server's fds and memory from the job's ranks. One error
      // frame first (it fits any socket buffer), so a client says why.
      Bytes frame;
      const std::string why = fmt::format("store full: it serves at most {} connections (BRAID_STORE_MAX_CONNECTIONS)",
                                          max_conns_);
      wire::encode(frame, static_cast<std::uint16_t>(Status::Error), {wire::field(why)});
      (void)::send(fd, frame.data(), frame.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      ::close(fd);
      if (!refusing_)
        BRAID_WARN("store server on port {}: refusing connections beyond {} (BRAID_STORE_MAX_CONNECTIONS)", port_,
                   max_conns_);
      refusing_ = true;
      continue;
    }
    refusing_ = false;
    net::set_nodelay(fd);
    auto c = std::make_unique<Conn>();
    c->id = next_id_++;
    c->fd = Fd(fd);
    c->events = EPOLLIN;
    c->authed = !secret_;
    epoll_event ev{};
    ev.events = c->events;
    ev.data.u64 = c->id;
    if (epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, fd, &ev) != 0) {
      BRAID_WARN("store server on port {}: epoll_ctl failed: {}", port_, errno_text());
      continue;  // c closes the fd
    }
    conns_.emplace(c->id, std::move(c));
  }
}

void TcpStoreServer::Impl::serve(Conn& c, std::uint32_t events) {
  bool ok = !(events & (EPOLLERR | EPOLLHUP));
  try {
    if (ok && (events & EPOLLIN)) ok = read_some(c);
    if (ok && (events & EPOLLOUT)) ok = flush(c);
  } catch (const std::exception& e) {
    BRAID_WARN("store server on port {}: dropping a client: {}", port_, e.what());
    ok = false;
  }
  if (!ok) return close(c.id);
  after_io(c);
}

// Serves what has arrived, sends what can be sent, and updates the interest
// set; closes the connection on any failure. `c` may be gone afterwards.
void TcpStoreServer::Impl::after_io(Conn& c) {
  bool ok = false;
  try {
    ok = process(c) && flush(c);
  } catch (const std::exception& e) {
    BRAID_WARN("store server on port {}: dropping a client: {}", port_, e.what());
  }
  if (!ok || (c.closing && c.pending_out() == 0)) return close(c.id);
  std::uint32_t want = 0;
  if (c.pending_in() < kMaxPendingIn && !c.closing) want |= EPOLLIN;
  if (c.pending_out() > 0) want |= EPOLLOUT;
  set_interest(c, want);
}

// False on EOF or a socket error.
bool TcpStoreServer::Impl::read_some(Conn& c) {
  std::size_t budget = kReadPerEvent;
  while (budget > 0 && c.pending_in() < kMaxPendingIn) {
    ssize_t n = ::recv(c.fd.get(), scratch_.data(), scratch_.size(), MSG_DONTWAIT);
    if (n > 0) {
      c.in.insert(c.in.end(), scratch_.begin(), scratch_.begin() + n);
      budget -= std::min(budget, static_cast<std::size_t>(n));
      continue;
    }
    if (n == 0) return false;
    if (errno == EINTR) continue;
    return errno == EAGAIN || errno == EWOULDBLOCK;
  }
  return true;
}

// False if the peer is gone.
bool TcpStoreServer::Impl::flush(Conn& c) {
  while (c.pending_out() > 0) {
    ssize_t n = ::send(c.fd.get(), c.out.data() + c.out_pos, c.pending_out(),
                       MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      c.out_pos += static_cast<std::size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
    return false;
  }
  c.out.clear();
  c.out_pos = 0;
  return true;
}

// Serves every complete request while the client is not parked; false if a
// request is malformed.
bool TcpStoreServer::Impl::process(Conn& c) {
  std::vector<Field> fields;
  while (!c.parked && !c.closing && c.pending_out() < kOutHighWater && c.pending_in() >= wire::kHeaderSize) {
    const std::uint8_t* p = c.in.data() + c.in_pos;
    auto h = wire::decode_header(p);
    if (!h) {
      BRAID_WARN("store server on port {}: bad frame header from a client; closing it", port_);
      return false;
    }
    if (c.pending_in() < wire::kHeaderSize + h->body_len) break;
    if (!wire::decode_fields(p + wire::kHeaderSize, h->body_len, h->nfields, fields) ||
        !handle(c, static_cast<Op>(h->code), fields)) {
      BRAID_WARN("store server on port {}: malformed request (op {}) from a client; closing it",
                 port_, h->code);
      return false;
    }
    c.in_pos += wire::kHeaderSize + h->body_len;
  }
  if (c.in_pos == c.in.size()) {
    c.in.clear();
    c.in_pos = 0;
  } else if (c.in_pos >= kReadPerEvent) {
    c.in.erase(c.in.begin(), c.in.begin() + static_cast<std::ptrdiff_t>(c.in_pos));
    c.in_pos = 0;
  }
  return true;
}

// Executes one request; false if its fields do not fit the op.
bool TcpStoreServer::Impl::handle(Conn& c, Op op, const std::vector<Field>& f) {
  auto key_ok = [](Field k) { return !k.empty() && k.size() <= kMaxKeyLen; };
  auto value_ok = [](Field v) { return v.size() <= kMaxValueLen; };
  auto all_keys_ok = [&] { return std::all_of(f.begin(), f.end(), key_ok); };
  auto has = [&](const std::string& k) { return data_.count(k) != 0; };
  if (op == Op::Hello || op == Op::Proof) return handle_auth(c, op, f);
  if (!c.authed) {
    refuse(c, "authentication failed: this store serves only processes that prove the job's secret");
    return true;
  }
  switch (op) {
    case Op::Set: {
      if (f.size() != 2 || !key_ok(f[0]) || !value_ok(f[1])) return false;
      std::string key = wire::field_str(f[0]);
      if (!make_room(c, key, f[1].size())) return true;
      data_[key] = wire::field_bytes(f[1]);
      notify(key);
      reply(c, Status::Ok, {});
      return true;
    }
    case Op::Get:
    case Op::TryGet: {
      if (f.size() != 1 || !key_ok(f[0])) return false;
      std::string key = wire::field_str(f[0]);
      auto it = data_.find(key);
      if (it != data_.end())
        reply(c, Status::Ok, {wire::field(it->second)});
      else if (op == Op::TryGet)
        reply(c, Status::Missing, {});
      else
        park(c, op, {key});
      return true;
    }
    case Op::Add: {
      auto delta = f.size() == 2 ? wire::i64_from(f[1]) : std::nullopt;
      if (!delta || !key_ok(f[0])) return false;
      std::string key = wire::field_str(f[0]);
      auto it = data_.find(key);
      try {
        std::int64_t v = added_value(key, it == data_.end() ? nullptr : &it->second, *delta);
        Bytes value = decimal(v);
        if (!make_room(c, key, value.size())) return true;
        data_[key] = std::move(value);
        notify(key);
        reply(c, Status::Ok, {wire::field(wire::i64_bytes(v))});
      } catch (const Error& e) {
        reply(c, Status::Error, {wire::field(std::string(e.what()))});
      }
      return true;
    }
    case Op::CompareSet: {
      if (f.size() != 3 || !key_ok(f[0]) || !value_ok(f[1]) || !value_ok(f[2])) return false;
      std::string key = wire::field_str(f[0]);
      auto it = data_.find(key);
      if (it == data_.end()) {
        // torch: a missing key matches an empty `expected`; otherwise the
        // reply is `expected` itself and nothing is stored.
        if (!f[1].empty()) {
          reply(c, Status::Ok, {f[1]});
          return true;
        }
        if (!make_room(c, key, f[2].size())) return true;
        it = data_.emplace(key, wire::field_bytes(f[2])).first;
        notify(key);
      } else if (std::equal(it->second.begin(), it->second.end(), f[1].begin(), f[1].end())) {
        if (!make_room(c, key, f[2].size())) return true;
        it->second = wire::field_bytes(f[2]);
        notify(key);
      }
      reply(c, Status::Ok, {wire::field(it->second)});
      return true;
    }
    case Op::Delete: {
      if (f.size() != 1 || !key_ok(f[0])) return false;
      const std::string key = wire::field_str(f[0]);
      auto it = data_.find(key);
      const std::uint8_t existed = it != data_.end() ? 1 : 0;
      if (existed) {
        bytes_ -= key.size() + it->second.size();
        data_.erase(it);
      }
      reply(c, Status::Ok, {Field(&existed, 1)});
      return true;
    }
    case Op::Wait:
    case Op::Check: {
      if (!all_keys_ok()) return false;
      std::vector<std::string> keys;
      for (auto k : f) keys.push_back(wire::field_str(k));
      const std::uint8_t all = std::all_of(keys.begin(), keys.end(), has) ? 1 : 0;
      if (op == Op::Check)
        reply(c, Status::Ok, {Field(&all, 1)});
      else if (all)
        reply(c, Status::Ok, {});
      else
        park(c, op, std::move(keys));
      return true;
    }
    case Op::NumKeys: {
      if (!f.empty()) return false;
      reply(c, Status::Ok, {wire::field(wire::i64_bytes(static_cast<std::int64_t>(data_.size())))});
      return true;
    }
  }
  return false;  // unknown op
}

bool TcpStoreServer::Impl::handle_auth(Conn& c, Op op, const std::vector<Field>& f) {
  if (f.size() != 1 || f[0].size() != (op == Op::Hello ? auth::kNonceBytes : auth::kMacBytes)) return false;
  if (op == Op::Hello) {
    if (!secret_) {  // no secret here: the client decides whether that will do
      reply(c, Status::Ok, {});
      return true;
    }
    std::copy(f[0].begin(), f[0].end(), c.client_nonce.begin());
    c.server_nonce = auth::fresh_nonce();
    c.challenged = true;
    const auth::Mac proof = secret_->mac(wire::kServerLabel, auth::view(c.client_nonce), auth::view(c.server_nonce));
    reply(c, Status::Ok, {Field(c.server_nonce.data(), c.server_nonce.size()), Field(proof.data(), proof.size())});
    return true;
  }
  auth::Mac proof;
  std::copy(f[0].begin(), f[0].end(), proof.begin());
  if (!secret_ || !c.challenged ||
      !secret_->check(proof, wire::kClientLabel, auth::view(c.client_nonce), auth::view(c.server_nonce))) {
    refuse(c, "authentication failed: the client could not prove the job's secret");
    return true;
  }
  c.challenged = false;  // one proof per challenge
  c.authed = true;
  reply(c, Status::Ok, {});
  return true;
}

void TcpStoreServer::Impl::refuse(Conn& c, const std::string& why) {
  BRAID_WARN("store server on port {}: refusing a client: {}", port_, why);
  const std::string text = fmt::format("{} ({})", why, auth::kHint);
  reply(c, Status::Error, {wire::field(text)});
  c.closing = true;
}

bool TcpStoreServer::Impl::make_room(Conn& c, const std::string& key, std::size_t size) {
  auto it = data_.find(key);
  const std::size_t old = it == data_.end() ? 0 : key.size() + it->second.size();
  const std::size_t keys = data_.size() + (it == data_.end() ? 1 : 0);
  const std::size_t bytes = bytes_ - old + key.size() + size;
  if (keys > max_keys_ || bytes > max_bytes_) {
    const std::string why =
        keys > max_keys_
            ? fmt::format("store full: {} keys is the most it holds (BRAID_STORE_MAX_KEYS on the rank that hosts it)",
                          max_keys_)
            : fmt::format("store full: {} more bytes would pass its {} bytes (BRAID_STORE_MAX_BYTES on the rank that "
                          "hosts it)", bytes - bytes_, max_bytes_);
    reply(c, Status::Error, {wire::field(why)});
    return false;
  }
  bytes_ = bytes;
  return true;
}

void TcpStoreServer::Impl::reply(Conn& c, Status st, const std::vector<Field>& fields) {
  wire::encode(c.out, static_cast<std::uint16_t>(st), fields);
}

void TcpStoreServer::Impl::park(Conn& c, Op op, std::vector<std::string> keys) {
  c.parked = true;
  c.parked_op = op;
  c.parked_keys = std::move(keys);
  try_answer(c);  // registers the missing keys
}

// Answers a parked request if all its keys exist; otherwise makes sure the
// client is registered on each missing key (one may have been deleted again).
bool TcpStoreServer::Impl::try_answer(Conn& c) {
  bool all = true;
  for (const auto& k : c.parked_keys) {
    if (data_.count(k)) continue;
    all = false;
    auto& w = waiters_[k];
    if (std::find(w.begin(), w.end(), c.id) == w.end()) w.push_back(c.id);
  }
  if (!all) return false;
  unregister(c);
  if (c.parked_op == Op::Get)
    reply(c, Status::Ok, {wire::field(data_.at(c.parked_keys[0]))});
  else
    reply(c, Status::Ok, {});
  c.parked = false;
  c.parked_keys.clear();
  return true;
}

void TcpStoreServer::Impl::unregister(Conn& c) {
  for (const auto& k : c.parked_keys) {
    auto it = waiters_.find(k);
    if (it == waiters_.end()) continue;
    std::erase(it->second, c.id);
    if (it->second.empty()) waiters_.erase(it);
  }
}

void TcpStoreServer::Impl::notify(const std::string& key) {
  auto it = waiters_.find(key);
  if (it == waiters_.end()) return;
  ready_.insert(ready_.end(), it->second.begin(), it->second.end());
  waiters_.erase(it);
}

// Answered clients may have pipelined requests that set more keys, so this
// runs until nothing new is ready.
void TcpStoreServer::Impl::answer_ready() {
  while (!ready_.empty()) {
    std::uint64_t id = ready_.front();
    ready_.pop_front();
    auto it = conns_.find(id);
    if (it == conns_.end() || !it->second->parked) continue;
    if (try_answer(*it->second)) after_io(*it->second);
  }
}

void TcpStoreServer::Impl::set_interest(Conn& c, std::uint32_t events) {
  if (events == c.events) return;
  epoll_event ev{};
  ev.events = events;
  ev.data.u64 = c.id;
  epoll_ctl(epoll_.get(), EPOLL_CTL_MOD, c.fd.get(), &ev);
  c.events = events;
}

void TcpStoreServer::Impl::close(std::uint64_t id) {
  auto it = conns_.find(id);
  if (it == conns_.end()) return;
  Conn& c = *it->second;
  if (c.parked) unregister(c);
  // Explicitly: a forked child may hold a copy of the fd, which would keep
  // the registration alive after close().
  epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, c.fd.get(), nullptr);
  conns_.erase(it);
  if (listener_paused_) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = kListenerId;
    epoll_ctl(epoll_.get(), EPOLL_CTL_MOD, listener_.get(), &ev);
    listener_paused_ = false;
  }
}

TcpStoreServer::TcpStoreServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

TcpStoreServer::TcpStoreServer(const std::string& host, int port)
    : TcpStoreServer(std::make_unique<Impl>(net::listen_on(net::resolve(host, port)))) {}

std::unique_ptr<TcpStoreServer> TcpStoreServer::try_create(const std::string& host, int port) {
  Fd listener = net::try_listen_on(net::resolve(host, port));
  if (!listener.valid()) return nullptr;
  // The constructor taking an Impl is private, so make_unique cannot reach it.
  return std::unique_ptr<TcpStoreServer>(
      new TcpStoreServer(std::make_unique<Impl>(std::move(listener))));
}

TcpStoreServer::~TcpStoreServer() = default;

int TcpStoreServer::port() const { return impl_->port_; }

}  // namespace braid::store
