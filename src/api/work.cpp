#include "braid/work.hpp"

#include "src/runtime/work_state.hpp"

namespace braid {

void Work::wait() {
  if (!state_) return;
  state_->wait_until(state_->op_deadline);
  if (auto e = state_->error()) std::rethrow_exception(e);
}

bool Work::wait_for(std::chrono::milliseconds timeout) {
  if (!state_) return true;
  Deadline d = Deadline::after(timeout);
  if (state_->op_deadline.at < d.at) d = state_->op_deadline;
  if (!state_->wait_until(d)) return false;
  if (auto e = state_->error()) std::rethrow_exception(e);
  return true;
}

bool Work::is_completed() { return !state_ || state_->test(); }

bool Work::is_success() { return is_completed() && (!state_ || !state_->error()); }

std::exception_ptr Work::exception() {
  if (!state_ || !state_->test()) return nullptr;
  return state_->error();
}

int Work::source_rank() {
  if (!state_) return source_;
  return state_->test() ? state_->source() : -1;
}

std::int64_t Work::received_count() {
  if (!state_) return count_;
  return state_->test() && !state_->error() ? state_->received_count() : -1;
}

}  // namespace braid
