// TcpStore: a blocking client of TcpStoreServer.
//
// One request at a time on one connection (a mutex serialises threads). Any
// failure mid-request -- a timeout of a parked GET/WAIT included -- closes the
// connection, because a late reply would otherwise be read as the answer to
// the next request; the next call reconnects.
//
// Every new connection is first asked for its key count, with an answer due
// within kProbeLimit: a Braid store answers at once, while something else on
// the port (a web server waiting for a request line that never comes) would
// otherwise hold every rank's init for its whole timeout without a word.
// Where the job has a secret (BRAID_JOB_TOKEN), that first exchange is the
// challenge-response of auth.hpp instead, and a store that cannot prove the
// secret is never used: it may be a stranger's, set up to take the job over.
#include <mutex>
#include <optional>

#include "src/common/auth.hpp"
#include "src/common/errors.hpp"
#include "src/common/socket.hpp"
#include "src/store/store.hpp"
#include "src/store/store_wire.hpp"

namespace braid::store {

namespace {
constexpr Millis kProbeLimit{5000};
// A store that served this client and now cannot be reached is gone, not
// starting: a Braid store lives as long as the process hosting it. Waiting
// the whole timeout for it would hold a rank (in teardown, say, after the
// host has left) for minutes; a few seconds cover a SYN lost to a full
// backlog (retransmitted after 1 s). A refusal ends it at once: nothing
// listens on the port any more.
constexpr Millis kReconnectLimit{3000};
}  // namespace

thread_local const Deadline* t_cap = nullptr;

CallCap::CallCap(Deadline d) : prev_(t_cap), d_(prev_ && prev_->at < d.at ? *prev_ : d) { t_cap = &d_; }
CallCap::~CallCap() { t_cap = prev_; }
const Deadline* CallCap::current() { return t_cap; }

using wire::Field;
using wire::Op;
using wire::Status;

struct TcpStore::Impl {
  struct Reply {
    Status status = Status::Ok;
    std::vector<Bytes> fields;
  };

  std::string host;
  int port = 0;
  net::SockAddr addr;
  std::string what;  // "the store at host:port", for messages
  std::timed_mutex mu;
  Fd sock;  // invalid until (re)connected
  std::shared_ptr<const auth::Secret> secret = auth::secret_from_env();

  bool served = false;       // a connection of ours was once answered
  std::optional<Error> gone;  // why reconnecting failed: every later call fails so, at once

  void connect(Deadline deadline) {
    if (gone) throw *gone;
    try {
      sock = net::connect_retry(addr, served ? Deadline{std::min(deadline.at, Clock::now() + kReconnectLimit)} : deadline,
                                what, served);
    } catch (const Error& e) {
      const Error why(ErrorCode::Store, fmt::format("{} is unreachable: {}", what, e.what()));
      if (served) gone = Error(ErrorCode::Store, fmt::format("{} (it served this client before: it is gone)", why.what()));
      throw why;
    }
    const auto limit = std::min(kProbeLimit, std::chrono::duration_cast<Millis>(deadline.at - Clock::now()));
    if (secret) authenticate(Deadline::after(limit), limit);
    else probe(Deadline::after(limit), limit);
    served = true;
  }

  [[noreturn]] void auth_failed(const std::string& why) {
    sock.reset();
    fail(ErrorCode::Store, "authentication failed with {}: {} ({})", what, why, auth::kHint);
  }

