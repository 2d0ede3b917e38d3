// Multi-process test harness: runs a function as N real rank processes.
//
// The Catch2 process forks one child per rank before any Braid state exists
// (so no threads are copied). A child runs the body, and exits 0 on success
// or 1 after printing the failure; the parent waits with a deadline, kills
// stragglers, and returns every rank's exit status for the test to assert on.
#pragma once

#include <functional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <braid/braid.hpp>

namespace braid_test {

struct RankResult {
  int rank;
  bool exited;      // false: killed by a signal
  int code;         // exit status or signal number
  bool ok() const { return exited && code == 0; }
};

struct RunOptions {
  int timeout_s = 60;               // the whole job; stragglers are killed
  std::vector<std::string> env;     // extra NAME=VALUE for every rank
};

// Runs body(rank, world) in `n` processes with MASTER_ADDR, MASTER_PORT (a
// free port), RANK and WORLD_SIZE set. The body usually starts with
// init_env(); it may also call init_process_group itself.
std::vector<RankResult> run_ranks(int n, const std::function<void(int, int)>& body,
                                  const RunOptions& opts = {});

// The backend the suite runs over: BRAID_TEST_BACKEND ("tcp", "shm"), else
// "auto". meson runs every multi-process test once per backend.
std::string test_backend();
// init_process_group from the environment with a 60 s default timeout.
void init_env(const std::string& backend = test_backend());

// A free TCP port on 127.0.0.1 (bound then released).
int free_port();

// Failure inside a rank: throws, so the rank exits 1 with the message.
[[noreturn]] void fail_rank(const std::string& what);
#define RANK_CHECK(cond)                                                              \
  do {                                                                                \
    if (!(cond)) {                                                                    \
      std::ostringstream os__;                                                        \
      os__ << __FILE__ << ":" << __LINE__ << ": check failed: " #cond;                  \
      ::braid_test::fail_rank(os__.str());                                            \
    }                                                                                 \
  } while (0)
#define RANK_CHECK_MSG(cond, msg)                                                     \
  do {                                                                                \
    if (!(cond)) {                                                                    \
      std::ostringstream os__;                                                        \
      os__ << __FILE__ << ":" << __LINE__ << ": check failed: " #cond << ": " << msg; \
      ::braid_test::fail_rank(os__.str());                                            \
    }                                                                                 \
  } while (0)

// Runs f, expecting a braid::Error with `code` whose message contains `text`.
template <class F>
braid::Error expect_error(F&& f, braid::ErrorCode code, const std::string& text) {
  try {
    f();
  } catch (const braid::Error& e) {
    RANK_CHECK_MSG(e.code() == code, "got code '" << braid::error_code_name(e.code())
                                                  << "' with message: " << e.what());
    RANK_CHECK_MSG(std::string(e.what()).find(text) != std::string::npos,
                   "message '" << e.what() << "' lacks '" << text << "'");
    return e;
  }
  fail_rank("expected a braid::Error containing '" + text + "', got none");
}

// All ranks succeeded; otherwise a readable list of who failed how.
// Ranks 0 and 1 exchange a small (eager) and a large (rendezvous) message
// both ways and check them: after a stranger or a fault was dealt with, the
// real pair still works.
void pair_still_works(int rank);

std::string describe(const std::vector<RankResult>& results);
bool all_ok(const std::vector<RankResult>& results);

}  // namespace braid_test
