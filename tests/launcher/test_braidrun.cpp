// Tests for the braidrun launcher. They run the real binary (path in $BRAIDRUN) with /bin/sh
// scripts as the ranks and check what a user would see: environment, prefixed output, exit
// status, messages, and how quickly a failing or signalled job ends.

#include <catch2/catch.hpp>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

std::string braidrun_path() {
  const char* p = std::getenv("BRAIDRUN");
  if (!p || !*p) FAIL("set BRAIDRUN to the path of the braidrun binary");
  return p;
}

struct Result {
  int status = -1;  // raw waitpid status
  std::string out, err;
  double seconds = 0;
  int exit_code() const { return WIFEXITED(status) ? WEXITSTATUS(status) : -1; }
};

// A running braidrun whose stdout and stderr are captured. finish() drains both pipes with a
// deadline, so a hung launcher fails the test instead of hanging it.
class Launch {
 public:
  explicit Launch(std::vector<std::string> args) : start_(Clock::now()) {
    args.insert(args.begin(), braidrun_path());
    int out[2], err[2];
    REQUIRE(::pipe2(out, O_CLOEXEC) == 0);
    REQUIRE(::pipe2(err, O_CLOEXEC) == 0);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    pid_ = ::fork();
    REQUIRE(pid_ >= 0);
    if (pid_ == 0) {
      ::dup2(out[1], 1);
      ::dup2(err[1], 2);
      ::execv(argv[0], argv.data());
      ::_exit(126);
    }
    ::close(out[1]);
    ::close(err[1]);
    out_ = out[0];
    err_ = err[0];
  }
  ~Launch() {
    if (pid_ > 0) {  // a failed REQUIRE left it running: don't leak it
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    if (out_ >= 0) ::close(out_);
    if (err_ >= 0) ::close(err_);
  }
  pid_t pid() const { return pid_; }

  Result finish(std::chrono::seconds limit = 60s) {
    Result r;
    auto deadline = start_ + limit;
    while (out_ >= 0 || err_ >= 0) {
      pollfd fds[2] = {{out_, POLLIN, 0}, {err_, POLLIN, 0}};
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      REQUIRE(left.count() > 0);  // braidrun did not finish in time
      ::poll(fds, 2, static_cast<int>(left.count()));
      drain(fds[0], out_, r.out);
      drain(fds[1], err_, r.err);
    }
    REQUIRE(::waitpid(pid_, &r.status, 0) == pid_);
    pid_ = -1;
    r.seconds = std::chrono::duration<double>(Clock::now() - start_).count();
    return r;
  }

 private:
  static void drain(const pollfd& p, int& fd, std::string& into) {
    if (fd < 0 || !p.revents) return;
    char buf[4096];
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n > 0) {
      into.append(buf, static_cast<size_t>(n));
    } else {
      ::close(fd);
      fd = -1;
    }
  }

  Clock::time_point start_;
  pid_t pid_ = -1;
  int out_ = -1, err_ = -1;
};

Result run(std::vector<std::string> args) { return Launch(std::move(args)).finish(); }

// braidrun -n N /bin/sh -c SCRIPT
Result run_sh(int n, const std::string& script, std::vector<std::string> opts = {}) {
  opts.insert(opts.end(), {"-n", std::to_string(n), "/bin/sh", "-c", script});
  return run(std::move(opts));
}

std::vector<std::string> lines(const std::string& s) {
  std::vector<std::string> v;
  std::istringstream in(s);
  for (std::string l; std::getline(in, l);) v.push_back(l);
  return v;
}

bool contains(const std::string& hay, const std::string& needle) {
  return hay.find(needle) != std::string::npos;
}

// A scratch directory for marker files, removed afterwards.
struct TempDir {
  fs::path path;
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "braidrun_test.XXXXXX").string();
    REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
    path = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

}  // namespace

