// Work: the handle of an operation. A blocking op returns an already-completed
// Work that holds no allocation; an async op's Work shares its state with the
// runtime, which completes it in the background.
//
// Dropping a Work does not cancel its op (as MPI_Request_free does not): the
// op runs to its end, and its buffers must stay valid until it has. A
// receive whose buffer is freed while its message streams in writes into
// freed memory. After one op of a list fails, wait for the others too
// (wait_all) before their buffers go, on the error path as well.
#pragma once

#include <chrono>
#include <cstdint>
#include <exception>
#include <memory>
#include <vector>

namespace braid {

namespace detail { struct WorkState; }

class Work {
 public:
  Work() = default;  // completed, successful
  static Work completed(int source_rank = -1, std::int64_t received_count = -1) {
    Work w;
    w.source_ = source_rank;
    w.count_ = received_count;
    return w;
  }
  explicit Work(std::shared_ptr<detail::WorkState> s) : state_(std::move(s)) {}

  // Blocks until the op completes; throws its braid::Error if it failed.
  void wait();
  // As wait(), but gives up after `timeout`: returns false if still running.
  bool wait_for(std::chrono::milliseconds timeout);
  // Non-blocking: true once the op finished, successfully or not.
  bool is_completed();
  // True if completed without error.
  bool is_success();
  // The failure, or nullptr.
  std::exception_ptr exception();
  // For a receive: the global rank it received from (known after completion);
  // -1 for other ops.
  int source_rank();
  // For a receive: how many elements of its dtype arrived (as MPI_Get_count
  // tells), which may be fewer than its buffer holds; known after a
  // successful completion, -1 before and for other ops.
  std::int64_t received_count();

 private:
  std::shared_ptr<detail::WorkState> state_;
  int source_ = -1;
  std::int64_t count_ = -1;
};

// Waits for every Work of the list (empty ones count as done). All are waited
// for; then the first failure, in list order, is rethrown.
void wait_all(std::vector<Work>& works);
// Waits until one Work of the list has finished and returns its index (the
// lowest finished one); the others keep running. Throws InvalidArgument for
// an empty list.
std::size_t wait_any(std::vector<Work>& works);

}  // namespace braid
