// Several Works at once: sendrecv (a receive and a send that complete
// together), wait_all and wait_any. Built on the public ops and Work only.
#include <chrono>
#include <exception>
#include <memory>
#include <vector>

#include "braid/ops.hpp"
#include "braid/work.hpp"
#include "src/common/errors.hpp"
#include "src/common/time.hpp"
#include "src/runtime/context.hpp"
#include "src/runtime/work_chain.hpp"
#include "src/runtime/work_state.hpp"

namespace braid {

namespace {

// A Work made of others: done when all are; the first failure (in order) is
// its error; its source is the first part's.
struct AllOf final : detail::WorkState {
  std::vector<Work> parts;
  std::exception_ptr failure;

  bool wait_until(Deadline until) override {
    for (Work& w : parts) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until.at - Clock::now());
      try {
        if (!w.wait_for(std::max(left, std::chrono::milliseconds(0)))) return false;
      } catch (...) {
        if (!failure) failure = std::current_exception();
      }
    }
    return true;
  }
  bool test() override {
    bool all = true;
    for (Work& w : parts) all = w.is_completed() && all;
    return all;
  }
  std::exception_ptr error() override {
    if (failure) return failure;
    for (Work& w : parts)
      if (auto e = w.exception()) return e;
    return nullptr;
  }
  int source() override { return parts.empty() ? -1 : parts.front().source_rank(); }
  std::int64_t received_count() override { return parts.empty() ? -1 : parts.front().received_count(); }
};

}  // namespace

Work sendrecv(const Tensor& send, int dst, const Tensor& recv, int src, const OpOptions& o) {
  OpOptions async = o;
  async.async_op = true;
  // The receive is posted first: a peer's message finds it waiting.
  Work r = irecv(recv, src, async);
  Work s = isend(send, dst, async);
  if (!o.async_op) {
    std::vector<Work> both{r, s};
    wait_all(both);
    return Work::completed(r.source_rank(), r.received_count());
  }
  auto state = std::make_shared<AllOf>();
  state->parts = {std::move(r), std::move(s)};
  // The parts enforce the op's timeout themselves (each fails with Timeout
  // by then); this deadline only bounds waiting on them, a little later.
  state->op_deadline = Deadline::after(op_timeout(o) + std::chrono::seconds(1));
  return Work(std::move(state));
}

void wait_all(std::vector<Work>& works) {
  if (auto first = detail::wait_each(works)) std::rethrow_exception(first);
}

std::size_t wait_any(std::vector<Work>& works) {
  if (works.empty()) fail(ErrorCode::InvalidArgument, "wait_any: the list is empty: expected at least one Work");
  // Every Work's own deadline still applies: a part that times out finishes
  // (failed), so this never waits forever. Each round makes one progress
  // pass per Work, then waits a short slice on one of them (round robin).
  constexpr auto kSlice = std::chrono::milliseconds(1);
  for (std::size_t turn = 0;; ++turn) {
    for (std::size_t i = 0; i < works.size(); ++i)
      if (works[i].is_completed()) return i;
    Work& w = works[turn % works.size()];
    try {
      if (w.wait_for(kSlice)) continue;
    } catch (...) {
      // It finished, failed: the next round returns it.
    }
  }
}

}  // namespace braid
