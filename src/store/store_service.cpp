#include "src/store/store_service.hpp"

#include <algorithm>

#include "src/common/env.hpp"
#include "src/common/errors.hpp"
#include "src/common/log.hpp"

namespace braid::store {

using wire::Field;
using wire::Op;
using wire::Status;

StoreService::StoreService(std::string who)
    : who_(std::move(who)),
      max_keys_(static_cast<std::size_t>(
          env_integer("BRAID_STORE_MAX_KEYS", 1, 1LL << 32, "a count of keys").value_or(1 << 20))),
      max_bytes_(static_cast<std::size_t>(
          env_integer("BRAID_STORE_MAX_BYTES", 1024, 1LL << 40, "a byte count").value_or(1LL << 30))) {}

StoreService::~StoreService() {
  static const char* const names[] = {"?", "set", "get", "try_get", "add", "compare_set", "delete", "wait",
                                      "check", "num_keys", "hello", "proof"};
  std::string ops;
  for (std::size_t i = 0; i < std::size(names); ++i)
    if (by_op_[i]) ops += fmt::format("{}{} {}", ops.empty() ? "" : ", ", names[i], by_op_[i]);
  BRAID_INFO("{}: served {} requests from {} clients ({})", who_, requests_, clients_, ops);
}

void StoreService::closed(Client& c) {
  if (c.parked) unregister(c);
}

// Serves every complete request while the client is not parked; false if a
// request is malformed.
bool StoreService::process(Client& c) {
  std::vector<Field> fields;
  while (!c.parked && !c.closing && c.pending_out() < kOutHighWater && c.pending_in() >= wire::kHeaderSize) {
    const std::uint8_t* p = c.in.data() + c.in_pos;
    auto h = wire::decode_header(p);
    if (!h) {
      BRAID_WARN("{}: bad frame header from a client; closing it", who_);
      return false;
    }
    if (c.pending_in() < wire::kHeaderSize + h->body_len) break;
    ++requests_;
    ++by_op_[h->code < std::size(by_op_) ? h->code : 0];
    if (!wire::decode_fields(p + wire::kHeaderSize, h->body_len, h->nfields, fields) ||
        !handle(c, static_cast<Op>(h->code), fields)) {
      BRAID_WARN("{}: malformed request (op {}) from a client; closing it", who_, h->code);
      return false;
    }
    c.in_pos += wire::kHeaderSize + h->body_len;
  }
  if (c.in_pos == c.in.size()) {
    c.in.clear();
    c.in_pos = 0;
  } else if (c.in_pos >= kCompactAt) {
    c.in.erase(c.in.begin(), c.in.begin() + static_cast<std::ptrdiff_t>(c.in_pos));
    c.in_pos = 0;
  }
  return true;
}

// Executes one request; false if its fields do not fit the op.
bool StoreService::handle(Client& c, Op op, const std::vector<Field>& f) {
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
    case Op::Hello:
    case Op::Proof:
      break;  // handle_auth's, above
  }
  return false;  // unknown op
}

bool StoreService::handle_auth(Client& c, Op op, const std::vector<Field>& f) {
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

void StoreService::refuse(Client& c, const std::string& why) {
  BRAID_WARN("{}: refusing a client: {}", who_, why);
  const std::string text = fmt::format("{} ({})", why, auth::kHint);
  reply(c, Status::Error, {wire::field(text)});
  c.closing = true;
}

bool StoreService::make_room(Client& c, const std::string& key, std::size_t size) {
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

void StoreService::reply(Client& c, Status st, const std::vector<Field>& fields) {
  wire::encode(c.out, static_cast<std::uint16_t>(st), fields);
}

void StoreService::park(Client& c, Op op, std::vector<std::string> keys) {
  c.parked = true;
  c.parked_op = op;
  c.parked_keys = std::move(keys);
  try_answer(c);  // registers the missing keys
}

// Answers a parked request if all its keys exist; otherwise makes sure the
// client is registered on each missing key (one may have been deleted again).
bool StoreService::try_answer(Client& c) {
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

void StoreService::unregister(Client& c) {
  for (const auto& k : c.parked_keys) {
    auto it = waiters_.find(k);
    if (it == waiters_.end()) continue;
    std::erase(it->second, c.id);
    if (it->second.empty()) waiters_.erase(it);
  }
}

void StoreService::notify(const std::string& key) {
  auto it = waiters_.find(key);
  if (it == waiters_.end()) return;
  ready_.insert(ready_.end(), it->second.begin(), it->second.end());
  waiters_.erase(it);
}

}  // namespace braid::store
