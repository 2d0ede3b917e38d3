#include "tests/mp/harness.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

namespace braid_test {

int free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

void fail_rank(const std::string& what) { throw std::runtime_error(what); }

std::string test_backend() {
  const char* b = std::getenv("BRAID_TEST_BACKEND");
  return b && *b ? b : "auto";
}

void init_env(const std::string& backend) {
  braid::init_process_group({.backend = backend, .init_method = "env://",
                             .timeout = std::chrono::seconds(60)});
}

std::vector<RankResult> run_ranks(int n, const std::function<void(int, int)>& body,
                                  const RunOptions& opts) {
  std::fflush(stdout);
  std::fflush(stderr);
  const int port = free_port();
  std::vector<pid_t> pids;
  for (int r = 0; r < n; ++r) {
    pid_t pid = ::fork();
    if (pid == 0) {
      ::setenv("MASTER_ADDR", "127.0.0.1", 1);
      ::setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
      ::setenv("RANK", std::to_string(r).c_str(), 1);
      ::setenv("WORLD_SIZE", std::to_string(n).c_str(), 1);
      for (const auto& kv : opts.env) ::putenv(const_cast<char*>(kv.c_str()));
      int code = 0;
      try {
        body(r, n);
      } catch (const braid::Error& e) {
        std::fprintf(stderr, "[rank %d] braid::Error (%s): %s\n", r, braid::error_code_name(e.code()),
                     e.what());
        code = 1;
      } catch (const std::exception& e) {
        std::fprintf(stderr, "[rank %d] %s\n", r, e.what());
        code = 1;
      }
      if (code == 0 && braid::is_initialized()) {
        try {
          braid::destroy_process_group();
        } catch (const std::exception& e) {
          std::fprintf(stderr, "[rank %d] destroy: %s\n", r, e.what());
          code = 1;
        }
      }
      std::fflush(stdout);
      std::fflush(stderr);
      ::_exit(code);
    }
    pids.push_back(pid);
  }
  std::vector<RankResult> res(static_cast<std::size_t>(n));
  std::vector<bool> done(static_cast<std::size_t>(n), false);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(opts.timeout_s);
  int left = n;
  while (left > 0) {
    for (int r = 0; r < n; ++r) {
      if (done[static_cast<std::size_t>(r)]) continue;
      int st = 0;
      pid_t p = ::waitpid(pids[static_cast<std::size_t>(r)], &st, WNOHANG);
      if (p == pids[static_cast<std::size_t>(r)]) {
        done[static_cast<std::size_t>(r)] = true;
        --left;
        res[static_cast<std::size_t>(r)] =
            WIFEXITED(st) ? RankResult{r, true, WEXITSTATUS(st)} : RankResult{r, false, WTERMSIG(st)};
      }
    }
    if (left == 0) break;
    if (std::chrono::steady_clock::now() > deadline) {
      std::fprintf(stderr, "run_ranks: job exceeded %d s, killing the remaining ranks\n", opts.timeout_s);
      for (int r = 0; r < n; ++r)
        if (!done[static_cast<std::size_t>(r)]) ::kill(pids[static_cast<std::size_t>(r)], SIGKILL);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return res;
}

bool all_ok(const std::vector<RankResult>& results) {
  for (auto& r : results)
    if (!r.ok()) return false;
  return true;
}

std::string describe(const std::vector<RankResult>& results) {
  std::string s;
  for (auto& r : results) {
    s += "rank " + std::to_string(r.rank) + ": ";
    s += r.exited ? "exit " + std::to_string(r.code) : "signal " + std::to_string(r.code);
    s += "; ";
  }
  return s;
}

void pair_still_works(int rank) {
  for (std::size_t n : {std::size_t(10), std::size_t(300000)}) {
    std::vector<int> out(n, rank + 1), in(n, 0);
    auto w = braid::isend(braid::tensor(out), 1 - rank);
    braid::recv(braid::tensor(in), 1 - rank);
    w.wait();
    for (int x : in) RANK_CHECK(x == 2 - rank);
  }
}

}  // namespace braid_test
