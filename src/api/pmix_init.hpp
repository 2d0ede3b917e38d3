// pmix:// (and env:// under a PMIx launcher with no MASTER_ADDR): the rank,
// the world size and the store's address come from PMIx, the launcher's
// own key-value service (Open MPI's mpirun, PRRTE's prterun, Slurm's
// srun --mpi=pmix). Rank 0 hosts the store on a port of its choosing and
// puts "host port" under a key of the group name; a fence later every rank
// reads it. PMIx is used for that exchange only, then finalized: the job's
// own store serves everything after.
#pragma once

#include <memory>
#include <string>

#include "src/common/time.hpp"
#include "src/store/store.hpp"

namespace braid::detail {

// Built with PMIx (meson feature 'pmix', libpmix-dev).
bool pmix_built();
// A PMIx launcher started this process (PMIX_RANK and PMIX_NAMESPACE set).
bool under_pmix();

struct PmixMeeting {
  int rank = -1;
  int size = -1;
  std::string store_host;
  int store_port = 0;
  std::unique_ptr<store::TcpStoreServer> server;  // rank 0's
};
// Meets through PMIx within `timeout`. Throws braid::Error: NotSupported
// without PMIx in the build, InvalidArgument when no PMIx launcher started
// this process, Timeout or Store when the exchange fails (saying which
// PMIx call and its status).
PmixMeeting pmix_meet(const std::string& group_name, Millis timeout);

}  // namespace braid::detail
