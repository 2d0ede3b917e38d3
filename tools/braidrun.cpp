// braidrun: start N ranks of a program on this host with the env:// rendezvous variables set.
//
//   braidrun [options] -n N PROGRAM [ARGS...]
//
// Why one file of ~700 lines: braidrun must build with nothing but fmt and
// libc (it starts everything else, so it cannot need the library it
// launches) and stay one self-contained program to copy to a host; its parts
// (options, placement, spawning, the output and signal loop) share one Job.
//
// Each rank gets MASTER_ADDR=127.0.0.1, MASTER_PORT, RANK, WORLD_SIZE, LOCAL_RANK,
// LOCAL_WORLD_SIZE and BRAIDRUN=1 on top of braidrun's own environment (and a new
// BRAID_JOB_TOKEN unless one is set: ensure_job_token). When the ranks fit the
// CPUs braidrun may use, those CPUs are cut into N equal contiguous blocks and rank r is bound to
// block r (one CPU each when N equals the CPU count): an unbound pair of polling ranks can be put
// on one CPU by the scheduler and stay there, taking turns at each exchange (measured here:
// 8-byte all_reduce, 2 ranks, every other call 10 us). Blocks, not single CPUs, leave a rank's
// own threads room on a big host. Open MPI binds to a core per rank at 2 ranks, and to sockets
// above.
// The ranks' output passes through unchanged, and braidrun prints nothing of its own when the
// job succeeds (as mpirun and srun do); --tag-output (-l) prefixes each line with "[R] ". The
// first rank to fail takes the whole job down, and its status becomes braidrun's exit status, so
// a script or CI step sees the failure. SIGINT and SIGTERM are forwarded to every rank; ranks
// still running after a grace time are killed, and braidrun names them.
//
// Depends only on fmt and libc on purpose: it is the thing that starts everything else, so it
// must not need the library it launches.

#include <fcntl.h>
#include <netinet/in.h>
#include <sched.h>
#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "src/common/fd.hpp"  // header-only: braidrun links no library

extern char** environ;

namespace {

using braid::Fd;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

constexpr int kMaxRanks = 1024;
constexpr int kUsageExit = 2;
constexpr int kTimeoutExit = 124;  // what timeout(1) uses, so scripts recognise it
constexpr auto kGrace = 5s;        // between SIGTERM (or a forwarded signal) and SIGKILL
constexpr auto kDrain = 1s;        // how long to read pipes after every rank has exited
constexpr size_t kMaxPending = 1 << 20;  // an unterminated line longer than this is cut

constexpr const char* kUsage =
    "usage: braidrun [options] -n N PROGRAM [ARGS...]\n"
    "Starts N ranks of PROGRAM on this host with MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE,\n"
    "LOCAL_RANK, LOCAL_WORLD_SIZE and BRAIDRUN=1 set, and a new BRAID_JOB_TOKEN (the job's\n"
    "secret) unless BRAID_JOB_TOKEN or BRAID_JOB_TOKEN_FILE is set (an empty one: no secret).\n"
    "  -n, --np N          number of ranks (1..1024)\n"
    "  --port P            MASTER_PORT to use (default: a free port; with rank 0 on another\n"
    "                      host, one below the ephemeral range)\n"
    "  --timeout SECONDS   kill the job after this long (exit status 124)\n"
    "  -l, --tag-output    prefix each line of a rank's output with \"[R] \"\n"
    "  --no-prefix         pass rank output through unchanged (the default; kept for old scripts)\n"
    "  --hosts H1:N1,H2:N2 run N1 ranks on host H1, then N2 on H2, ... (-n defaults to the sum);\n"
    "                      a host named localhost or this host's name runs here, others through\n"
    "                      the agent\n"
    "  --hostfile FILE     the same from a file: one host per line, \"HOST\", \"HOST:N\" or\n"
    "                      \"HOST slots=N\"; '#' starts a comment\n"
    "  --agent CMD         how to start a rank on another host: CMD HOST env VAR=VALUE...\n"
    "                      PROGRAM ARGS (default: ssh; \"tools/cluster exec\" for emulated hosts)\n"
    "  --master-addr ADDR  MASTER_ADDR for the ranks (default: 127.0.0.1 on one host, else the\n"
    "                      first host's name; rank 0 runs there and hosts the store)\n"
    "  -x VAR[=VALUE]      set VAR for every rank: to VALUE, or to braidrun's own value of VAR\n"
    "                      (ranks inherit braidrun's whole environment anyway; -x also names\n"
    "                      what travels to other hosts)\n"
    "  --bind-to block|none block: the CPUs braidrun may use are cut into N equal contiguous\n"
    "                      blocks and rank r runs on block r (the default when N is at most that\n"
    "                      many CPUs; with more ranks, rank r gets CPU r mod the count); none:\n"
    "                      ranks run anywhere (the default otherwise)\n"
    "  -h, --help          show this help\n"
    "  --version           show braidrun's version\n";

// Writes everything or gives up quietly: if our own stdout is gone (EPIPE) the ranks must still
// be drained and reaped, so output loss is not an error.
void write_all(int fd, std::string_view s) {
  while (!s.empty()) {
    ssize_t n = ::write(fd, s.data(), s.size());
    if (n > 0) {
      s.remove_prefix(static_cast<size_t>(n));
    } else if (n < 0 && errno == EAGAIN) {  // inherited a non-blocking fd: wait, don't spin
      pollfd p{fd, POLLOUT, 0};
      ::poll(&p, 1, 100);
    } else if (n == 0 || errno != EINTR) {
      return;
    }
  }
}

template <typename... A>
void say(fmt::format_string<A...> f, A&&... a) {
  write_all(2, "braidrun: " + fmt::format(f, std::forward<A>(a)...) + "\n");
}

[[noreturn]] void usage_error(const std::string& msg) {
  write_all(2, fmt::format("braidrun: {}\n(run 'braidrun --help' for usage)\n", msg));
  std::exit(kUsageExit);
}

template <typename T>
T parse_number(std::string_view opt, std::string_view text, T lo, T hi, const char* what) {
  T v{};
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc{} || end != text.data() + text.size() || !(v >= lo && v <= hi))  // NaN too
    usage_error(fmt::format("{} expects {}, got '{}'", opt, what, text));
  return v;
}

