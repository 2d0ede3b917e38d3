// What launchers put in a rank's environment, read by env:// (init.cpp):
// the rank and world size (RANK/WORLD_SIZE, Slurm, Open MPI, PMI), and,
// under Slurm, where the store is when nobody set MASTER_ADDR/MASTER_PORT:
// the first node of the step, from Slurm's compressed host list.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace braid::detail {

// Rank and world size from the launcher's environment, first match wins
// (RANK/WORLD_SIZE, SLURM_PROCID/SLURM_NTASKS, OMPI_COMM_WORLD_RANK/SIZE,
// PMI_RANK/PMI_SIZE); leaves -1 where nothing says.
void rank_and_size_from_env(int& rank, int& size);

// Slurm's compressed host list, expanded in order: "node[01-03,7],gpu1" is
// node01 node02 node03 node7 gpu1 (a range keeps the zero padding of its
// first number), and several brackets in one name multiply
// ("r[1-2]n[1-2]": r1n1 r1n2 r2n1 r2n2). Throws braid::Error
// (InvalidArgument) naming `what` and the fault on malformed text, or where
// it names more than `limit` hosts.
std::vector<std::string> expand_hostlist(std::string_view list, const char* what, std::size_t limit = 1 << 16);

// Under Slurm: the store's host, the first node of the step
// (SLURM_STEP_NODELIST, else SLURM_NODELIST), and a port every task of the
// step derives alike from SLURM_JOB_ID and SLURM_STEP_ID (20000-39999, so
// that concurrent steps rarely meet); nullopt where those are not set.
struct SlurmStore {
  std::string host;
  int port = 0;
};
std::optional<SlurmStore> store_from_slurm();

}  // namespace braid::detail