TEST_CASE("every rank starts with the env:// variables", "[braidrun]") {
  constexpr int n = 4;
  Result r = run_sh(n,
                    "echo \"$RANK $WORLD_SIZE $LOCAL_RANK $LOCAL_WORLD_SIZE $MASTER_ADDR "
                    "$MASTER_PORT $BRAIDRUN\"", {"--tag-output"});
  INFO("stdout:\n" << r.out << "stderr:\n" << r.err);
  REQUIRE(r.exit_code() == 0);
  std::set<int> ranks;
  std::set<std::string> ports;
  for (const auto& line : lines(r.out)) {
    int prefix_rank = -1, rank = -1, world = -1, local = -1, local_world = -1, braidrun = -1;
    char addr[64] = {}, port[16] = {};
    REQUIRE(std::sscanf(line.c_str(), "[%d] %d %d %d %d %63s %15s %d", &prefix_rank, &rank,
                        &world, &local, &local_world, addr, port, &braidrun) == 8);
    CHECK(prefix_rank == rank);  // the prefix names the rank that wrote the line
    CHECK(world == n);
    CHECK(local == rank);
    CHECK(local_world == n);
    CHECK(std::string(addr) == "127.0.0.1");
    CHECK(braidrun == 1);
    ranks.insert(rank);
    ports.insert(port);
  }
  CHECK(ranks == std::set<int>{0, 1, 2, 3});
  REQUIRE(ports.size() == 1);  // all ranks rendezvous on the same port
  int p = std::stoi(*ports.begin());
  CHECK(p > 0);
  CHECK(p < 65536);
}

TEST_CASE("--port sets MASTER_PORT", "[braidrun]") {
  Result r = run_sh(2, "echo port=$MASTER_PORT", {"--port", "23456", "-l"});
  REQUIRE(r.exit_code() == 0);
  CHECK(contains(r.out, "[0] port=23456\n"));
  CHECK(contains(r.out, "[1] port=23456\n"));
}

TEST_CASE("with --tag-output, stdout and stderr lines carry the rank prefix", "[braidrun]") {
  Result r = run_sh(3, "printf 'a%s\\nb%s\\n' $RANK $RANK; echo e$RANK >&2", {"--tag-output"});
  INFO("stdout:\n" << r.out << "stderr:\n" << r.err);
  REQUIRE(r.exit_code() == 0);
  for (int rank = 0; rank < 3; ++rank) {
    // Built with append: GCC 12 warns falsely (-Wrestrict) on "[" + std::to_string(...) here.
    const std::string p = std::string("[").append(std::to_string(rank)).append("] ");
    CHECK(contains(r.out, p + "a" + std::to_string(rank) + "\n"));
    CHECK(contains(r.out, p + "b" + std::to_string(rank) + "\n"));
    CHECK(contains(r.err, p + "e" + std::to_string(rank) + "\n"));
    CHECK_FALSE(contains(r.out, p + "e"));  // stderr stays on stderr
  }
}

TEST_CASE("lines from concurrent ranks are never mixed", "[braidrun]") {
  // Each rank writes many lines as fast as it can; every line must arrive whole, with its own
  // rank's prefix, and none may be lost.
  constexpr int n = 4, count = 300;
  Result r = run_sh(n, "i=0; while [ $i -lt 300 ]; do echo \"line-of-rank-$RANK-$i\"; "
                       "i=$((i+1)); done", {"-l"});
  REQUIRE(r.exit_code() == 0);
  std::map<int, int> per_rank;
  for (const auto& line : lines(r.out)) {
    int prefix_rank = -1, rank = -1, i = -1;
    REQUIRE(std::sscanf(line.c_str(), "[%d] line-of-rank-%d-%d", &prefix_rank, &rank, &i) == 3);
    REQUIRE(prefix_rank == rank);
    ++per_rank[rank];
  }
  for (int rank = 0; rank < n; ++rank) CHECK(per_rank[rank] == count);
}

TEST_CASE("a last line without a newline is still printed", "[braidrun]") {
  Result r = run_sh(2, "printf 'first\\nno newline %s' $RANK; printf 'tail%s' $RANK >&2", {"-l"});
  REQUIRE(r.exit_code() == 0);
  CHECK(contains(r.out, "[0] no newline 0\n"));
  CHECK(contains(r.out, "[1] no newline 1\n"));
  CHECK(contains(r.err, "[1] tail1\n"));
}

