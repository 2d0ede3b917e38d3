// An init_method URL, parsed (init.cpp): which rendezvous, and where.
// Parsed strictly and before anything connects: a bad URL is an
// InvalidArgument that says what was expected (tests/fuzz feeds it arbitrary
// text).
#pragma once

#include <string>

namespace braid::detail {

struct InitMethod {
  enum class Kind { Env, Tcp, File, Pmix } kind = Kind::Env;
  std::string host;  // tcp://
  int port = -1;     // tcp://, 1..65535
  std::string path;  // file://, absolute
};

// "" and "env://..." are Env; "tcp://HOST:PORT" (HOST may be "[v6]");
// "file:///absolute/path"; and "pmix://" (nothing after it).
InitMethod parse_init_method(const std::string& method);

// A decimal integer in lo..hi, all of `text`, or InvalidArgument naming `what`.
int parse_int(const std::string& text, const char* what, long lo, long hi);

}  // namespace braid::detail
