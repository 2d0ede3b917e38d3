#include "bench_report.hpp"

#include <fmt/format.h>

#include <memory>
#include <stdexcept>

namespace bench {

namespace {

// nccl-tests' getFloatStr: as many decimals as fit in `width` characters.
std::string num(double v, int width) {
  int power = 0;
  for (std::uint64_t p = 1; v >= static_cast<double>(p) && power < 20; p *= 10) ++power;
  if (power < width - 2) return fmt::format("{:>{}.2f}", v, width);
  if (power < width - 1) return fmt::format("{:>{}.1f}", v, width);
  if (power < width + 1) return fmt::format("{:>{}.0f}", v, width);
  return width >= 7 ? fmt::format("{:>{}.1e}", v, width) : fmt::format("{:>{}.0e}", v, width);
}

std::string body(const Figures& f) {
  if (!f.present) return fmt::format("  {:>7}  {:>6}  {:>6}  {:>6}", "N/A", "N/A", "N/A", "N/A");
  const std::string wrong = f.wrong < 0 ? std::string("   N/A") : fmt::format("{:>6g}", static_cast<double>(f.wrong));
  return fmt::format("  {}  {}  {}  {}", num(f.time_us, 7), num(f.algbw, 6), num(f.busbw, 6), wrong);
}

struct FileCloser {
  void operator()(std::FILE* f) const noexcept { std::fclose(f); }
};
using File = std::unique_ptr<std::FILE, FileCloser>;

File open_for_writing(const std::string& path) {
  File f(std::fopen(path.c_str(), "w"));
  if (!f) throw std::runtime_error(fmt::format("cannot write '{}': check the directory exists and is writable", path));
  return f;
}

std::string json_str(const std::string& s) {
  std::string out = "\"";
  for (char ch : s) {
    const auto u = static_cast<unsigned char>(ch);
    if (ch == '"' || ch == '\\') out += fmt::format("\\{}", ch);
    else if (u < 0x20) out += fmt::format("\\u{:04x}", u);
    else out += ch;
  }
  return out + "\"";
}

std::string json_figures(const Figures& f) {
  if (!f.present) return "null";
  return fmt::format("{{\"time\": {:.3f}, \"alg_bw\": {:.6f}, \"bus_bw\": {:.6f}, \"nwrong\": {}}}", f.time_us,
                     f.algbw, f.busbw, f.wrong < 0 ? std::string("null") : std::to_string(f.wrong));
}

}  // namespace

void print_run_header(std::FILE* f, const RunInfo& i) {
  static const char* const kAverage[] = {"rank 0", "mean over ranks", "min over ranks", "max over ranks"};
  fmt::print(f, "# braid-bench (Braid {}), nccl-tests layout\n", i.version);
  fmt::print(f, "# Command: {}\n", i.command_line);
  fmt::print(f, "# nRanks {} minBytes {} maxBytes {} step: {}({}) warmup iters: {} iters: {} validation: {} "
             "time: {}\n", i.nranks, i.min_bytes, i.max_bytes, i.step, i.step_is_factor ? "factor" : "bytes",
             i.warmup, i.iters, i.check, kAverage[i.average & 3]);
  fmt::print(f, "# Backend: {}  Algorithm: {}\n", i.backend, i.algorithm);
  fmt::print(f, "#\n# Using ranks\n");
  for (const auto& line : i.rank_lines) fmt::print(f, "{}\n", line);
  std::fflush(f);
}

void print_table_header(std::FILE* f, const std::string& collective) {
  fmt::print(f, "#\n# Collective test starting: {}\n#\n", collective);
  fmt::print(f, "# {:>10}  {:>12}  {:>8}  {:>6}  {:>6}           out-of-place                       in-place          \n",
             "", "", "", "", "");
  fmt::print(f, "# {:>10}  {:>12}  {:>8}  {:>6}  {:>6}  {:>7}  {:>6}  {:>6}  {:>6}  {:>7}  {:>6}  {:>6}  {:>6}\n",
             "size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw",
             "#wrong");
  fmt::print(f, "# {:>10}  {:>12}  {:>8}  {:>6}  {:>6}  {:>7}  {:>6}  {:>6}  {:>6}  {:>7}  {:>6}  {:>6}  {:>6}\n",
             "(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "");
  std::fflush(f);
}

void print_row(std::FILE* f, const Row& r) {
  fmt::print(f, "{:>12}  {:>12}  {:>8}  {:>6}  {:>6}{}{}\n", r.size, r.count, r.type, r.redop, r.root,
             body(r.out_of_place), body(r.in_place));
  std::fflush(f);  // a long sweep shows progress, and a hang shows where
}

void print_table_footer(std::FILE* f, const std::string& collective, const std::vector<Row>& rows) {
  const std::int64_t wrong = total_wrong(rows);
  fmt::print(f, "# {:<20} : {} {}\n", "Out of bounds values", wrong, wrong ? "FAILED" : "OK");
  fmt::print(f, "# {:<20} : {:g} \n", "Avg bus bandwidth", avg_busbw(rows));
  fmt::print(f, "#\n# Collective test concluded: {}\n", collective);
  std::fflush(f);
}

double avg_busbw(const std::vector<Row>& rows) {
  double sum = 0;
  int n = 0;
  for (const Row& r : rows)
    for (const Figures* x : {&r.out_of_place, &r.in_place})
      if (x->present) {
        sum += x->busbw;
        ++n;
      }
  return n ? sum / n : 0;
}

std::int64_t total_wrong(const std::vector<Row>& rows) {
  std::int64_t w = 0;
  for (const Row& r : rows)
    for (const Figures* x : {&r.out_of_place, &r.in_place})
      if (x->present && x->wrong > 0) w += x->wrong;
  return w;
}

void write_json(const std::string& path, const RunInfo& i, const std::vector<Row>& rows) {
  File f = open_for_writing(path);
  fmt::print(f.get(), "{{\n  \"command\": {},\n  \"version\": {},\n  \"nranks\": {},\n  \"backend\": {},\n"
             "  \"algorithm\": {},\n  \"warmup_iters\": {},\n  \"iterations\": {},\n  \"validation\": {},\n"
             "  \"results\": [\n", json_str(i.command_line), json_str(i.version), i.nranks, json_str(i.backend),
             json_str(i.algorithm), i.warmup, i.iters, i.check);
  for (std::size_t k = 0; k < rows.size(); ++k) {
    const Row& r = rows[k];
    fmt::print(f.get(), "    {{\"collective\": {}, \"size\": {}, \"count\": {}, \"type\": {}, \"redop\": {}, "
               "\"root\": {}, \"out_of_place\": {}, \"in_place\": {}}}{}\n", json_str(r.collective), r.size, r.count,
               json_str(r.type), json_str(r.redop), r.root, json_figures(r.out_of_place), json_figures(r.in_place),
               k + 1 < rows.size() ? "," : "");
  }
  const std::int64_t wrong = total_wrong(rows);
  fmt::print(f.get(), "  ],\n  \"out_of_bounds\": {{\"count\": {}, \"okay\": {}}},\n"
             "  \"average_bus_bandwidth\": {:.6f}\n}}\n", wrong, wrong == 0 ? "true" : "false", avg_busbw(rows));
}

void write_csv(const std::string& path, const std::vector<Row>& rows) {
  File f = open_for_writing(path);
  fmt::print(f.get(), "collective,size,count,type,redop,root,placement,time_us,algbw_gbs,busbw_gbs,wrong\n");
  for (const Row& r : rows)
    for (const auto& [name, x] : {std::pair{"out-of-place", &r.out_of_place}, std::pair{"in-place", &r.in_place}}) {
      if (!x->present) continue;
      fmt::print(f.get(), "{},{},{},{},{},{},{},{:.3f},{:.6f},{:.6f},{}\n", r.collective, r.size, r.count, r.type,
                 r.redop, r.root, name, x->time_us, x->algbw, x->busbw, x->wrong < 0 ? std::string("") : std::to_string(x->wrong));
    }
}

}  // namespace bench
