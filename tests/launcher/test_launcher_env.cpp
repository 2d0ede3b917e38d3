// What launchers put in the environment (src/api/launcher_env.hpp): Slurm's
// compressed host lists, and a job started with Slurm's variables alone (no
// MASTER_ADDR, MASTER_PORT, RANK or WORLD_SIZE), as srun starts tasks.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "braid/error.hpp"
#include "src/api/launcher_env.hpp"
#include "tests/mp/harness.hpp"

using braid::detail::expand_hostlist;
using braid::detail::store_from_slurm;
using Hosts = std::vector<std::string>;

TEST_CASE("Slurm host lists expand in order, with padding, ranges and products", "[launcher][slurm]") {
  CHECK(expand_hostlist("node1", "L") == Hosts{"node1"});
  CHECK(expand_hostlist("a,b,c", "L") == Hosts{"a", "b", "c"});
  CHECK(expand_hostlist("node[01-03,7]", "L") == Hosts{"node01", "node02", "node03", "node7"});
  CHECK(expand_hostlist("node[8-11]", "L") == Hosts{"node8", "node9", "node10", "node11"});
  CHECK(expand_hostlist("gpu[098-101],login", "L") == Hosts{"gpu098", "gpu099", "gpu100", "gpu101", "login"});
  CHECK(expand_hostlist("r[1-2]n[1-2]", "L") == Hosts{"r1n1", "r1n2", "r2n1", "r2n2"});
  CHECK(expand_hostlist("x[3]-ib,y", "L") == Hosts{"x3-ib", "y"});
  CHECK(expand_hostlist("n[0-65535]", "L").size() == 65536);
}

TEST_CASE("malformed Slurm host lists are errors naming the variable and the fault", "[launcher][slurm]") {
  auto rejects = [](const char* list, const char* why) {
    try {
      expand_hostlist(list, "SLURM_NODELIST");
      FAIL("accepted '" << list << "'");
    } catch (const braid::Error& e) {
      CHECK(e.code() == braid::ErrorCode::InvalidArgument);
      CHECK_THAT(e.what(), Catch::Contains("SLURM_NODELIST") && Catch::Contains(why));
    }
  };
  rejects("", "empty");
  rejects("node[1-3", "not closed");
  rejects("node1-3]", "without its '['");
  rejects("node[[1]]", "not closed");
  rejects("node[]", "must start with a number");
  rejects("node[a-b]", "must start with a number");
  rejects("node[3-1]", "ends below its start");
  rejects("node[1-]", "end must be a number");
  rejects("node[1-2;3]", "only digits");
  rejects("a,,b", "empty name");
  rejects("a,", "ends with a comma");
  rejects("n[0-65536]", "more than 65536 hosts");
  rejects("a[0-999]b[0-999]", "more than 65536 hosts");
  rejects("n[1234567890]", "more than 9 digits");
}

TEST_CASE("under Slurm the store is on the step's first node, at a port of the job's", "[launcher][slurm]") {
  ::unsetenv("SLURM_STEP_NODELIST");
  ::setenv("SLURM_NODELIST", "cn[07-09]", 1);
  ::unsetenv("SLURM_JOB_ID");
  CHECK_FALSE(store_from_slurm());  // no job id: not under Slurm
  ::setenv("SLURM_JOB_ID", "4242", 1);
  ::setenv("SLURM_STEP_ID", "3", 1);
  auto s = store_from_slurm();
  REQUIRE(s);
  CHECK(s->host == "cn07");
  CHECK(s->port == 20000 + (4242 * 31 + 3) % 20000);
  ::setenv("SLURM_STEP_NODELIST", "cn[08-09]", 1);  // the step's nodes win over the job's
  CHECK(store_from_slurm()->host == "cn08");
  ::setenv("SLURM_STEP_ID", "4", 1);  // another step of the job: another port
  CHECK(store_from_slurm()->port != s->port);
  for (const char* v : {"SLURM_STEP_NODELIST", "SLURM_NODELIST", "SLURM_JOB_ID", "SLURM_STEP_ID"}) ::unsetenv(v);
}

TEST_CASE("a job started with Slurm's variables alone finds its store", "[launcher][slurm]") {
  // As srun starts tasks: SLURM_PROCID, SLURM_NTASKS, the node list and the
  // job id; nothing of Braid's own. The node list names this host, so the
  // derived store is local.
  char host[256] = {};
  REQUIRE(::gethostname(host, sizeof host - 1) == 0);
  const std::string job = std::to_string(1000 + ::getpid() % 50000);
  auto res = braid_test::run_ranks(3, [&](int rank, int world) {
    for (const char* v : {"MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"})
      ::unsetenv(v);
    ::setenv("SLURM_PROCID", std::to_string(rank).c_str(), 1);
    ::setenv("SLURM_NTASKS", std::to_string(world).c_str(), 1);
    ::setenv("SLURM_STEP_NODELIST", host, 1);
    ::setenv("SLURM_JOB_ID", job.c_str(), 1);
    braid::init_process_group({});
    RANK_CHECK(braid::get_rank() == rank);
    RANK_CHECK(braid::get_world_size() == world);
    int x = rank + 1;
    braid::all_reduce(braid::tensor(&x, 1));
    RANK_CHECK(x == 6);
    braid::destroy_process_group();
  });
  INFO(braid_test::describe(res));
  REQUIRE(braid_test::all_ok(res));
}
