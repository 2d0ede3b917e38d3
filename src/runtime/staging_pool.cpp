#include "src/runtime/staging_pool.hpp"

#include <map>
#include <mutex>

namespace braid::detail {

namespace {

constexpr std::size_t kKeepBytes = std::size_t{256} << 20;

class Pool {
 public:
  std::unique_ptr<char[]> take(std::size_t bytes, std::size_t* capacity) {
    {
      std::lock_guard lk(mu_);
      auto it = free_.lower_bound(bytes);
      if (it != free_.end() && it->first / 2 <= bytes) {
        *capacity = it->first;
        auto mem = std::move(it->second);
        idle_ -= it->first;
        free_.erase(it);
        return mem;
      }
    }
    *capacity = bytes;
    return std::unique_ptr<char[]>(new char[bytes]);  // uninitialised: the caller writes before it reads
  }

  void give(std::unique_ptr<char[]> mem, std::size_t capacity) {
    std::lock_guard lk(mu_);
    if (capacity > kKeepBytes) return;
    while (idle_ + capacity > kKeepBytes && !free_.empty()) {  // drop the largest idle ones first
      auto last = std::prev(free_.end());
      idle_ -= last->first;
      free_.erase(last);
    }
    idle_ += capacity;
    free_.emplace(capacity, std::move(mem));
  }

 private:
  std::mutex mu_;
  std::multimap<std::size_t, std::unique_ptr<char[]>> free_;
  std::size_t idle_ = 0;
};

Pool& pool() {
  static Pool* p = new Pool;  // never destroyed: buffers may be released during exit
  return *p;
}

}  // namespace

std::shared_ptr<char[]> staging_buffer(std::size_t bytes) {
  if (bytes == 0) bytes = 1;
  std::size_t capacity = 0;
  char* raw = pool().take(bytes, &capacity).release();
  return std::shared_ptr<char[]>(raw, [capacity](char* p) { pool().give(std::unique_ptr<char[]>(p), capacity); });
}

}  // namespace braid::detail