  // The store proves the secret over our nonce, then we prove it over its.
  void authenticate(Deadline deadline, Millis limit) {
    const auth::Nonce mine = auth::fresh_nonce();
    const Reply hello = first_exchange(Op::Hello, {Field(mine.data(), mine.size())}, deadline, limit);
    if (hello.fields.empty())
      auth_failed("it runs without a secret, so it is not this job's store (or its host lacks BRAID_JOB_TOKEN)");
    if (hello.fields.size() != 2 || hello.fields[0].size() != auth::kNonceBytes ||
        hello.fields[1].size() != auth::kMacBytes)
      auth_failed("its answer to the challenge has the wrong shape");
    auth::Nonce theirs;
    auth::Mac proof;
    std::copy(hello.fields[0].begin(), hello.fields[0].end(), theirs.begin());
    std::copy(hello.fields[1].begin(), hello.fields[1].end(), proof.begin());
    if (!secret->check(proof, wire::kServerLabel, auth::view(mine), auth::view(theirs)))
      auth_failed("it could not prove the job's secret (its BRAID_JOB_TOKEN differs from this process's)");
    const auth::Mac ours = secret->mac(wire::kClientLabel, auth::view(mine), auth::view(theirs));
    const Reply done = first_exchange(Op::Proof, {Field(ours.data(), ours.size())}, deadline, limit);
    if (!done.fields.empty()) auth_failed("it answered the proof with something else than an acknowledgement");
  }

  // A request of the connection's opening (Hello, Proof): its Ok reply, or
  // a failure that says what the other end is.
  Reply first_exchange(Op op, const std::vector<Field>& fields, Deadline deadline, Millis limit) {
    Bytes frame;
    wire::encode(frame, static_cast<std::uint16_t>(op), fields);
    Reply out;
    try {
      const Raw r = exchange(frame, deadline);
      std::vector<Field> views;
      if (!r.header || r.header->body_len > 4096 ||
          !wire::decode_fields(r.body.data(), r.body.size(), r.header->nfields, views)) {
        sock.reset();
        fail(ErrorCode::Store, "{} is not a Braid store: it answered '{}' (is another service listening on that "
             "port? check MASTER_ADDR and MASTER_PORT)", what, printable(r.bytes, sizeof r.bytes));
      }
      if (r.header->code == static_cast<std::uint16_t>(Status::Error)) {
        sock.reset();
        fail(ErrorCode::Store, "{} refused the connection: {}", what, views.empty() ? "" : wire::field_str(views[0]));
      }
      for (auto v : views) out.fields.push_back(wire::field_bytes(v));
    } catch (const Error& e) {
      if (e.code() == ErrorCode::Store && !sock.valid()) throw;
      sock.reset();
      fail(ErrorCode::Store, "{} is not a Braid store: {} (is another service listening on that port? check "
           "MASTER_ADDR and MASTER_PORT)", what,
           e.code() == ErrorCode::Timeout ? fmt::format("it did not answer a request within {} ms", limit.count())
                                          : std::string(e.what()));
    }
    return out;
  }

  // The first exchange on a new connection: NumKeys, whose reply is one
  // 8-byte field. Anything else, or nothing in time, is not a Braid store.
  void probe(Deadline deadline, Millis limit) {
    Bytes frame;
    wire::encode(frame, static_cast<std::uint16_t>(Op::NumKeys), {});
    auto not_a_store = [&](const std::string& why) {
      sock.reset();
      fail(ErrorCode::Store,
           "{} is not a Braid store: {} (is another service listening on that port? check MASTER_ADDR and "
           "MASTER_PORT)", what, why);
    };
    try {
      const Raw r = exchange(frame, deadline);
      if (!r.header || r.header->nfields != 1 || r.header->body_len > 4096)
        not_a_store(fmt::format("it answered '{}'", printable(r.bytes, sizeof r.bytes)));
      std::vector<Field> views;
      if (r.header->code == static_cast<std::uint16_t>(wire::Status::Error) &&
          wire::decode_fields(r.body.data(), r.body.size(), r.header->nfields, views)) {
        sock.reset();  // a Braid store that refuses us (its bounds), with its reason
        fail(ErrorCode::Store, "{} refused the connection: {}", what, wire::field_str(views[0]));
      }
    } catch (const Error& e) {
      if (e.code() == ErrorCode::Store && !sock.valid()) throw;
      // Closed or reset before a byte came back: a store whose process
      // just went away (not another service, which answers or stays silent).
      if (e.code() == ErrorCode::PeerFailure) {
        sock.reset();
        fail(ErrorCode::Store, "{} is unreachable: it closed the connection before answering ({})", what, e.what());
      }
      if (e.code() == ErrorCode::Timeout) {
        // Silence after a connect the kernel accepted: a store whose process
        // is stopped or stuck looks exactly like another service that waits.
        sock.reset();
        fail(ErrorCode::Store, "{} accepted the connection but did not answer a request within {} ms: the "
             "process that hosts it is stopped or stuck, or another service listens there (check MASTER_ADDR and "
             "MASTER_PORT)", what, limit.count());
      }
      not_a_store(std::string(e.what()));
    }
  }

