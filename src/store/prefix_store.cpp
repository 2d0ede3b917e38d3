// PrefixStore: forwards every call to the base store with "<prefix>/" before
// each key, so groups sharing one store cannot see each other's keys.
#include "src/store/store_wire.hpp"

namespace braid::store {

PrefixStore::PrefixStore(std::string prefix, std::shared_ptr<Store> base)
    : prefix_(std::move(prefix)), base_(std::move(base)) {
  if (prefix_.empty())
    fail(ErrorCode::InvalidArgument, "PrefixStore prefix is empty: expected a non-empty name");
  if (!base_) fail(ErrorCode::InvalidArgument, "PrefixStore base store is null: expected a store");
  timeout_ = base_->timeout();
}

// The base store checks the prefixed key's length; only emptiness of the
// caller's own key would go unnoticed there.
std::vector<std::string> PrefixStore::keys(const std::vector<std::string>& ks) const {
  std::vector<std::string> out;
  out.reserve(ks.size());
  for (const auto& k : ks) {
    check_key(k);
    out.push_back(key(k));
  }
  return out;
}

void PrefixStore::set(const std::string& k, const Bytes& value) {
  check_key(k);
  base_->set(key(k), value);
}

Bytes PrefixStore::get(const std::string& k, Millis timeout) {
  check_key(k);
  return base_->get(key(k), timeout);
}

std::optional<Bytes> PrefixStore::try_get(const std::string& k) {
  check_key(k);
  return base_->try_get(key(k));
}

std::int64_t PrefixStore::add(const std::string& k, std::int64_t delta) {
  check_key(k);
  return base_->add(key(k), delta);
}

Bytes PrefixStore::compare_set(const std::string& k, const Bytes& expected, const Bytes& desired) {
  check_key(k);
  return base_->compare_set(key(k), expected, desired);
}

bool PrefixStore::delete_key(const std::string& k) {
  check_key(k);
  return base_->delete_key(key(k));
}

void PrefixStore::wait(const std::vector<std::string>& ks, Millis timeout) {
  base_->wait(keys(ks), timeout);
}

bool PrefixStore::check(const std::vector<std::string>& ks) { return base_->check(keys(ks)); }

std::int64_t PrefixStore::num_keys() { return base_->num_keys(); }

}  // namespace braid::store