struct Options {
  int nranks = 0;
  int port = 0;  // 0: pick a free one
  std::optional<double> timeout_s;
  bool prefix = false;
  std::optional<bool> bind;       // unset: bind when the ranks fit the CPUs
  std::vector<std::pair<std::string, std::string>> exports;  // -x VAR[=VALUE]
  std::vector<std::pair<std::string, int>> hosts;  // --hosts / --hostfile: name, ranks there
  std::string agent = "ssh";
  std::string master_addr;  // empty: chosen from the hosts
  std::vector<std::string> argv;  // PROGRAM ARGS...
};

// "H1:N1,H2" (N defaults to 1) appended to o.hosts.
void add_hosts(Options& o, std::string_view list, char sep, const char* what) {
  while (!list.empty()) {
    const auto end = list.find(sep);
    std::string_view item = list.substr(0, end);
    list = end == std::string_view::npos ? std::string_view{} : list.substr(end + 1);
    if (item.empty()) continue;
    const auto colon = item.rfind(':');
    std::string name(item.substr(0, colon));
    int n = 1;
    if (colon != std::string_view::npos)
      n = parse_number(what, item.substr(colon + 1), 1, kMaxRanks, "HOST:N with N in 1..1024");
    if (name.empty()) usage_error(fmt::format("{}: an empty host name in '{}'", what, item));
    o.hosts.emplace_back(std::move(name), n);
  }
}

