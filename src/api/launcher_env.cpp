#include "src/api/launcher_env.hpp"

#include <cstdlib>

#include "src/api/init_method.hpp"
#include "src/common/errors.hpp"

namespace braid::detail {

namespace {

std::optional<std::string> env(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) return std::nullopt;
  return std::string(v);
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// One bracket's content, "01-03,7": the numbers it names, as text with the
// padding of each range's first number.
std::vector<std::string> expand_bracket(std::string_view in, std::string_view list, const char* what,
                                        std::size_t limit) {
  std::vector<std::string> out;
  std::size_t i = 0;
  auto bad = [&](const char* why) {
    fail(ErrorCode::InvalidArgument, "{} '{}': {} in the bracket '[{}]' (Slurm's host list: node[01-04,7],gpu1)",
         what, list, why, in);
  };
  while (i <= in.size()) {
    std::size_t j = i;
    while (j < in.size() && is_digit(in[j])) ++j;
    if (j == i) bad("a range must start with a number");
    const std::string_view lo = in.substr(i, j - i);
    std::string_view hi = lo;
    if (j < in.size() && in[j] == '-') {
      std::size_t k = j + 1;
      while (k < in.size() && is_digit(in[k])) ++k;
      if (k == j + 1) bad("a range's end must be a number");
      hi = in.substr(j + 1, k - j - 1);
      j = k;
    }
    if (j < in.size() && in[j] != ',') bad("only digits, '-' and ',' may stand");
    if (lo.size() > 9 || hi.size() > 9) bad("a number has more than 9 digits");
    const long a = std::stol(std::string(lo)), b = std::stol(std::string(hi));
    if (b < a) bad("a range ends below its start");
    if (static_cast<std::size_t>(b - a) >= limit || out.size() + static_cast<std::size_t>(b - a) >= limit)
      fail(ErrorCode::InvalidArgument, "{} '{}' names more than {} hosts", what, list, limit);
    for (long v = a; v <= b; ++v) {
      std::string s = std::to_string(v);
      if (s.size() < lo.size()) s.insert(0, lo.size() - s.size(), '0');
      out.push_back(std::move(s));
    }
    i = j + 1;
  }
  return out;
}

}  // namespace

void rank_and_size_from_env(int& rank, int& size) {
  static const char* pairs[][2] = {{"RANK", "WORLD_SIZE"},
                                   {"SLURM_PROCID", "SLURM_NTASKS"},
                                   {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
                                   {"PMI_RANK", "PMI_SIZE"}};
  for (auto& p : pairs) {
    if (rank < 0)
      if (auto v = env(p[0])) rank = parse_int(*v, p[0], 0, 1 << 24);
    if (size < 0)
      if (auto v = env(p[1])) size = parse_int(*v, p[1], 1, 1 << 24);
  }
}

std::vector<std::string> expand_hostlist(std::string_view list, const char* what, std::size_t limit) {
  std::vector<std::string> hosts;
  std::size_t i = 0;
  if (list.empty()) fail(ErrorCode::InvalidArgument, "{} is empty: expected Slurm's host list (node[01-04,7],gpu1)", what);
  while (i < list.size()) {
    // One name: literal text and bracket groups up to a comma outside brackets.
    std::vector<std::string> names{""};
    while (i < list.size() && list[i] != ',') {
      if (list[i] == ']')
        fail(ErrorCode::InvalidArgument, "{} '{}': a ']' without its '[' at offset {}", what, list, i);
      if (list[i] != '[') {
        for (auto& n : names) n += list[i];
        ++i;
        continue;
      }
      const std::size_t close = list.find(']', i);
      const std::size_t nested = list.find('[', i + 1);
      if (close == std::string_view::npos || nested < close)
        fail(ErrorCode::InvalidArgument, "{} '{}': the '[' at offset {} is not closed", what, list, i);
      const auto values = expand_bracket(list.substr(i + 1, close - i - 1), list, what, limit);
      if (names.size() * values.size() + hosts.size() > limit)
        fail(ErrorCode::InvalidArgument, "{} '{}' names more than {} hosts", what, list, limit);
      std::vector<std::string> more;
      for (const auto& n : names)
        for (const auto& v : values) more.push_back(n + v);
      names = std::move(more);
      i = close + 1;
    }
    if (names.size() == 1 && names[0].empty())
      fail(ErrorCode::InvalidArgument, "{} '{}': an empty name at offset {}", what, list, i);
    hosts.insert(hosts.end(), names.begin(), names.end());
    if (i < list.size()) {  // the comma
      ++i;
      if (i == list.size()) fail(ErrorCode::InvalidArgument, "{} '{}' ends with a comma", what, list);
    }
  }
  return hosts;
}

std::optional<SlurmStore> store_from_slurm() {
  const char* what = "SLURM_STEP_NODELIST";
  auto list = env(what);
  if (!list) list = env(what = "SLURM_NODELIST");
  auto job = env("SLURM_JOB_ID");
  if (!list || !job) return std::nullopt;
  const long job_id = parse_int(*job, "SLURM_JOB_ID", 0, 2147483647);
  long step_id = 0;
  if (auto s = env("SLURM_STEP_ID")) step_id = parse_int(*s, "SLURM_STEP_ID", 0, 2147483647);
  SlurmStore s;
  s.host = expand_hostlist(*list, what).front();
  s.port = static_cast<int>(20000 + (job_id * 31 + step_id) % 20000);
  return s;
}

}  // namespace braid::detail