  // A reply as it came: its header (nothing where the bytes are not a store
  // reply's header: bad magic or version, counts out of bounds, an unknown
  // status), and then its body.
  struct Raw {
    std::uint8_t bytes[wire::kHeaderSize];
    std::optional<wire::Header> header;
    Bytes body;
  };
  // Sends `frame` on the open connection and reads its reply.
  Raw exchange(const Bytes& frame, Deadline deadline) {
    Raw r;
    net::write_all(sock.get(), frame.data(), frame.size(), deadline, what);
    net::read_all(sock.get(), r.bytes, sizeof r.bytes, deadline, what);
    r.header = wire::decode_header(r.bytes);
    if (r.header && r.header->code > static_cast<std::uint16_t>(Status::Error)) r.header.reset();
    if (!r.header) return r;
    r.body.resize(r.header->body_len);
    net::read_all(sock.get(), r.body.data(), r.body.size(), deadline, what);
    return r;
  }

  static std::string printable(const std::uint8_t* p, std::size_t n) {
    std::string s;
    for (std::size_t i = 0; i < n; ++i) s += p[i] >= 0x20 && p[i] < 0x7f ? static_cast<char>(p[i]) : '.';
    return s;
  }

  // What a successful reply must hold: `nfields` fields, the first of `size`
  // bytes if given.
  struct Shape {
    std::size_t nfields;
    std::size_t size = SIZE_MAX;
  };

