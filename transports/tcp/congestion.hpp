// The congestion control of Braid's TCP sockets (BRAID_TCP_CONGESTION).
//
// Left unset, a socket gets the kernel's default (net.ipv4.
// tcp_congestion_control), as Open MPI's and Gloo's do. A name chooses
// another for every socket of the transport: its listener (accepted sockets
// inherit it) and each socket it dials. Congestion control acts on the
// sender, so both ends of a job should say the same.
//
// Why it is a setting at all: with BBR, Linux's default on some kernels
// (this project's machines among them), and a tbf-shaped link, a sender
// that has data queued, an open window and nothing in flight stays silent
// for 20-100 ms now and then. Under 4 emulated hosts x 2 ranks at 4 Gbit/s,
// halving-doubling all_reduce of 2 MiB took over 40 ms (up to 177) in 5-9 of
// 80 calls against 6-12 for the rest; with cubic or reno none took over 20
// (bench/RESULTS.md section 44).
#pragma once

#include <string>

namespace braid::tcp {

// BRAID_TCP_CONGESTION, or "" for the kernel's default.
std::string congestion_from_env();

// Sets `name` as `fd`'s congestion control (TCP_CONGESTION). A name the
// kernel does not have, or one this process may not choose, throws
// braid::Error(InvalidArgument) naming the variable and the names this
// process may choose (net.ipv4.tcp_allowed_congestion_control).
void set_congestion(int fd, const std::string& name);

// `fd`'s congestion control, "" if it has none (not a TCP socket).
std::string congestion_of(int fd);

}  // namespace braid::tcp
