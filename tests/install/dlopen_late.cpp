// libbraid.so can be dlopen()ed by a program that did not link it (a Python
// extension does this): a library marked STATIC_TLS, or with more
// initial-exec TLS than glibc's reserve holds, fails here with "cannot
// allocate memory in static TLS block". Resolves one API symbol too.
#include <dlfcn.h>

#include <cstdio>

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: dlopen-late PATH/libbraid.so\n");
    return 2;
  }
  void* h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    std::fprintf(stderr, "dlopen %s failed: %s\n", argv[1], dlerror());
    return 1;
  }
  if (!dlsym(h, "_ZN5braid14is_initializedEv")) {
    std::fprintf(stderr, "braid::is_initialized() not found in %s: %s\n", argv[1], dlerror());
    return 1;
  }
  std::printf("dlopen of %s: ok\n", argv[1]);
  return 0;
}
