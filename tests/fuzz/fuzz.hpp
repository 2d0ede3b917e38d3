// What the fuzz targets share: calling a parser that must either succeed or
// throw braid::Error. Any other exception escaping it is a bug (an
// std::out_of_range from a careless substr or stoi, say): the target aborts,
// which libFuzzer and the driver both report as a crash.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#include "braid/error.hpp"

namespace fuzz {

template <class F>
void only_braid_errors(const char* what, F&& f) {
  try {
    f();
  } catch (const braid::Error&) {
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s threw something other than braid::Error: %s\n", what, e.what());
    std::abort();
  }
}

// Whether the job has a secret (BRAID_JOB_TOKEN) for what the target makes
// next: the stores and transports read it when they are made.
inline void job_secret(bool on) {
  if (on) ::setenv("BRAID_JOB_TOKEN", "fuzz-secret", 1);
  else ::unsetenv("BRAID_JOB_TOKEN");
}

inline std::string text(const std::uint8_t* d, std::size_t n) { return std::string(reinterpret_cast<const char*>(d), n); }

}  // namespace fuzz
