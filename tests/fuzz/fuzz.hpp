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

inline std::string text(const std::uint8_t* d, std::size_t n) { return std::string(reinterpret_cast<const char*>(d), n); }

}  // namespace fuzz
