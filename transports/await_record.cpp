#include "transports/await_record.hpp"

#include <algorithm>
#include <chrono>
#include <thread>

#include "src/common/errors.hpp"

namespace braid {

store::Bytes await_record(store::Store& store, const std::string& key, Deadline deadline,
                          const std::function<void()>& check, const std::function<void()>& missing) {
  int pause_ms = 2;
  for (;;) {
    if (auto rec = store.try_get(key)) return std::move(*rec);
    if (deadline.expired()) {
      missing();
      fail(ErrorCode::Timeout, "timed out waiting for key '{}' in the store", key);  // missing() did not throw
    }
    if (pause_ms >= 100) check();
    std::this_thread::sleep_for(std::chrono::milliseconds(std::min(pause_ms, deadline.poll_ms(100) + 1)));
    pause_ms = std::min(pause_ms * 4, 100);
  }
}

}  // namespace braid
