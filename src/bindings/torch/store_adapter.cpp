#include "store_adapter.hpp"

#include <string>

#include "braid/error.hpp"

namespace braid_torch {

namespace {

// torch's stores throw c10::Error or std::runtime_error; Braid's bootstrap
// expects braid::Error, Timeout when a wait ran out.
template <class F>
auto guarded(const char* what, const std::string& key, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const braid::Error&) {
    throw;
  } catch (const std::exception& e) {
    const std::string msg = e.what();
    const bool timeout = msg.find("imeout") != std::string::npos || msg.find("timed out") != std::string::npos;
    throw braid::Error(timeout ? braid::ErrorCode::Timeout : braid::ErrorCode::Store,
                       "torch's store failed in " + std::string(what) + "('" + key + "'): " +
                           msg.substr(0, msg.find('\n')));
  }
}

}  // namespace

C10dStore::C10dStore(c10::intrusive_ptr<c10d::Store> store) : s_(std::move(store)) {
  if (!s_) throw braid::Error(braid::ErrorCode::InvalidArgument, "braid_torch: the c10d store is null");
  timeout_ = s_->getTimeout();
}

void C10dStore::set(const std::string& key, const braid::store::Bytes& value) {
  guarded("set", key, [&] { s_->set(key, value); });
}

braid::store::Bytes C10dStore::get(const std::string& key, braid::store::Millis timeout) {
  return guarded("get", key, [&] {
    s_->wait({key}, timeout);
    return s_->get(key);
  });
}

std::optional<braid::store::Bytes> C10dStore::try_get(const std::string& key) {
  return guarded("try_get", key, [&]() -> std::optional<braid::store::Bytes> {
    if (!s_->check({key})) return std::nullopt;
    return s_->get(key);
  });
}

std::int64_t C10dStore::add(const std::string& key, std::int64_t delta) {
  return guarded("add", key, [&] { return s_->add(key, delta); });
}

braid::store::Bytes C10dStore::compare_set(const std::string& key, const braid::store::Bytes& expected,
                                           const braid::store::Bytes& desired) {
  return guarded("compare_set", key, [&] { return s_->compareSet(key, expected, desired); });
}

bool C10dStore::delete_key(const std::string& key) {
  return guarded("delete_key", key, [&] { return s_->deleteKey(key); });
}

void C10dStore::wait(const std::vector<std::string>& keys, braid::store::Millis timeout) {
  guarded("wait", keys.empty() ? std::string() : keys.front(), [&] { s_->wait(keys, timeout); });
}

bool C10dStore::check(const std::vector<std::string>& keys) {
  return guarded("check", keys.empty() ? std::string() : keys.front(), [&] { return s_->check(keys); });
}

std::int64_t C10dStore::num_keys() {
  return guarded("num_keys", "", [&] { return s_->getNumKeys(); });
}

}  // namespace braid_torch