  // Sends one request and returns its reply, checked against `shape` (a
  // Missing reply, to TryGet only, has no fields). `about` names the keys for
  // a timeout message.
  Reply call(Op op, const std::vector<Field>& fields, Shape shape, Millis timeout,
             const std::string& about) {
    Bytes frame;
    wire::encode(frame, static_cast<std::uint16_t>(op), fields);
    Deadline deadline = Deadline::after(timeout);
    if (const Deadline* cap = CallCap::current(); cap && cap->at < deadline.at) {
      deadline = *cap;
      timeout = std::max(Millis(0), std::chrono::duration_cast<Millis>(cap->at - Clock::now()));
    }
    // Another thread's call may hold the connection, waiting on a store that
    // does not answer: that wait counts against this call's time too.
    // The wait is given on the system clock: libstdc++ waits for a steady
    // one with pthread_mutex_clocklock, which gcc 12's ThreadSanitizer does
    // not intercept (it then reports the unlock as one of an unlocked mutex).
    std::unique_lock lock(mu, std::defer_lock);
    if (!lock.try_lock_until(std::chrono::system_clock::now() + (deadline.at - Clock::now())))
      fail(ErrorCode::Timeout, "timed out after {} ms waiting for {} in {} (another call of this process was "
           "waiting on it)", timeout.count(), about, what);
    Reply r;
    try {
      if (!sock.valid()) connect(deadline);
      const Raw raw = exchange(frame, deadline);
      if (!raw.header) fail(ErrorCode::Store, "{} sent a malformed reply header (not a Braid store server?)", what);
      std::vector<Field> views;
      if (!wire::decode_fields(raw.body.data(), raw.body.size(), raw.header->nfields, views))
        fail(ErrorCode::Store, "{} sent a malformed reply body", what);
      r.status = static_cast<Status>(raw.header->code);
      const bool fits =
          r.status == Status::Ok
              ? views.size() == shape.nfields &&
                    (shape.size == SIZE_MAX || views[0].size() == shape.size)
              : r.status == Status::Missing ? op == Op::TryGet && views.empty()
                                            : views.size() == 1;
      if (!fits) fail(ErrorCode::Store, "{} sent a reply of an unexpected shape", what);
      for (auto v : views) r.fields.push_back(wire::field_bytes(v));
    } catch (const Error& e) {
      sock.reset();
      if (e.code() == ErrorCode::Timeout)
        fail(ErrorCode::Timeout, "timed out after {} ms waiting for {} in {}", timeout.count(),
             about, what);
      if (e.code() == ErrorCode::Store) throw;
      fail(ErrorCode::Store, "{} is unreachable: {}", what, e.what());
    }
    // The server refused the request (add() on a non-integer); the
    // connection is still in step.
    if (r.status == Status::Error) {
      const std::string why = to_string(r.fields[0]);
      // "store full": its bounds, not the caller's argument.
      fail(why.rfind("store full", 0) == 0 ? ErrorCode::Store : ErrorCode::InvalidArgument, "{}", why);
    }
    return r;
  }
};

TcpStore::TcpStore(const std::string& host, int port, Millis timeout)
    : impl_(std::make_unique<Impl>()) {
  check_timeout(timeout);
  timeout_ = timeout;
  impl_->host = host;
  impl_->port = port;
  impl_->addr = net::resolve(host, port);
  impl_->what = fmt::format("the store at {}:{}", host, port);
  std::lock_guard lock(impl_->mu);
  impl_->connect(Deadline::after(timeout));
}

TcpStore::~TcpStore() = default;

void TcpStore::set(const std::string& key, const Bytes& value) {
  check_key(key);
  check_value(value);
  impl_->call(Op::Set, {wire::field(key), wire::field(value)}, {0}, timeout(),
              describe_keys({key}));
}

Bytes TcpStore::get(const std::string& key, Millis timeout) {
  check_key(key);
  check_timeout(timeout);
  return impl_->call(Op::Get, {wire::field(key)}, {1}, timeout, describe_keys({key})).fields[0];
}

std::optional<Bytes> TcpStore::try_get(const std::string& key) {
  check_key(key);
  auto r = impl_->call(Op::TryGet, {wire::field(key)}, {1}, timeout(), describe_keys({key}));
  if (r.status == Status::Missing) return std::nullopt;
  return std::move(r.fields[0]);
}

std::int64_t TcpStore::add(const std::string& key, std::int64_t delta) {
  check_key(key);
  Bytes d = wire::i64_bytes(delta);
  auto r = impl_->call(Op::Add, {wire::field(key), wire::field(d)}, {1, 8}, timeout(),
                       describe_keys({key}));
  return *wire::i64_from(wire::field(r.fields[0]));
}

Bytes TcpStore::compare_set(const std::string& key, const Bytes& expected, const Bytes& desired) {
  check_key(key);
  check_value(expected);
  check_value(desired);
  auto r = impl_->call(Op::CompareSet,
                       {wire::field(key), wire::field(expected), wire::field(desired)}, {1},
                       timeout(), describe_keys({key}));
  return std::move(r.fields[0]);
}

bool TcpStore::delete_key(const std::string& key) {
  check_key(key);
  auto r = impl_->call(Op::Delete, {wire::field(key)}, {1, 1}, timeout(), describe_keys({key}));
  return r.fields[0][0] != 0;
}

static std::vector<Field> key_fields(const std::vector<std::string>& keys) {
  std::vector<Field> fields;
  for (const auto& k : keys) fields.push_back(wire::field(k));
  return fields;
}

void TcpStore::wait(const std::vector<std::string>& keys, Millis timeout) {
  check_keys(keys);
  check_timeout(timeout);
  if (keys.empty()) return;
  impl_->call(Op::Wait, key_fields(keys), {0}, timeout, describe_keys(keys));
}

bool TcpStore::check(const std::vector<std::string>& keys) {
  check_keys(keys);
  auto r = impl_->call(Op::Check, key_fields(keys), {1, 1}, timeout(), describe_keys(keys));
  return r.fields[0][0] != 0;
}

std::int64_t TcpStore::num_keys() {
  auto r = impl_->call(Op::NumKeys, {}, {1, 8}, timeout(), "the key count");
  return *wire::i64_from(wire::field(r.fields[0]));
}

}  // namespace braid::store
