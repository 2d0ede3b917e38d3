// hello: a small Braid program for trying an init method under braidrun.
//
//   braidrun -n 4 build/examples/hello env
//   braidrun -n 4 build/examples/hello tcp    # tcp://MASTER_ADDR:MASTER_PORT, ranks by arrival
//   braidrun -n 4 build/examples/hello file   # file:///tmp/braid-hello-<port>, ranks by arrival
//   MASTER_ADDR=239.1.2.3 MASTER_PORT=29500 WORLD_SIZE=4 build/examples/hello tcp [GROUP_NAME [TIMEOUT_S]]
//                                             # multicast: started 4 times, anywhere on the network
//
// Each rank passes a token around the ring, then all ranks sum their ranks.
#include <braid/braid.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

int main(int argc, char** argv) {
  const std::string how = argc > 1 ? argv[1] : "env";
  const char* port = std::getenv("MASTER_PORT");
  const char* addr = std::getenv("MASTER_ADDR");
  const char* size = std::getenv("WORLD_SIZE");
  braid::InitOptions o;
  if (how == "tcp") {
    o.init_method = std::string("tcp://") + (addr ? addr : "127.0.0.1") + ":" + (port ? port : "29500");
    o.world_size = size ? std::atoi(size) : 1;  // rank -1: assigned in order of arrival
  } else if (how == "file") {
    o.init_method = std::string("file:///tmp/braid-hello-") + (port ? port : "0");
    o.world_size = size ? std::atoi(size) : 1;
  } else if (how == "pmix") {
    o.init_method = "pmix://";  // under mpirun, prterun or srun --mpi=pmix: the launcher says the rest
  } else if (how != "env") {
    std::fprintf(stderr, "usage: hello [env|tcp|file|pmix] [GROUP_NAME [TIMEOUT_S]]\n");
    return 2;
  }
  if (argc > 2) o.group_name = argv[2];
  if (argc > 3) o.timeout = std::chrono::seconds(std::atoi(argv[3]));
  try {
    braid::init_process_group(o);
    const int me = braid::get_rank(), n = braid::get_world_size();
    int token = me, got = -1;
    braid::Work w = braid::isend(braid::tensor(&token, 1), (me + 1) % n);
    const int from = braid::recv(braid::tensor(&got, 1), braid::ANY_SOURCE);
    w.wait();
    long long sum = me;
    braid::all_reduce(braid::tensor(&sum, 1));
    std::printf("rank %d of %d (%s): got %d from rank %d; sum of ranks %lld\n", me, n,
                o.init_method.c_str(), got, from, sum);
    const bool ok = got == (me + n - 1) % n && sum == static_cast<long long>(n) * (n - 1) / 2;
    braid::destroy_process_group();
    return ok ? 0 : 1;
  } catch (const braid::Error& e) {
    std::fprintf(stderr, "hello: %s\n", e.what());
    return 1;
  }
}