Options parse_args(int argc, char** argv) {
  Options o;
  int i = 1;
  // Options end at the first non-option word: everything after PROGRAM belongs to PROGRAM.
  for (; i < argc && argv[i][0] == '-'; ++i) {
    std::string_view arg = argv[i], value;
    if (arg == "--") {  // lets PROGRAM start with '-'
      ++i;
      break;
    }
    bool has_inline = false;
    if (auto eq = arg.find('='); arg.starts_with("--") && eq != arg.npos) {
      value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
      has_inline = true;
    }
    auto take_value = [&]() -> std::string_view {
      if (has_inline) return value;
      if (i + 1 >= argc) usage_error(fmt::format("{} needs a value", arg));
      return argv[++i];
    };
    if (arg == "-h" || arg == "--help") {
      write_all(1, kUsage);
      std::exit(0);
    } else if (arg == "--version" && !has_inline) {
      write_all(1, fmt::format("braidrun (Braid) {}\n", BRAID_VERSION_STRING));
      std::exit(0);
    } else if ((arg == "-l" || arg == "--tag-output") && !has_inline) {
      o.prefix = true;
    } else if (arg == "--hosts") {
      add_hosts(o, take_value(), ',', "--hosts");
    } else if (arg == "--hostfile") {
      const std::string path(take_value());
      std::FILE* f = std::fopen(path.c_str(), "r");
      if (!f) usage_error(fmt::format("--hostfile {}: {}", path, std::strerror(errno)));
      char line[512];
      while (std::fgets(line, sizeof line, f)) {
        std::string l(line);
        l = l.substr(0, l.find('#'));
        // "HOST slots=N" is "HOST:N".
        if (auto sp = l.find(" slots="); sp != std::string::npos) l = l.substr(0, sp) + ":" + l.substr(sp + 7);
        l.erase(std::remove_if(l.begin(), l.end(), [](char ch) { return std::isspace(static_cast<unsigned char>(ch)); }),
                l.end());
        if (!l.empty()) add_hosts(o, l, ',', "--hostfile");
      }
      std::fclose(f);
    } else if (arg == "--agent") {
      o.agent = std::string(take_value());
      if (o.agent.empty()) usage_error("--agent needs a command");
    } else if (arg == "--master-addr") {
      o.master_addr = std::string(take_value());
    } else if (arg == "-x") {
      const std::string_view v = take_value();
      const auto eq = v.find('=');
      std::string name(v.substr(0, eq));
      if (name.empty() || name.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_") !=
                              std::string::npos || (name[0] >= '0' && name[0] <= '9'))
        usage_error(fmt::format("-x expects VAR or VAR=VALUE with VAR a variable name, got '{}'", v));
      if (eq != std::string_view::npos) {
        o.exports.emplace_back(name, std::string(v.substr(eq + 1)));
      } else if (const char* mine = std::getenv(name.c_str())) {
        o.exports.emplace_back(name, mine);
      } else {
        usage_error(fmt::format("-x {}: braidrun has no {} in its environment to pass on (use -x {}=VALUE)", name,
                                name, name));
      }
    } else if (arg == "-n" || arg == "--np") {
      o.nranks = parse_number(arg, take_value(), 1, kMaxRanks, "a rank count in 1..1024");
    } else if (arg == "--port") {
      o.port = parse_number(arg, take_value(), 1, 65535, "a port in 1..65535");
    } else if (arg == "--timeout") {
      o.timeout_s = parse_number(arg, take_value(), 1e-3, 1e9, "a positive number of seconds");
    } else if (arg == "--no-prefix" && !has_inline) {
      o.prefix = false;
    } else if (arg == "--bind-to") {
      const std::string_view v = take_value();
      if (v != "block" && v != "none") usage_error(fmt::format("--bind-to expects 'block' or 'none', got '{}'", v));
      o.bind = v == "block";
    } else {
      usage_error(fmt::format("unknown option '{}'", argv[i]));
    }
  }
  if (!o.hosts.empty()) {
    int slots = 0;
    for (const auto& h : o.hosts) slots += h.second;
    if (o.nranks == 0) o.nranks = std::min(slots, kMaxRanks);
    if (o.nranks > slots)
      usage_error(fmt::format("-n {} asks for more ranks than the {} slots of --hosts/--hostfile", o.nranks, slots));
  }
  if (o.nranks == 0) usage_error("-n N is required (number of ranks, 1..1024)");
  if (i >= argc) usage_error("missing PROGRAM to run");
  o.argv.assign(argv + i, argv + argc);
  return o;
}

// The CPUs this process may run on, in order. The set is sized up until the kernel's mask fits
// (it says EINVAL while the set is smaller than its own).
std::vector<int> usable_cpus() {
  std::vector<int> cpus;
  for (int n = std::max(static_cast<int>(::sysconf(_SC_NPROCESSORS_CONF)), CPU_SETSIZE); n <= (1 << 18); n *= 2) {
    cpu_set_t* set = CPU_ALLOC(n);
    if (!set) break;
    const size_t size = CPU_ALLOC_SIZE(n);
    const int rc = ::sched_getaffinity(0, size, set);
    const int err = errno;
    if (rc == 0)
      for (int c = 0; c < n; ++c)
        if (CPU_ISSET_S(c, size, set)) cpus.push_back(c);
    CPU_FREE(set);
    if (rc == 0 || err != EINVAL) break;
  }
  return cpus;
}

