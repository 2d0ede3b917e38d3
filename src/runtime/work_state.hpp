// WorkState: what an async op's Work waits on. Point-to-point ops wait on one
// Request; collectives (executor) provide their own.
#pragma once

#include <cstdint>
#include <exception>

#include "src/common/time.hpp"

namespace braid::detail {

struct WorkState {
  virtual ~WorkState() = default;
  // Waits until done or `until`; true if done. Enforces the op's own
  // deadline (the op fails with Timeout when it passes).
  virtual bool wait_until(Deadline until) = 0;
  // Non-blocking: one progress pass, true if done.
  virtual bool test() = 0;
  virtual std::exception_ptr error() = 0;
  virtual int source() { return -1; }
  virtual std::int64_t received_count() { return -1; }  // elements, receives only
  Deadline op_deadline{};
};

}  // namespace braid::detail
