// braid::DistributedSampler against torch's own DistributedSampler: runs
// sampler_torch.py with the given Python (meson passes /usr/bin/python3, the
// interpreter Debian's torch is installed for) and compares every case it
// prints, indices and length. Exits 77 (skipped), saying why, when that
// Python or torch is missing; 1 on any difference, naming the first few.
//
// usage: test_sampler_torch PYTHON SCRIPT
#include <braid/braid.hpp>

#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s PYTHON SCRIPT\n", argv[0]);
    return 2;
  }
  const std::string python = argv[1], script = argv[2];
  if (::access(python.c_str(), X_OK) != 0) {
    std::printf("skipped: %s is not an executable Python, so torch cannot be asked\n", python.c_str());
    return 77;
  }
  const std::string cmd = "'" + python + "' '" + script + "'";
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) {
    std::printf("could not run %s\n", cmd.c_str());
    return 1;
  }
  std::string line;
  long cases = 0, announced = -1, wrong = 0;
  std::string version;
  char buf[1 << 16];
  auto next_line = [&]() -> bool {
    line.clear();
    while (std::fgets(buf, sizeof buf, p)) {
      line += buf;
      if (!line.empty() && line.back() == '\n') {
        line.pop_back();
        return true;
      }
    }
    return !line.empty();
  };
  while (next_line()) {
    std::istringstream in(line);
    std::string word;
    in >> word;
    if (word == "cases") {
      in >> announced;
      continue;
    }
    if (word == "torch") {
      in >> version;
      continue;
    }
    if (word != "case") {
      std::printf("unexpected line from the script: %.200s\n", line.c_str());
      ++wrong;
      continue;
    }
    long long n, len;
    int replicas, rank, shuffle, drop_last;
    std::string seed_text;
    long long epoch;
    std::string colon;
    in >> n >> replicas >> rank >> shuffle >> drop_last >> seed_text >> epoch >> len >> colon;
    std::vector<std::int64_t> want;
    for (long long v; in >> v;) want.push_back(v);
    ++cases;
    const std::uint64_t seed = std::stoull(seed_text);
    braid::DistributedSampler s(n, {.num_replicas = replicas, .rank = rank, .shuffle = shuffle != 0,
                                    .seed = seed, .drop_last = drop_last != 0});
    s.set_epoch(epoch);
    const auto got = s.indices();
    if (got != want || s.size() != len) {
      if (++wrong <= 5) {
        std::size_t at = 0;
        while (at < got.size() && at < want.size() && got[at] == want[at]) ++at;
        std::printf("DIFFERENT: n=%lld num_replicas=%d rank=%d shuffle=%d drop_last=%d seed=%s epoch=%lld: "
                    "torch len %lld, %zu indices; braid size %lld, %zu indices; first difference at %zu\n",
                    n, replicas, rank, shuffle, drop_last, seed_text.c_str(), epoch, len, want.size(),
                    static_cast<long long>(s.size()), got.size(), at);
      }
    }
  }
  const int status = ::pclose(p);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 77) {
    std::printf("skipped: the script says torch cannot be imported (its message is above)\n");
    return 77;
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::printf("the script failed (status %d)\n", status);
    return 1;
  }
  if (announced != cases || cases == 0) {
    std::printf("read %ld cases, the script announced %ld\n", cases, announced);
    return 1;
  }
  std::printf("%ld cases against torch %s: %ld different\n", cases, version.c_str(), wrong);
  return wrong == 0 ? 0 : 1;
}
