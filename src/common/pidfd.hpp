// pidfd system calls (Linux >= 5.6), which glibc 2.36 does not wrap: a pidfd
// names a process without the pid-reuse race, becomes readable when the
// process exits, and lets a process of the same user take a duplicate of one
// of the other's file descriptors (how peers share memfds here).
#pragma once

#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

namespace braid {

inline int pidfd_open(pid_t pid) { return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)); }
inline int pidfd_getfd(int pidfd, int fd) { return static_cast<int>(::syscall(SYS_pidfd_getfd, pidfd, fd, 0)); }

}  // namespace braid
