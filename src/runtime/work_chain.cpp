// Why this exists: an op built from several async collectives must hand the
// caller one Work, and that Work may complete only once the step after them
// (copying results back) is done; and a buffer an async collective reads may
// be filled off the caller's thread, just before it runs. The async runner
// runs jobs one at a time in submission order, so a job submitted after a
// collective runs after it has finished, and one submitted before runs
// before it starts. chain_after completes a CollectiveWork like any async
// collective does.
#include "src/runtime/work_chain.hpp"

#include <memory>

#include "src/runtime/async_runner.hpp"
#include "src/runtime/context.hpp"

namespace braid::detail {

namespace {
// The runner of the process group the ops run in (a Communicator's own, or
// the default one's): ordering holds only on one runner.
AsyncRunner& runner(const OpOptions& o) {
  Context& ctx = op_context(o);
  std::lock_guard issue(ctx.issue_mu);
  if (!ctx.runner) ctx.runner = std::make_unique<AsyncRunner>(ctx.runner_cpu);
  return *ctx.runner;
}
}  // namespace

void run_on_runner(std::function<void()> job, const OpOptions& o) {
  runner(o).submit([job = std::move(job)] {
    try {
      job();
    } catch (...) {  // documented not to throw; the runner must go on regardless
    }
  });
}

std::exception_ptr wait_each(std::vector<Work>& works) {
  std::exception_ptr first;
  for (Work& w : works) {
    try {
      w.wait();
    } catch (...) {
      if (!first) first = std::current_exception();
    }
  }
  return first;
}

Work chain_after(std::vector<Work> parts, std::function<void()> then, Deadline deadline, const OpOptions& o) {
  auto w = std::make_shared<CollectiveWork>();
  w->op_deadline = deadline;
  runner(o).submit([w, parts = std::move(parts), then = std::move(then)]() mutable {
    // The parts ran before this job, so these waits return at once (or,
    // should a part ever run elsewhere, block until it is done).
    std::exception_ptr first = wait_each(parts);
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
