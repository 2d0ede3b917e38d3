// FileStore's records: a file that another process (or anyone who can write
// to the shared file system) wrote. The input is the file, taken either as
// it is (bit 0 of the first byte set) or as a list of records that the
// target frames with correct checksums first, so that the fuzzer reaches
// past the checksum into lengths, types and keys (a byte-flip there then
// corrupts one on purpose).
#include <fcntl.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "src/store/store.hpp"
#include "tests/fuzz/fuzz.hpp"

namespace {

std::string path() {
  const char* dir = std::getenv("TMPDIR");
  return std::string(dir && *dir ? dir : "/tmp") + "/braid_fuzz_file_store_" + std::to_string(::getpid());
}

std::uint32_t fnv1a(const std::vector<std::uint8_t>& b, std::size_t from) {
  std::uint32_t h = 2166136261u;
  for (std::size_t i = from; i < b.size(); ++i) h = (h ^ b[i]) * 16777619u;
  return h;
}

void put_le(std::vector<std::uint8_t>& out, std::uint64_t v, int n) {
  for (int i = 0; i < n; ++i) out.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
}

// Records from the input: type byte, key length byte, value length byte,
// then the key and value bytes; the file store's header first.
std::vector<std::uint8_t> framed(const std::uint8_t* d, std::size_t n) {
  std::vector<std::uint8_t> f = {'B', 'R', 'A', 'I', 'D', 'F', 'S', '1'};
  std::size_t i = 0;
  while (i + 3 <= n) {
    const std::uint8_t type = d[i] % 4;  // 1 Set, 2 Delete, 0 and 3 unknown
    const std::size_t kl = d[i + 1], vl = d[i + 2];
    i += 3;
    if (i + kl + vl > n) break;
    const std::size_t start = f.size();
    f.push_back(type);
    put_le(f, kl, 4);
    put_le(f, vl, 4);
    f.insert(f.end(), d + i, d + i + kl + vl);
    i += kl + vl;
    put_le(f, fnv1a(f, start), 4);
  }
  if (i < n && !f.empty()) f[d[i] % f.size()] ^= static_cast<std::uint8_t>(n - i);  // one deliberate flip
  return f;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* d, std::size_t n) {
  if (n == 0) return 0;
  const std::vector<std::uint8_t> bytes =
      d[0] & 1 ? std::vector<std::uint8_t>(d + 1, d + n) : framed(d + 1, n - 1);
  const std::string p = path();
  {
    const int fd = ::open(p.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) return 0;
    const bool whole = ::write(fd, bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size());
    ::close(fd);
    if (!whole) return 0;
  }
  fuzz::only_braid_errors("FileStore", [&] {
    braid::store::FileStore s(p, braid::store::Millis(50));
    (void)s.num_keys();
    (void)s.try_get("a");
    (void)s.check({"a", "b"});
    s.set("fuzz", braid::store::to_bytes("x"));
    (void)s.add("count", 1);
  });
  ::unlink(p.c_str());
  return 0;
}