TEST_CASE("by default output passes through unchanged, and a good job prints nothing of braidrun's", "[braidrun]") {
  Result r = run_sh(2, "echo plain$RANK; echo err$RANK >&2");
  REQUIRE(r.exit_code() == 0);
  CHECK(contains(r.out, "plain0\n"));
  CHECK(contains(r.out, "plain1\n"));
  CHECK_FALSE(contains(r.out, "["));
  CHECK(contains(r.err, "err1\n"));
  CHECK_FALSE(contains(r.err, "braidrun"));
}

TEST_CASE("-x sets a variable for every rank, from a value or from braidrun's environment", "[braidrun]") {
  ::setenv("BRAID_TEST_X_FROM_PARENT", "inherited value", 1);
  Result r = run_sh(2, "echo \"$RANK:$BRAID_TEST_X_ONE:$BRAID_TEST_X_FROM_PARENT\"",
                    {"-x", "BRAID_TEST_X_ONE=a=b", "-x", "BRAID_TEST_X_FROM_PARENT", "-x", "RANK=99"});
  INFO("stdout:\n" << r.out << "stderr:\n" << r.err);
  REQUIRE(r.exit_code() == 0);
  CHECK(contains(r.out, "0:a=b:inherited value\n"));  // RANK stays braidrun's own
  CHECK(contains(r.out, "1:a=b:inherited value\n"));
  ::unsetenv("BRAID_TEST_X_MISSING");
  Result bad = run_sh(1, "true", {"-x", "BRAID_TEST_X_MISSING"});
  CHECK(bad.exit_code() == 2);
  CHECK(contains(bad.err, "no BRAID_TEST_X_MISSING in its environment"));
  Result worse = run_sh(1, "true", {"-x", "1NOT-A-NAME=1"});
  CHECK(worse.exit_code() == 2);
}

TEST_CASE("--version", "[braidrun]") {
  Result r = run({"--version"});
  CHECK(r.exit_code() == 0);
  CHECK(r.out.starts_with("braidrun (Braid) "));
}

TEST_CASE("ranks that ignore SIGTERM are killed after the grace time, and named", "[braidrun]") {
  // Ranks 0 and 2 ignore TERM (their sleeps inherit that) and say so with a
  // file; rank 1 then fails, so braidrun sends TERM, waits its grace time
  // (5 s), then kills the two that are left and names them.
  TempDir dir;
  const std::string d = dir.path.string();
  Result r = run_sh(3, "if [ $RANK = 1 ]; then while [ ! -e " + d + "/ready.0 ] || [ ! -e " + d +
                           "/ready.2 ]; do sleep 0.05; done; exit 4; fi; trap '' TERM; touch " + d +
                           "/ready.$RANK; while :; do sleep 0.1; done");
  INFO("stderr:\n" << r.err);
  CHECK(r.exit_code() == 4);
  CHECK(contains(r.err, "braidrun: ranks 0, 2 still running 5s after SIGTERM: sending SIGKILL"));
  CHECK(r.seconds < 15.0);
}

TEST_CASE("--no-prefix passes output through unchanged", "[braidrun]") {
  Result r = run_sh(2, "echo plain$RANK", {"--no-prefix"});
  REQUIRE(r.exit_code() == 0);
  CHECK(contains(r.out, "plain0\n"));
  CHECK(contains(r.out, "plain1\n"));
  CHECK_FALSE(contains(r.out, "["));
}

TEST_CASE("a rank exiting non-zero ends the job and is named", "[braidrun]") {
  // The other ranks would sleep 30 s; braidrun must end them with SIGTERM right away.
  Result r = run_sh(3, "if [ $RANK = 1 ]; then exit 3; fi; sleep 30");
  INFO("stderr:\n" << r.err);
  CHECK(r.exit_code() == 3);
  CHECK(contains(r.err, "braidrun: rank 1 exited with status 3"));
  CHECK(r.seconds < 4.0);  // well under the sleep, and without waiting for the SIGKILL grace
}

