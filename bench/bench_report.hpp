// Output in nccl-tests' layout (the same column widths and number formats, so
// tools that parse nccl-tests tables read these), plus JSON and CSV copies.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace bench {

struct Figures {
  bool present = false;  // false: this op has no such form; printed as N/A
  double time_us = 0, algbw = 0, busbw = 0;
  std::int64_t wrong = -1;  // -1: not checked (-c 0)
};

struct Row {
  std::string collective;
  std::uint64_t size = 0;
  std::int64_t count = 0;
  std::string type, redop;
  int root = -1;
  Figures out_of_place, in_place;
};

// The lines above a table: what ran, where, how.
struct RunInfo {
  std::string command_line, backend, algorithm, version;
  int nranks = 0;
  std::uint64_t min_bytes = 0, max_bytes = 0, step = 0;
  bool step_is_factor = true;
  int warmup = 0, iters = 0, check = 0, average = 3;
  std::vector<std::string> rank_lines;  // "#  Rank  0 Pid ... on host"
};

void print_run_header(std::FILE* f, const RunInfo& info);
void print_table_header(std::FILE* f, const std::string& collective);
void print_row(std::FILE* f, const Row& r);
// Footer of one collective's table: out-of-bounds total and average busbw.
void print_table_footer(std::FILE* f, const std::string& collective, const std::vector<Row>& rows);

// Average busbw over every figure present (nccl-tests: both placements).
double avg_busbw(const std::vector<Row>& rows);
std::int64_t total_wrong(const std::vector<Row>& rows);

// Throws std::runtime_error naming the path if it cannot be written.
void write_json(const std::string& path, const RunInfo& info, const std::vector<Row>& rows);
void write_csv(const std::string& path, const std::vector<Row>& rows);

}  // namespace bench
