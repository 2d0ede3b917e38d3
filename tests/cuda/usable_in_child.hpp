// Whether CUDA is usable here, asked of a forked child: probing initialises
// the driver in the probing process, and a process that has done that must
// not fork ranks afterwards (the multi-process tests fork). With `say`, the
// child prints why CUDA is not usable (the tests that then exit 77 say why).
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>

#include "cuda_kernels/cuda.hpp"

namespace cuda_test {

inline bool usable_in_child(bool say) {
  std::fflush(stdout);
  const pid_t pid = ::fork();
  if (pid == 0) {
    const bool ok = braid::cuda::available();
    if (!ok && say) std::printf("no CUDA device: %s\n", braid::cuda::unavailable_reason().c_str());
    std::fflush(stdout);
    ::_exit(ok ? 0 : 1);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

}  // namespace cuda_test
