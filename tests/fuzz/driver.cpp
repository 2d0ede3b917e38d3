// A stand-in for libFuzzer's main where the compiler has none (g++): runs a
// target over every input of its corpus, then over mutations of them for a
// fixed time, with a fixed seed. Not coverage-guided (tools/fuzz runs the
// real thing under clang, ASan and UBSan); it keeps every parser exercised
// by the ordinary test suite. Arguments mirror libFuzzer's:
//   fuzz_X [-max_total_time=SECONDS] [-seed=N] DIR_OR_FILE...
#include <sys/stat.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

namespace {

using Input = std::vector<std::uint8_t>;

Input read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return Input(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// One to four of: flip a bit, set a byte, insert, erase, duplicate a range,
// splice in part of another input, truncate.
Input mutate(const Input& base, const std::vector<Input>& corpus, std::mt19937_64& rng) {
  Input x = base;
  auto pick = [&](std::size_t n) { return n ? static_cast<std::size_t>(rng() % n) : 0; };
  const int rounds = 1 + static_cast<int>(rng() % 4);
  for (int k = 0; k < rounds; ++k) {
    switch (rng() % 7) {
      case 0:
        if (!x.empty()) x[pick(x.size())] ^= static_cast<std::uint8_t>(1u << (rng() % 8));
        break;
      case 1:
        if (!x.empty()) x[pick(x.size())] = static_cast<std::uint8_t>(rng());
        break;
      case 2: {
        const std::size_t n = 1 + pick(8);
        const std::size_t at = pick(x.size() + 1);
        for (std::size_t i = 0; i < n; ++i) x.insert(x.begin() + static_cast<std::ptrdiff_t>(at), static_cast<std::uint8_t>(rng()));
        break;
      }
      case 3:
        if (!x.empty()) {
          const std::size_t at = pick(x.size());
          const std::size_t n = 1 + pick(std::min<std::size_t>(16, x.size() - at));
          x.erase(x.begin() + static_cast<std::ptrdiff_t>(at), x.begin() + static_cast<std::ptrdiff_t>(at + n));
        }
        break;
      case 4:
        if (!x.empty() && x.size() < 65536) {
          const std::size_t at = pick(x.size());
          const std::size_t n = 1 + pick(std::min<std::size_t>(64, x.size() - at));
          Input part(x.begin() + static_cast<std::ptrdiff_t>(at), x.begin() + static_cast<std::ptrdiff_t>(at + n));
          x.insert(x.begin() + static_cast<std::ptrdiff_t>(pick(x.size() + 1)), part.begin(), part.end());
        }
        break;
      case 5: {
        const Input& other = corpus[pick(corpus.size())];
        if (!other.empty()) {
          const std::size_t from = pick(other.size());
          x.resize(pick(x.size() + 1));
          x.insert(x.end(), other.begin() + static_cast<std::ptrdiff_t>(from), other.end());
        }
        break;
      }
      default:
        x.resize(pick(x.size() + 1));
        break;
    }
  }
  return x;
}

}  // namespace

int main(int argc, char** argv) {
  double seconds = 5;
  std::uint64_t seed = 1;
  std::vector<Input> corpus;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a.rfind("-max_total_time=", 0) == 0) seconds = std::atof(a.c_str() + 16);
    else if (a.rfind("-seed=", 0) == 0) seed = std::strtoull(a.c_str() + 6, nullptr, 10);
    else if (a[0] == '-') continue;  // another libFuzzer flag: not ours
    else if (std::filesystem::is_directory(a)) {
      for (const auto& e : std::filesystem::directory_iterator(a))
        if (e.is_regular_file()) corpus.push_back(read_file(e.path()));
    } else {
      corpus.push_back(read_file(a));
    }
  }
  if (corpus.empty()) corpus.emplace_back();
  for (const Input& x : corpus) LLVMFuzzerTestOneInput(x.data(), x.size());
  std::mt19937_64 rng(seed);
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  std::uint64_t runs = 0;
  while (std::chrono::steady_clock::now() < end) {
    for (int k = 0; k < 64; ++k, ++runs) {
      const Input x = mutate(corpus[static_cast<std::size_t>(rng() % corpus.size())], corpus, rng);
      LLVMFuzzerTestOneInput(x.data(), x.size());
    }
  }
  std::printf("%s: %zu corpus inputs, then %llu mutated runs in %.0f s (seed %llu), no crash\n", argv[0],
              corpus.size(), static_cast<unsigned long long>(runs), seconds, static_cast<unsigned long long>(seed));
  return 0;
}
