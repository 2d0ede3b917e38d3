// Steps that run on the async runner, in order with async collectives: one
// Work for an operation made of several async collectives plus a step after
// them (all_reduce_coalesced: one all_reduce per dtype, then the results
// copied out of the packed buffers), and a step before the next collective
// (Bucketer: a bucket packed off the caller's thread).
#pragma once

#include <exception>
#include <functional>
#include <vector>

#include "braid/options.hpp"
#include "braid/work.hpp"
#include "src/common/time.hpp"

namespace braid::detail {

// A Work that completes once every part has and `then` has run. The parts
// must be async collectives already issued by this thread (so they are
// queued on the async runner); `then` is queued behind them and runs on the
// runner's thread when they are done, so the whole completes in the
// background whether or not anyone waits. If a part failed, `then` is
// skipped and the Work fails with the first part's error (in part order);
// if `then` throws, the Work fails with that. `deadline`: the latest of the
// parts' deadlines, for Work::wait()'s own limit.
// `o`: the options the parts were issued with (their group's runner).
Work chain_after(std::vector<Work> parts, std::function<void()> then, Deadline deadline, const OpOptions& o);

// Waits for every Work, failed or not (buffers they use must outlive all of
// them), and returns the first failure in their order, or null.
std::exception_ptr wait_each(std::vector<Work>& works);

// Queues `job` on the async runner: it runs after every async collective
// this process issued before it and before every one issued after it (so it
// may fill a buffer the next async collective reads). It must not throw;
// whatever it captures must stay valid until it has run.
void run_on_runner(std::function<void()> job, const OpOptions& o);

}  // namespace braid::detail