TEST_CASE("a rank killed by a signal is reported with the signal", "[braidrun]") {
  Result r = run_sh(2, "if [ $RANK = 1 ]; then kill -9 $$; fi; sleep 30");
  INFO("stderr:\n" << r.err);
  CHECK(r.exit_code() == 128 + 9);
  CHECK(contains(r.err, "braidrun: rank 1 was killed by signal 9"));
  CHECK(r.seconds < 4.0);
}

TEST_CASE("SIGTERM to braidrun is forwarded to every rank", "[braidrun]") {
  constexpr int n = 3;
  TempDir dir;
  const std::string d = dir.path.string();
  // Each rank traps TERM, writes a marker and exits 0; "ready" files say the trap is set.
  std::string script = "trap 'echo bye > " + d + "/term.$RANK; exit 0' TERM; touch " + d +
                       "/ready.$RANK; while :; do sleep 0.1; done";
  Launch job({"-n", std::to_string(n), "/bin/sh", "-c", script});
  auto deadline = Clock::now() + 20s;
  for (int rank = 0; rank < n; ++rank)
    while (!fs::exists(dir.path / ("ready." + std::to_string(rank)))) {
      REQUIRE(Clock::now() < deadline);
      std::this_thread::sleep_for(10ms);
    }
  auto sent = Clock::now();
  REQUIRE(::kill(job.pid(), SIGTERM) == 0);
  Result r = job.finish();
  INFO("stderr:\n" << r.err);
  CHECK(std::chrono::duration<double>(Clock::now() - sent).count() < 4.0);
  CHECK(r.exit_code() == 128 + SIGTERM);
  for (int rank = 0; rank < n; ++rank)
    CHECK(fs::exists(dir.path / ("term." + std::to_string(rank))));
}

TEST_CASE("--timeout ends a hanging job", "[braidrun]") {
  Result r = run_sh(2, "sleep 30", {"--timeout", "0.5"});
  INFO("stderr:\n" << r.err);
  CHECK(r.exit_code() != 0);
  CHECK(contains(r.err, "timed out"));
  CHECK(r.seconds >= 0.4);
  CHECK(r.seconds < 4.0);
}

namespace {
// "0-2,5" -> {0, 1, 2, 5}
std::vector<int> expand(const std::string& list) {
  std::vector<int> v;
  for (const char* p = list.c_str(); *p;) {
    char* end = nullptr;
    const long lo = std::strtol(p, &end, 10);
    long hi = lo;
    if (*end == '-') hi = std::strtol(end + 1, &end, 10);
    for (long c = lo; c <= hi; ++c) v.push_back(static_cast<int>(c));
    p = *end == ',' ? end + 1 : end;
    if (end == p && *p) break;  // not a list: stop rather than loop
  }
  return v;
}

// The CPUs this test may run on (braidrun inherits them), as the kernel lists them.
std::vector<int> usable_cpus() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind("Cpus_allowed_list:", 0) == 0) return expand(line.substr(line.find(':') + 1));
  FAIL("no Cpus_allowed_list in /proc/self/status");
  return {};
}

// Each rank's CPUs, as the kernel reports them, under braidrun -n n opts.
std::map<int, std::vector<int>> cpus_of_ranks(int n, std::vector<std::string> opts) {
  opts.push_back("--tag-output");
  Result r = run_sh(n, "echo \"$RANK $(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' /proc/self/status)\"",
                    std::move(opts));
  INFO("stdout:\n" << r.out << "stderr:\n" << r.err);
  REQUIRE(r.exit_code() == 0);
  std::map<int, std::vector<int>> of;
  for (const auto& line : lines(r.out)) {
    int prefix = -1, rank = -1;
    char list[256] = {};
    REQUIRE(std::sscanf(line.c_str(), "[%d] %d %255s", &prefix, &rank, list) == 3);
    of[rank] = expand(list);
  }
  REQUIRE(of.size() == static_cast<std::size_t>(n));
  return of;
}
}  // namespace

