// C10dStore: torch's c10d::Store seen as a braid::store::Store, so that a
// Communicator bootstraps over the store torch hands the backend's creator
// (as Gloo's rendezvous does) and rank 0 hosts no second store.
#pragma once

#include <torch/csrc/distributed/c10d/Store.hpp>

#include "braid/store.hpp"

namespace braid_torch {

class C10dStore final : public braid::store::Store {
 public:
  explicit C10dStore(c10::intrusive_ptr<c10d::Store> store);
  void set(const std::string& key, const braid::store::Bytes& value) override;
  braid::store::Bytes get(const std::string& key, braid::store::Millis timeout) override;
  using Store::get;
  std::optional<braid::store::Bytes> try_get(const std::string& key) override;
  std::int64_t add(const std::string& key, std::int64_t delta) override;
  braid::store::Bytes compare_set(const std::string& key, const braid::store::Bytes& expected,
                                  const braid::store::Bytes& desired) override;
  bool delete_key(const std::string& key) override;
  void wait(const std::vector<std::string>& keys, braid::store::Millis timeout) override;
  using Store::wait;
  bool check(const std::vector<std::string>& keys) override;
  std::int64_t num_keys() override;

 private:
  c10::intrusive_ptr<c10d::Store> s_;
};

}  // namespace braid_torch
