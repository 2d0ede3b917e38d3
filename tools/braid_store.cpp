// braid-store: a standalone TCP store, for jobs whose ranks should not host
// it (rank 0 then finds the port taken and uses this store).
//
//   braid-store --port 29500 [--host 0.0.0.0]
//   RANK=... WORLD_SIZE=... MASTER_ADDR=host MASTER_PORT=29500 ./my_program
//
// Runs until SIGINT or SIGTERM.
#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "braid/error.hpp"
#include "braid/version.hpp"
#include "braid/version.hpp"
#include "src/store/store.hpp"

int main(int argc, char** argv) {
  std::string host;
  int port = -1;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if ((a == "--port" || a == "-p") && i + 1 < argc) port = std::atoi(argv[++i]);
    else if (a == "--host" && i + 1 < argc) host = argv[++i];
    else if (a == "--version") {
      std::printf("braid-store (Braid) %s\n", BRAID_VERSION);
      return 0;
    } else {
      constexpr const char* kUsage =
          "usage: braid-store --port PORT [--host HOST]\n"
          "Serves a TCP store that jobs rendezvous on (init_method tcp:// or MASTER_ADDR/MASTER_PORT),\n"
          "outliving any one job.\n"
          "  -p, --port PORT     the port to listen on (1..65535)\n"
          "  --host HOST         the address to listen on (default: all)\n"
          "  -h, --help          show this help\n"
          "  --version           show braid-store's version\n";
      const bool help = a == "-h" || a == "--help";
      if (!help) std::fprintf(stderr, "braid-store: unknown argument '%s'\n", a.c_str());
      std::fputs(kUsage, help ? stdout : stderr);
      return help ? 0 : 2;
    }
  }
  if (port <= 0 || port > 65535) {
    std::fprintf(stderr, "braid-store: --port PORT (1..65535) is required\n");
    return 2;
  }
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);  // before the server thread starts
  try {
    braid::store::TcpStoreServer server(host, port);
    std::printf("braid-store: serving on %s:%d\n", host.empty() ? "*" : host.c_str(), server.port());
    std::fflush(stdout);
    int sig = 0;
    sigwait(&set, &sig);
    std::printf("braid-store: %s, stopping\n", strsignal(sig));
  } catch (const braid::Error& e) {
    std::fprintf(stderr, "braid-store: %s\n", e.what());
    return 1;
  }
  return 0;
}
