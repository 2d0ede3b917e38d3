// Why this exists: an op built from several async collectives must hand the
// caller one Work, and that Work may complete only once the step after them
// (copying results back) is done. The async runner runs jobs one at a time in
// submission order, so a job submitted after the parts runs after they have
// finished; it completes a CollectiveWork like any async collective does.
#include "core/work_chain.hpp"

#include <memory>

#include "core/async_runner.hpp"
#include "core/context.hpp"

namespace braid::detail {

Work chain_after(std::vector<Work> parts, std::function<void()> then, Deadline deadline) {
  Context& ctx = context();
  auto w = std::make_shared<CollectiveWork>();
  w->op_deadline = deadline;
  if (!ctx.runner) ctx.runner = std::make_unique<AsyncRunner>();
  ctx.runner->submit([w, parts = std::move(parts), then = std::move(then)]() mutable {
    std::exception_ptr first;
    // Every part is waited for, failed or not: `then` and the caller's
    // buffers must outlive all of them. They ran before this job, so these
    // waits return at once (or, should a part ever run elsewhere, block
    // until it is done).
    for (Work& p : parts) {
      try {
        p.wait();
      } catch (...) {
        if (!first) first = std::current_exception();
      }
    }
    if (!first && then) {
      try {
        then();
      } catch (...) {
        first = std::current_exception();
      }
    }
    w->finish(first);
  });
  return Work(std::move(w));
}

}  // namespace braid::detail