TEST_CASE("ranks that fit the CPUs get a block of them each; more ranks, or --bind-to none, run anywhere",
          "[braidrun]") {
  const std::vector<int> cpus = usable_cpus();
  const std::size_t c = cpus.size();
  auto block = [&](std::size_t r, std::size_t n) {
    return std::vector<int>(cpus.begin() + static_cast<std::ptrdiff_t>(r * c / n),
                            cpus.begin() + static_cast<std::ptrdiff_t>((r + 1) * c / n));
  };
  SECTION("default, ranks fit: rank r on the r-th of N equal blocks") {
    for (std::size_t n : {std::size_t{1}, std::min<std::size_t>(c, 2), std::min<std::size_t>(c, 4)}) {
      INFO(n << " ranks on " << c << " CPUs");
      auto of = cpus_of_ranks(static_cast<int>(n), {});
      for (std::size_t r = 0; r < n; ++r) CHECK(of[static_cast<int>(r)] == block(r, n));
    }
    // One rank keeps every CPU; two ranks on two or more CPUs never share one.
    CHECK(cpus_of_ranks(1, {})[0] == cpus);
  }
  SECTION("default, more ranks than CPUs: not bound") {
    const int n = static_cast<int>(c) + 1;
    if (n > 64) return;  // a big host: not worth the processes
    for (auto& [rank, set] : cpus_of_ranks(n, {})) CHECK(set == cpus);
  }
  SECTION("--bind-to none") {
    for (auto& [rank, set] : cpus_of_ranks(static_cast<int>(std::min<std::size_t>(c, 4)), {"--bind-to", "none"}))
      CHECK(set == cpus);
  }
  SECTION("--bind-to block with more ranks than CPUs: one CPU each, round robin") {
    const int n = static_cast<int>(c) + 1;
    if (n > 64) return;
    auto of = cpus_of_ranks(n, {"--bind-to=block"});
    for (int r = 0; r < n; ++r) CHECK(of[r] == std::vector<int>{cpus[static_cast<std::size_t>(r) % c]});
  }
}

TEST_CASE("usage errors exit 2 with a message", "[braidrun]") {
  TempDir dir;
  const std::string not_exec = (dir.path / "data.txt").string();
  std::ofstream(not_exec) << "not a program\n";

  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{}, "-n N is required"},
      {{"/bin/true"}, "-n N is required"},
      {{"-n", "0", "/bin/true"}, "'0'"},
      {{"-n", "1025", "/bin/true"}, "1..1024"},
      {{"-n", "two", "/bin/true"}, "'two'"},
      {{"-n"}, "needs a value"},
      {{"-n", "2"}, "missing PROGRAM"},
      {{"-n", "2", "braidrun-no-such-program"}, "not found"},
      {{"-n", "2", not_exec}, "not an executable"},
      {{"--bogus", "-n", "2", "/bin/true"}, "unknown option '--bogus'"},
      {{"--bind-to", "core", "-n", "2", "/bin/true"}, "'block' or 'none', got 'core'"},
  };
  for (const auto& c : cases) {
    Result r = run(c.args);
    std::string joined;
    for (auto& a : c.args) joined += a + " ";
    INFO("args: " << joined << "\nstderr:\n" << r.err);
    CHECK(r.exit_code() == 2);
    CHECK(contains(r.err, c.message));
    CHECK(r.out.empty());
  }
}

TEST_CASE("--help prints usage and exits 0", "[braidrun]") {
  Result r = run({"--help"});
  CHECK(r.exit_code() == 0);
  CHECK(contains(r.out, "usage: braidrun"));
}

TEST_CASE("a program that cannot be executed makes its ranks exit 127", "[braidrun]") {
  // Executable bit but no #! line and not a binary: execve fails with ENOEXEC in the child.
  TempDir dir;
  const std::string prog = (dir.path / "garbage").string();
  std::ofstream(prog) << "\x01\x02 not a program\n";
  REQUIRE(::chmod(prog.c_str(), 0755) == 0);
  Result r = run({"-n", "2", prog});
  INFO("stderr:\n" << r.err);
  CHECK(r.exit_code() == 127);
  CHECK(contains(r.err, "cannot execute"));
  CHECK(contains(r.err, "exited with status 127"));
}
