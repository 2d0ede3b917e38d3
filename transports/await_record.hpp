// Waiting for a peer's record in the store while a window is set up (the
// shared-memory window's blocks, the RDMA window's queue pairs).
#pragma once

#include <functional>
#include <string>

#include "src/common/time.hpp"
#include "src/store/store.hpp"

namespace braid {

// Waits for `key`, polling rather than blocking on the store: a member
// killed before it wrote must be named within the deadline, not waited for
// until it. `missing` throws at the deadline; `check` (it throws if the
// awaited rank died or the job was aborted, and may ask the store itself)
// runs once the polls have slowed to 100 ms apart: the first polls, 2, 8
// and 32 ms apart, catch a member that is only a moment behind, in few
// requests.
store::Bytes await_record(store::Store& store, const std::string& key, Deadline deadline,
                          const std::function<void()>& check, const std::function<void()>& missing);

}  // namespace braid