// Each rank's CPUs under --bind-to block; empty lists when not binding.
// `local` ranks share this host's CPUs (the others run elsewhere).
std::vector<std::vector<int>> rank_cpus(const Options& o, int local) {
  const std::vector<int> cpus = usable_cpus();
  const size_t c = cpus.size(), n = static_cast<size_t>(local);
  const bool bind = o.bind.value_or(c > 0 && n <= c);
  std::vector<std::vector<int>> of(n);
  if (!bind || c == 0) return of;
  for (size_t r = 0; r < n; ++r) {
    if (n > c) {
      of[r] = {cpus[r % c]};
      continue;
    }
    of[r].assign(cpus.begin() + static_cast<std::ptrdiff_t>(r * c / n),
                 cpus.begin() + static_cast<std::ptrdiff_t>((r + 1) * c / n));
  }
  return of;
}

bool is_executable_file(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

// Resolves PROGRAM the way execvp would, but up front: a typo should be a usage error (exit 2)
// reported once, not N copies of exit 127 from the ranks.
std::string resolve_program(const std::string& prog) {
  if (prog.find('/') != std::string::npos) {
    if (!is_executable_file(prog)) usage_error(fmt::format("'{}' is not an executable file", prog));
    return prog;
  }
  const char* env_path = std::getenv("PATH");
  std::string_view path = env_path && *env_path ? env_path : "/usr/local/bin:/usr/bin:/bin";
  while (true) {
    auto colon = path.find(':');
    std::string dir(path.substr(0, colon));
    std::string candidate = (dir.empty() ? "." : dir) + "/" + prog;
    if (is_executable_file(candidate)) return candidate;
    if (colon == std::string_view::npos) break;
    path.remove_prefix(colon + 1);
  }
  usage_error(fmt::format("program '{}' not found in PATH", prog));
}

// A TCP socket bound to addr:port (port 0: one the kernel picks); invalid
// where the socket or the bind failed.
Fd bound_socket(in_addr_t addr, int port) {
  Fd s(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(addr);
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  if (s.valid() && ::bind(s.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) s = Fd();
  return s;
}

// Asks the kernel for a free port. Someone else may take it before rank 0 binds it; that race is
// inherent to env:// rendezvous and rare on one host (--port avoids it).
int kernel_free_port() {
  Fd s = bound_socket(INADDR_LOOPBACK, 0);
  sockaddr_in a{};
  socklen_t len = sizeof a;
  if (!s.valid() || ::getsockname(s.get(), reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    say("cannot pick a free port: {} (use --port)", std::strerror(errno));
    std::exit(1);
  }
  return ntohs(a.sin_port);
}

// The port for a store that rank 0 hosts on another host. A port free here
// says nothing of that host, and one from the kernel's ephemeral range is
// the likeliest to be held there: by an outgoing connection of that host's
// own (a rank of an earlier job), which no SO_REUSEADDR gets past (a sweep
// of a few hundred jobs across emulated hosts met it once). So: a random
// port below the ephemeral range (net.ipv4.ip_local_port_range), which
// connections never take unasked, and free here too; the kernel's pick if
// none is.
int port_for_another_host() {
  int low = 32768;
  if (FILE* f = std::fopen("/proc/sys/net/ipv4/ip_local_port_range", "r")) {
    int a = 0, b = 0;
    if (std::fscanf(f, "%d %d", &a, &b) == 2 && a > 1024) low = a;
    std::fclose(f);
  }
  const int first = std::min(20000, low / 2);
  if (low - first < 100) return kernel_free_port();
  std::mt19937 gen(std::random_device{}());
  std::uniform_int_distribution<int> pick(first, low - 1);
  for (int tries = 0; tries < 32; ++tries) {
    const int port = pick(gen);
    if (bound_socket(INADDR_ANY, port).valid()) return port;
  }
  return kernel_free_port();
}

// One of a rank's output pipes. Bytes are held until a newline so that lines from different
// ranks never interleave mid-line.
struct Stream {
  int rank;
  int dest;  // 1 or 2
  Fd fd;
  std::string pending;
};

struct Rank {
  pid_t pid = -1;  // also its process-group id
  bool running = false;
};

enum class Teardown { None, Failure, Signal, Timeout };

class Job {
 public:
  explicit Job(Options o) : opt_(std::move(o)) {}

  // A secret per job (src/common/auth.hpp): unless the caller set
  // BRAID_JOB_TOKEN (an empty one opts out) or BRAID_JOB_TOKEN_FILE, 32
  // random bytes as hex, in the environment every rank inherits (and that
  // travels to other hosts with Braid's variables). Only where the library
  // was built with libcrypto: without it a rank refuses a job with a secret.
  static void ensure_job_token() {
#if BRAIDRUN_TOKENS
    if (std::getenv("BRAID_JOB_TOKEN") || std::getenv("BRAID_JOB_TOKEN_FILE")) return;
    unsigned char bytes[32];
    Fd rnd(::open("/dev/urandom", O_RDONLY | O_CLOEXEC));
    if (!rnd.valid() || ::read(rnd.get(), bytes, sizeof bytes) != static_cast<ssize_t>(sizeof bytes)) {
      say("cannot read /dev/urandom for the job's secret ({}); the job runs without one", std::strerror(errno));
      return;
    }
    std::string hex;
    for (unsigned char b : bytes) hex += fmt::format("{:02x}", b);
    ::setenv("BRAID_JOB_TOKEN", hex.c_str(), 1);
#endif
  }

  int run() {
    place_ranks();
    ensure_job_token();
    // A program for other hosts need not exist here: only local ranks' is resolved.
    const bool any_local = std::any_of(places_.begin(), places_.end(), [](const Place& p) { return !p.remote; });
    const std::string program = any_local ? resolve_program(opt_.argv[0]) : opt_.argv[0];
    const int port = opt_.port ? opt_.port : places_.front().remote ? port_for_another_host() : kernel_free_port();
    // Signals arrive through a signalfd, so poll() is the only place we wait. They are blocked
    // before the first fork so none is lost, and unblocked again in each child.
    sigset_t handled;
    sigemptyset(&handled);
    // SIGHUP too: ranks are outside the terminal's foreground group and would miss a hangup.
    for (int s : {SIGINT, SIGTERM, SIGHUP, SIGCHLD}) sigaddset(&handled, s);
    ::sigprocmask(SIG_BLOCK, &handled, &old_mask_);
    sigfd_ = Fd(::signalfd(-1, &handled, SFD_CLOEXEC | SFD_NONBLOCK));
    if (!sigfd_.valid()) {
      say("signalfd failed: {}", std::strerror(errno));
      return 1;
    }
    // A closed stdout must not kill braidrun while ranks still run; write_all drops output then.
    ::signal(SIGPIPE, SIG_IGN);

    if (std::any_of(places_.begin(), places_.end(), [](const Place& p) { return p.remote; }))
      agent_path_ = resolve_program(opt_.agent.substr(0, opt_.agent.find(' ')));
    // Binding is this host's business: its ranks divide its CPUs among
    // themselves; ranks elsewhere run unbound.
    const int local = static_cast<int>(
        std::count_if(places_.begin(), places_.end(), [](const Place& p) { return !p.remote; }));
    const std::vector<std::vector<int>> local_cpus = rank_cpus(opt_, local);
    std::vector<std::vector<int>> cpus_of(static_cast<size_t>(opt_.nranks));
    for (int r = 0, l = 0; r < opt_.nranks; ++r)
      if (!places_[static_cast<size_t>(r)].remote) cpus_of[static_cast<size_t>(r)] = local_cpus[static_cast<size_t>(l++)];
    for (int r = 0; r < opt_.nranks; ++r) spawn(r, program, port, cpus_of[static_cast<size_t>(r)]);
    if (opt_.timeout_s)
      job_deadline_ = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                         std::chrono::duration<double>(*opt_.timeout_s));
    loop();
    switch (teardown_) {
      case Teardown::None: return 0;
      case Teardown::Failure: return exit_code_;
      case Teardown::Signal: return 128 + exit_code_;
      case Teardown::Timeout: return kTimeoutExit;
    }
    return 1;
  }

 private:
  // Where each rank runs: hosts are filled in order (--hosts h1:2,h2:2: ranks
  // 0 and 1 on h1, 2 and 3 on h2); without --hosts, all here.
  struct Place {
    std::string host;
    int local_rank = 0, local_size = 1;
    bool remote = false;
  };
  std::vector<Place> places_;
  std::string master_addr_ = "127.0.0.1";

  // What braidrun sets for every rank (rank_env, in this order); they also
  // travel to other hosts.
  static constexpr const char* kOurVariables[] = {"MASTER_ADDR", "MASTER_PORT",      "RANK",    "WORLD_SIZE",
                                                  "LOCAL_RANK",  "LOCAL_WORLD_SIZE", "BRAIDRUN"};
  static bool is_ours(std::string_view key) {
    return std::any_of(std::begin(kOurVariables), std::end(kOurVariables), [&](const char* v) { return key == v; });
  }
  std::string agent_path_;  // the agent's program, resolved (when any rank is remote)

  static bool is_this_host(const std::string& h) {
    char name[256] = {};
    ::gethostname(name, sizeof name - 1);
    return h == "localhost" || h == "127.0.0.1" || h == name;
  }

  void place_ranks() {
    places_.assign(static_cast<size_t>(opt_.nranks), Place{});
    if (opt_.hosts.empty()) {
      for (int r = 0; r < opt_.nranks; ++r) places_[static_cast<size_t>(r)] = {"", r, opt_.nranks, false};
    } else {
      int r = 0;
      for (const auto& [host, slots] : opt_.hosts) {
        const int here = std::min(slots, opt_.nranks - r);
        for (int l = 0; l < here; ++l, ++r) places_[static_cast<size_t>(r)] = {host, l, here, !is_this_host(host)};
        if (r == opt_.nranks) break;
      }
      // Rank 0 hosts the store: its host's name, unless every rank is here.
      const bool all_here = std::none_of(places_.begin(), places_.end(), [](const Place& p) { return p.remote; });
      if (!all_here) master_addr_ = places_[0].host;
    }
    if (!opt_.master_addr.empty()) master_addr_ = opt_.master_addr;
  }

  std::vector<std::string> rank_env(int rank, int port) const {
    const Place& at = places_[static_cast<size_t>(rank)];
    const std::pair<const char*, std::string> ours[std::size(kOurVariables)] = {
        {kOurVariables[0], master_addr_},        {kOurVariables[1], std::to_string(port)},
        {kOurVariables[2], std::to_string(rank)}, {kOurVariables[3], std::to_string(opt_.nranks)},
        {kOurVariables[4], std::to_string(at.local_rank)}, {kOurVariables[5], std::to_string(at.local_size)},
        {kOurVariables[6], "1"}};
    // braidrun's environment, then -x's variables over it, then ours over both.
    auto overridden = [&](std::string_view key) {
      return is_ours(key) ||
             std::any_of(opt_.exports.begin(), opt_.exports.end(), [&](auto& p) { return key == p.first; });
    };
    std::vector<std::string> env;
    for (char** e = environ; *e; ++e) {
      std::string_view kv = *e;
      if (!overridden(kv.substr(0, kv.find('=')))) env.emplace_back(kv);
    }
    for (auto& [k, v] : opt_.exports)
      if (!is_ours(k)) env.push_back(fmt::format("{}={}", k, v));
    for (auto& [k, v] : ours) env.push_back(fmt::format("{}={}", k, v));
    return env;
  }

  void spawn(int rank, const std::string& program, int port, const std::vector<int>& cpus) {
    // Everything the child needs is built before fork, so the child only makes syscalls.
    const int set_cpus = std::max(cpus.empty() ? 0 : cpus.back() + 1, CPU_SETSIZE);
    cpu_set_t* set = CPU_ALLOC(set_cpus);
    const size_t set_size = CPU_ALLOC_SIZE(set_cpus);
    if (set && !cpus.empty()) {
      CPU_ZERO_S(set_size, set);
      for (int c : cpus) CPU_SET_S(c, set_size, set);
    }
    std::vector<std::string> env = rank_env(rank, port);
    std::vector<std::string> words = opt_.argv;
    std::string exe = program;
    const Place& at = places_[static_cast<size_t>(rank)];
    if (at.remote) {
      // AGENT HOST env VAR=VALUE... PROGRAM ARGS: Braid's variables (ours,
      // -x's, and every BRAID_* here) travel explicitly; nothing else does.
      std::vector<std::string> agent_cmd;
      for (std::string_view a = opt_.agent; !a.empty();) {
        const auto sp = a.find(' ');
        if (sp != 0) agent_cmd.emplace_back(a.substr(0, sp));
        a = sp == std::string_view::npos ? std::string_view{} : a.substr(sp + 1);
      }
      words = agent_cmd;
      words.push_back(at.host);
      words.push_back("env");
      for (const auto& kv : env) {
        const std::string_view key = std::string_view(kv).substr(0, kv.find('='));
        const bool travels = key.starts_with("BRAID") || is_ours(key) ||
                             std::any_of(opt_.exports.begin(), opt_.exports.end(),
                                         [&](const auto& x) { return key == x.first; });
        if (travels) words.push_back(kv);
      }
      words.insert(words.end(), opt_.argv.begin(), opt_.argv.end());
      exe = agent_path_;
    }
    std::vector<char*> envp, argv;
    for (auto& s : env) envp.push_back(s.data());
    for (auto& s : words) argv.push_back(s.data());
    envp.push_back(nullptr);
    argv.push_back(nullptr);

    int out[2] = {-1, -1}, err[2] = {-1, -1};
    if (opt_.prefix && (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0)) {
      say("pipe failed: {}", std::strerror(errno));
      std::exit(1);
    }
    pid_t pid = ::fork();
    if (pid < 0) {
      say("fork failed for rank {}: {}", rank, std::strerror(errno));
      std::exit(1);  // ranks already started are orphaned, but would fail rendezvous and exit
    }
    if (pid == 0) {
      // Own process group: Ctrl-C at a terminal reaches only braidrun, which forwards it once,
      // and a kill of the group also reaches anything the rank started (e.g. a shell's child).
      ::setpgid(0, 0);
      // Ranks are not in the foreground group, so reading the terminal would stop them.
      int devnull = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
      if (devnull >= 0) ::dup2(devnull, 0);
      if (opt_.prefix) {
        ::dup2(out[1], 1);
        ::dup2(err[1], 2);
      }
      ::sigprocmask(SIG_SETMASK, &old_mask_, nullptr);
      ::signal(SIGPIPE, SIG_DFL);
      // A CPU that cannot be had (taken offline since) leaves the rank unbound, not dead.
      if (set && !cpus.empty()) ::sched_setaffinity(0, set_size, set);
      ::execve(exe.c_str(), argv.data(), envp.data());
      say("rank {}: cannot execute '{}': {}", rank, exe, std::strerror(errno));
      ::_exit(127);
    }
    if (set) CPU_FREE(set);
    ::setpgid(pid, pid);  // also from the parent, so a signal sent right away finds the group
    ranks_.push_back({pid, true});
    ++running_;
    if (opt_.prefix) {
      ::close(out[1]);
      ::close(err[1]);
      streams_.push_back({rank, 1, Fd(out[0]), {}});
      streams_.push_back({rank, 2, Fd(err[0]), {}});
    }
  }

  // Sends sig to the group of every rank that is running or may still have children holding
  // its pipes open.
  void signal_all(int sig) {
    for (size_t r = 0; r < ranks_.size(); ++r) {
      bool pipes_open = std::any_of(streams_.begin(), streams_.end(), [&](const Stream& s) {
        return s.rank == static_cast<int>(r) && s.fd.valid();
      });
      if (ranks_[r].running || pipes_open) ::kill(-ranks_[r].pid, sig);
    }
  }

  // Every way the job ends early goes through here: signal the ranks, then SIGKILL after kGrace.
  void begin_teardown(Teardown why, int sig) {
    teardown_ = why;
    signal_all(sig);
    kill_deadline_ = Clock::now() + kGrace;
  }

  void reap() {
    int status = 0;
    pid_t pid;
    while ((pid = ::waitpid(-1, &status, WNOHANG)) > 0) {
      auto it = std::find_if(ranks_.begin(), ranks_.end(), [&](auto& r) { return r.pid == pid; });
      if (it == ranks_.end()) continue;
      it->running = false;
      if (--running_ == 0) drain_deadline_ = Clock::now() + kDrain;
      bool failed = !WIFEXITED(status) || WEXITSTATUS(status) != 0;
      // Only the first failure is reported: later ones are usually caused by our SIGTERM or by
      // peers losing their connection to the failed rank.
      if (!failed || teardown_ != Teardown::None) continue;
      int rank = static_cast<int>(it - ranks_.begin());
      if (WIFEXITED(status)) {
        exit_code_ = WEXITSTATUS(status);
        say("rank {} exited with status {}", rank, exit_code_);
      } else {
        int sig = WTERMSIG(status);
        exit_code_ = 128 + sig;
        say("rank {} was killed by signal {} ({})", rank, sig, ::strsignal(sig));
      }
      begin_teardown(Teardown::Failure, SIGTERM);
    }
  }

  void on_signal(int sig) {
    if (teardown_ == Teardown::None) {
      say("got SIG{}, forwarding it to all ranks", ::sigabbrev_np(sig));
      exit_code_ = sig;
      begin_teardown(Teardown::Signal, sig);
    } else {
      // A second Ctrl-C means the user does not want to wait out the grace period.
      say("got another signal, killing all ranks");
      signal_all(SIGKILL);
    }
  }

  void emit(Stream& s, std::string_view text) {
    if (text.empty()) return;
    const std::string prefix = fmt::format("[{}] ", s.rank);
    std::string out;
    size_t start = 0;
    for (size_t nl; (nl = text.find('\n', start)) != text.npos; start = nl + 1)
      out.append(prefix).append(text.substr(start, nl + 1 - start));
    if (start < text.size()) out.append(prefix).append(text.substr(start)).push_back('\n');
    write_all(s.dest, out);  // one write per batch keeps lines whole on our side
  }

  // Reads what is available; writes out the complete lines and keeps the rest.
  void read_stream(Stream& s) {
    char buf[65536];
    ssize_t n = ::read(s.fd.get(), buf, sizeof buf);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
    if (n <= 0) return close_stream(s);
    s.pending.append(buf, static_cast<size_t>(n));
    size_t last_nl = s.pending.rfind('\n');
    if (last_nl != std::string::npos) {
      emit(s, std::string_view(s.pending).substr(0, last_nl + 1));
      s.pending.erase(0, last_nl + 1);
    }
    if (s.pending.size() > kMaxPending) {  // bound memory for output that never ends a line
      emit(s, s.pending);
      s.pending.clear();
    }
  }

  void close_stream(Stream& s) {
    emit(s, s.pending);  // a last line without '\n' still gets printed, with one added
    s.pending.clear();
    s.fd.reset();
  }

  void loop() {
    while (true) {
      bool pipes_open =
          std::any_of(streams_.begin(), streams_.end(), [](auto& s) { return s.fd.valid(); });
      if (running_ == 0 && !pipes_open) return;

      auto now = Clock::now();
      if (running_ == 0 && now >= drain_deadline_) {
        // Something the rank started still holds its pipes; don't wait for it forever.
        for (auto& s : streams_)
          if (s.fd.valid()) close_stream(s);
        continue;
      }
      if (job_deadline_ && teardown_ == Teardown::None && now >= *job_deadline_) {
        say("job timed out after {} seconds, killing all ranks", *opt_.timeout_s);
        begin_teardown(Teardown::Timeout, SIGTERM);
      }
      if (kill_deadline_ && now >= *kill_deadline_) {
        if (running_ > 0) {
          std::string which;
          for (std::size_t r = 0; r < ranks_.size(); ++r)
            if (ranks_[r].running) which += fmt::format("{}{}", which.empty() ? "" : ", ", r);
          say("rank{} {} still running {}s after SIGTERM: sending SIGKILL", running_ > 1 ? "s" : "", which,
              kGrace.count());
        }
        signal_all(SIGKILL);
        kill_deadline_.reset();
      }

      // Sleep in poll() until output, a signal, or the next deadline.
      std::optional<Clock::time_point> next;
      auto consider = [&](std::optional<Clock::time_point> t) {
        if (t && (!next || *t < *next)) next = t;
      };
      if (teardown_ == Teardown::None) consider(job_deadline_);
      consider(kill_deadline_);
      if (running_ == 0) consider(drain_deadline_);
      int timeout_ms = -1;
      if (next) {
        auto left = std::chrono::ceil<std::chrono::milliseconds>(*next - Clock::now());
        timeout_ms = static_cast<int>(std::clamp<long long>(left.count(), 0, 1 << 30));
      }

      std::vector<pollfd> fds{{sigfd_.get(), POLLIN, 0}};
      std::vector<Stream*> polled;
      for (auto& s : streams_)
        if (s.fd.valid()) {
          fds.push_back({s.fd.get(), POLLIN, 0});
          polled.push_back(&s);
        }
      if (::poll(fds.data(), fds.size(), timeout_ms) < 0 && errno != EINTR) {
        say("poll failed: {}", std::strerror(errno));
        std::exit(1);
      }
      for (size_t i = 0; i < polled.size(); ++i)
        if (fds[i + 1].revents) read_stream(*polled[i]);
      if (fds[0].revents & POLLIN) {
        signalfd_siginfo si;
        while (::read(sigfd_.get(), &si, sizeof si) == static_cast<ssize_t>(sizeof si)) {
          if (si.ssi_signo == SIGCHLD) reap();
          else on_signal(static_cast<int>(si.ssi_signo));
        }
      }
    }
  }

  Options opt_;
  sigset_t old_mask_{};
  Fd sigfd_;
  std::vector<Rank> ranks_;
  std::vector<Stream> streams_;
  int running_ = 0;
  Teardown teardown_ = Teardown::None;
  int exit_code_ = 0;  // failed rank's status, or the signal received
  std::optional<Clock::time_point> job_deadline_, kill_deadline_;
  Clock::time_point drain_deadline_{};
};

}  // namespace

int main(int argc, char** argv) {
  return Job(parse_args(argc, argv)).run();
}
