/* mpi-bench: the MPI side of braid-bench's comparisons. Same iteration scheme
 * (-w untimed warm-ups, a barrier, the mean over -n timed iterations, the
 * maximum over ranks), same sizes, same data patterns and check, same
 * nccl-tests columns, so its tables line up with braid-bench's.
 *
 *   mpirun -np 2 mpi-bench pingpong -b 8 -e 64M -f 2
 *   mpirun -np 4 mpi-bench allreduce -b 8 -e 128M
 *
 * bench/meson.build builds one binary per MPI installed, each with its own
 * wrapper: mpi-bench-openmpi (mpicc.openmpi; run it with mpirun.openmpi) and
 * mpi-bench-mpich (mpicc.mpich; mpiexec.mpich), or mpi-bench from a plain
 * mpicc where neither exists.
 *
 * Operations: pingpong (ranks 0 and 1: half a round trip of MPI_Send/MPI_Recv,
 * as osu_latency), allreduce, broadcast, allgather, reducescatter
 * (MPI_Reduce_scatter_block). Types: float (default), double, int32. Ops: sum,
 * prod, min, max. In place uses MPI_IN_PLACE (for broadcast, which only has an
 * in-place form, out of place is a root-side copy into the output first, which
 * is what braid::broadcast(input, output) does too).
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum Coll { PINGPONG, ALLREDUCE, BROADCAST, ALLGATHER, REDUCESCATTER };
static const char* const kCollNames[] = {"pingpong", "allreduce", "broadcast", "allgather", "reducescatter"};
enum Type { T_FLOAT, T_DOUBLE, T_INT32 };
enum Op { O_SUM, O_PROD, O_MIN, O_MAX };
static const char* const kOpNames[] = {"sum", "prod", "min", "max"};

struct Args {
  enum Coll coll;
  uint64_t min_bytes, max_bytes, step_factor, step_bytes;
  int iters, warmup, check, root;
  enum Type type;
  enum Op op;
};

static int g_rank, g_size;

static void usage_exit(const char* why) {
  if (g_rank == 0) {
    if (why) fprintf(stderr, "mpi-bench: %s\n", why);
    fprintf(stderr,
            "usage: mpirun -np N mpi-bench pingpong|allreduce|broadcast|allgather|reducescatter\n"
            "       [-b MIN] [-e MAX] [-f FACTOR | -i STEP] [-n ITERS] [-w WARMUP] [-c 0|1]\n"
            "       [-d float|double|int32] [-o sum|prod|min|max] [-r ROOT]\n");
  }
  MPI_Finalize();
  exit(why ? 2 : 0);
}

static uint64_t parse_size(const char* s) {
  char* end = NULL;
  unsigned long long v = strtoull(s, &end, 10);
  if (end == s) usage_exit("a size must be a number with an optional K, M or G suffix");
  switch (*end) {
    case 'k': case 'K': v <<= 10; break;
    case 'm': case 'M': v <<= 20; break;
    case 'g': case 'G': v <<= 30; break;
    case '\0': break;
    default: usage_exit("unknown size suffix: expected K, M or G");
  }
  return (uint64_t)v;
}

static void parse(int argc, char** argv, struct Args* a) {
  memset(a, 0, sizeof *a);
  a->min_bytes = a->max_bytes = 32u << 20;
  a->step_factor = 2;
  a->step_bytes = 1u << 20;
  a->iters = 20;
  a->warmup = 5;
  a->check = 1;
  if (argc < 2) usage_exit("the first argument must name the operation");
  int found = 0;
  for (int c = 0; c < 5; ++c)
    if (strcmp(argv[1], kCollNames[c]) == 0) { a->coll = (enum Coll)c; found = 1; }
  if (!found) usage_exit("unknown operation");
  for (int i = 2; i < argc; ++i) {
    const char* f = argv[i];
    if (i + 1 >= argc) usage_exit("every flag needs a value");
    const char* v = argv[++i];
    if (!strcmp(f, "-b")) a->min_bytes = parse_size(v);
    else if (!strcmp(f, "-e")) a->max_bytes = parse_size(v);
    else if (!strcmp(f, "-f")) a->step_factor = strtoull(v, NULL, 10);
    else if (!strcmp(f, "-i")) { a->step_bytes = parse_size(v); a->step_factor = 1; }
    else if (!strcmp(f, "-n")) a->iters = atoi(v);
    else if (!strcmp(f, "-w")) a->warmup = atoi(v);
    else if (!strcmp(f, "-c")) a->check = atoi(v);
    else if (!strcmp(f, "-r")) a->root = atoi(v);
    else if (!strcmp(f, "-d")) {
      if (!strcmp(v, "float") || !strcmp(v, "float32")) a->type = T_FLOAT;
      else if (!strcmp(v, "double") || !strcmp(v, "float64")) a->type = T_DOUBLE;
      else if (!strcmp(v, "int32") || !strcmp(v, "int")) a->type = T_INT32;
      else usage_exit("-d: expected float, double or int32");
    } else if (!strcmp(f, "-o")) {
      int ok = 0;
      for (int o = 0; o < 4; ++o)
        if (!strcmp(v, kOpNames[o])) { a->op = (enum Op)o; ok = 1; }
      if (!ok) usage_exit("-o: expected sum, prod, min or max");
    } else usage_exit("unknown flag");
  }
  if (a->iters < 1) usage_exit("-n: expected at least 1");
  if (a->min_bytes > a->max_bytes) usage_exit("-b is larger than -e");
  if (a->root < 0 || a->root >= g_size) usage_exit("-r: expected a rank of this job");
  if (a->coll == PINGPONG && g_size < 2) usage_exit("pingpong needs at least 2 ranks");
}

/* --- data: the same integers braid-bench uses (bench/bench_data.hpp) ---------- */

static int64_t amp_of(int n) {
  int64_t a = 60 / n;
  return a < 1 ? 1 : (a > 5 ? 5 : a);
}

static int64_t value(const struct Args* a, int reduction, int rank, int64_t i) {
  if (!reduction) return (i * 7 + rank * 13) % 101 - 50;
  if (a->op == O_PROD) {
    int64_t mag = ((i + rank) % g_size == 0) ? 2 : 1;
    return ((i * 3 + rank * 5) % 7 == 0) ? -mag : mag;
  }
  const int64_t amp = amp_of(g_size);
  return (i * 7 + rank * 13) % (2 * amp + 1) - amp;
}

static int64_t reduced(const struct Args* a, int64_t i) {
  int64_t acc = value(a, 1, 0, i);
  for (int r = 1; r < g_size; ++r) {
    int64_t v = value(a, 1, r, i);
    switch (a->op) {
      case O_PROD: acc *= v; break;
      case O_MIN: acc = v < acc ? v : acc; break;
      case O_MAX: acc = v > acc ? v : acc; break;
      default: acc += v;
    }
  }
  return acc;
}

static size_t esize(enum Type t) { return t == T_DOUBLE ? 8 : 4; }
static MPI_Datatype mpi_type(enum Type t) {
  return t == T_DOUBLE ? MPI_DOUBLE : (t == T_INT32 ? MPI_INT32_T : MPI_FLOAT);
}
static MPI_Op mpi_op(enum Op o) {
  return o == O_PROD ? MPI_PROD : (o == O_MIN ? MPI_MIN : (o == O_MAX ? MPI_MAX : MPI_SUM));
}
static const char* type_name(enum Type t) { return t == T_DOUBLE ? "double" : (t == T_INT32 ? "int32" : "float"); }

static void put(enum Type t, void* buf, int64_t j, int64_t v) {
  if (t == T_FLOAT) ((float*)buf)[j] = (float)v;
  else if (t == T_DOUBLE) ((double*)buf)[j] = (double)v;
  else ((int32_t*)buf)[j] = (int32_t)v;
}
static int64_t get(enum Type t, const void* buf, int64_t j, int* ok) {
  double d = t == T_FLOAT ? ((const float*)buf)[j] : (t == T_DOUBLE ? ((const double*)buf)[j] : ((const int32_t*)buf)[j]);
  int64_t v = (int64_t)d;
  *ok = (double)v == d; /* not an integer (or NaN): certainly wrong */
  return v;
}
static int64_t wrong_moved(const struct Args* a, const void* buf, int64_t n, int rank, int64_t first) {
  int64_t w = 0;
  for (int64_t j = 0; j < n; ++j) {
    int ok;
    if (get(a->type, buf, j, &ok) != value(a, 0, rank, first + j) || !ok) ++w;
  }
  return w;
}
static int64_t wrong_reduced(const struct Args* a, const void* buf, int64_t n, int64_t first) {
  int64_t w = 0;
  for (int64_t j = 0; j < n; ++j) {
    int ok;
    if (get(a->type, buf, j, &ok) != reduced(a, first + j) || !ok) ++w;
  }
  return w;
}
static void poison(void* buf, size_t bytes) { memset(buf, 0x7B, bytes); }

/* --- one operation --------------------------------------------------------------- */

struct Bufs {
  char *send, *recv;
  int64_t count;  /* the "count" column */
  uint64_t bytes; /* the "size" column */
};

static void run_once(const struct Args* a, struct Bufs* b, int in_place) {
  const MPI_Datatype dt = mpi_type(a->type);
  const int c = (int)b->count;
  switch (a->coll) {
    case PINGPONG:
      if (g_rank == 0) {
        MPI_Send(b->send, c, dt, 1, 0, MPI_COMM_WORLD);
        MPI_Recv(b->recv, c, dt, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      } else if (g_rank == 1) {
        MPI_Recv(b->recv, c, dt, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Send(b->send, c, dt, 0, 0, MPI_COMM_WORLD);
      }
      break;
    case ALLREDUCE:
      MPI_Allreduce(in_place ? MPI_IN_PLACE : b->send, b->recv, c, dt, mpi_op(a->op), MPI_COMM_WORLD);
      break;
    case BROADCAST:
      if (!in_place && g_rank == a->root) memcpy(b->recv, b->send, (size_t)c * esize(a->type));
      MPI_Bcast(b->recv, c, dt, a->root, MPI_COMM_WORLD);
      break;
    case ALLGATHER:
      MPI_Allgather(in_place ? MPI_IN_PLACE : b->send, c, dt, b->recv, c, dt, MPI_COMM_WORLD);
      break;
    case REDUCESCATTER:
      /* In place, MPI reads all n blocks from recv and leaves block `rank` at its start. */
      MPI_Reduce_scatter_block(in_place ? MPI_IN_PLACE : b->send, b->recv, c, dt, mpi_op(a->op), MPI_COMM_WORLD);
      break;
  }
}

static void fill(const struct Args* a, struct Bufs* b, int in_place) {
  const enum Type t = a->type;
  const int64_t c = b->count, n = g_size;
  const size_t es = esize(t);
  switch (a->coll) {
    case PINGPONG:
      for (int64_t j = 0; j < c; ++j) put(t, b->send, j, value(a, 0, g_rank, j));
      poison(b->recv, (size_t)c * es);
      break;
    case ALLREDUCE:
      for (int64_t j = 0; j < c; ++j) put(t, in_place ? b->recv : b->send, j, value(a, 1, g_rank, j));
      if (!in_place) poison(b->recv, (size_t)c * es);
      break;
    case BROADCAST:
      poison(b->recv, (size_t)c * es);
      if (g_rank == a->root)
        for (int64_t j = 0; j < c; ++j) put(t, in_place ? b->recv : b->send, j, value(a, 0, a->root, j));
      break;
    case ALLGATHER:
      poison(b->recv, (size_t)(c * n) * es);
      for (int64_t j = 0; j < c; ++j)
        put(t, in_place ? b->recv + (size_t)(g_rank * c) * es : b->send, j, value(a, 0, g_rank, j));
      break;
    case REDUCESCATTER:
      for (int64_t j = 0; j < c * n; ++j) put(t, in_place ? b->recv : b->send, j, value(a, 1, g_rank, j));
      if (!in_place) poison(b->recv, (size_t)c * es);
      break;
  }
}

static int64_t check(const struct Args* a, struct Bufs* b) {
  const int64_t c = b->count;
  const size_t es = esize(a->type);
  switch (a->coll) {
    case PINGPONG: return g_rank > 1 ? 0 : wrong_moved(a, b->recv, c, 1 - g_rank, 0);
    case ALLREDUCE: return wrong_reduced(a, b->recv, c, 0);
    case BROADCAST: return wrong_moved(a, b->recv, c, a->root, 0);
    case ALLGATHER: {
      int64_t w = 0;
      for (int r = 0; r < g_size; ++r) w += wrong_moved(a, b->recv + (size_t)(r * c) * es, c, r, 0);
      return w;
    }
    case REDUCESCATTER: return wrong_reduced(a, b->recv, c, g_rank * c);
  }
  return 0;
}

/* --- timing and printing ---------------------------------------------------------- */

static void num(char* out, double v, int width) { /* nccl-tests' getFloatStr */
  int power = 0;
  for (uint64_t p = 1; v >= (double)p && power < 20; p *= 10) ++power;
  if (power < width - 2) sprintf(out, "%*.2f", width, v);
  else if (power < width - 1) sprintf(out, "%*.1f", width, v);
  else if (power < width + 1) sprintf(out, "%*.0f", width, v);
  else if (width >= 7) sprintf(out, "%*.1e", width, v);
  else sprintf(out, "%*.0e", width, v);
}

static double g_bw_sum = 0;
static int g_bw_n = 0;
static int64_t g_wrong = 0;

static void measure(const struct Args* a, struct Bufs* b, int in_place, double factor, double divisor) {
  fill(a, b, in_place);
  for (int i = 0; i < a->warmup; ++i) run_once(a, b, in_place);
  MPI_Barrier(MPI_COMM_WORLD);
  const double t0 = MPI_Wtime();
  for (int i = 0; i < a->iters; ++i) run_once(a, b, in_place);
  double sec = (MPI_Wtime() - t0) / a->iters / divisor;
  MPI_Allreduce(MPI_IN_PLACE, &sec, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  long long wrong = -1;
  if (a->check) {
    fill(a, b, in_place);
    run_once(a, b, in_place);
    long long mine = (long long)check(a, b);
    MPI_Allreduce(&mine, &wrong, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
    g_wrong += wrong;
  }
  const double algbw = sec > 0 ? (double)b->bytes / 1e9 / sec : 0, busbw = algbw * factor;
  g_bw_sum += busbw;
  ++g_bw_n;
  if (g_rank == 0) {
    char t[32], ab[32], bb[32];
    num(t, sec * 1e6, 7);
    num(ab, algbw, 6);
    num(bb, busbw, 6);
    if (wrong < 0) printf("  %7s  %6s  %6s  %6s", t, ab, bb, "N/A");
    else printf("  %7s  %6s  %6s  %6g", t, ab, bb, (double)wrong);
  }
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g_size);
  struct Args a;
  for (int i = 1; i < argc; ++i)
    if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) usage_exit(NULL);
  parse(argc, argv, &a);
  const int n = g_size;
  const size_t es = esize(a.type);
  const int reduces = a.coll == ALLREDUCE || a.coll == REDUCESCATTER;
  const int rooted = a.coll == BROADCAST;
  double factor = 1;
  if (a.coll == ALLREDUCE) factor = 2.0 * (n - 1) / n;
  if (a.coll == ALLGATHER || a.coll == REDUCESCATTER) factor = (double)(n - 1) / n;

  if (g_rank == 0) {
    char ver[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    MPI_Get_library_version(ver, &len);
    char* nl = strchr(ver, '\n');
    if (nl) *nl = '\0';
    printf("# mpi-bench (%s), nccl-tests layout\n# Command: mpi-bench", ver);
    for (int i = 1; i < argc; ++i) printf(" %s", argv[i]);
    printf("\n# nRanks %d minBytes %llu maxBytes %llu step: %llu(%s) warmup iters: %d iters: %d validation: %d "
           "time: max over ranks\n#\n# Collective test starting: %s\n#\n",
           n, (unsigned long long)a.min_bytes, (unsigned long long)a.max_bytes,
           (unsigned long long)(a.step_factor > 1 ? a.step_factor : a.step_bytes),
           a.step_factor > 1 ? "factor" : "bytes", a.warmup, a.iters, a.check, kCollNames[a.coll]);
    printf("# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place          \n", "", "", "",
           "", "");
    printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s\n", "size", "count", "type", "redop",
           "root", "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw", "#wrong");
    printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s\n", "(B)", "(elements)", "", "", "",
           "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "");
    fflush(stdout);
  }

  /* Buffers for the largest size: allgather's output and reducescatter's input are n blocks. */
  const int blocked = a.coll == ALLGATHER || a.coll == REDUCESCATTER;
  const uint64_t max_elems = a.max_bytes / es + (uint64_t)n;
  struct Bufs b;
  b.send = aligned_alloc(64, (max_elems * es + 63) / 64 * 64 + 64);
  b.recv = aligned_alloc(64, (max_elems * es + 63) / 64 * 64 + 64);
  if (!b.send || !b.recv) {
    fprintf(stderr, "mpi-bench: rank %d: out of memory for %llu bytes\n", g_rank, (unsigned long long)(max_elems * es));
    MPI_Abort(MPI_COMM_WORLD, 1);
  }

  for (uint64_t size = a.min_bytes; size <= a.max_bytes;) {
    const int64_t count = (int64_t)(size / es);
    b.count = blocked ? count / n : count;
    b.bytes = (uint64_t)(blocked ? b.count * n : b.count) * es;
    if (g_rank == 0)
      printf("%12llu  %12lld  %8s  %6s  %6d", (unsigned long long)b.bytes, (long long)b.count, type_name(a.type),
             reduces ? kOpNames[a.op] : "none", rooted ? a.root : -1);
    measure(&a, &b, 0, factor, a.coll == PINGPONG ? 2.0 : 1.0);
    if (a.coll == PINGPONG) {
      if (g_rank == 0) printf("  %7s  %6s  %6s  %6s", "N/A", "N/A", "N/A", "N/A");
    } else {
      measure(&a, &b, 1, factor, 1.0);
    }
    if (g_rank == 0) {
      printf("\n");
      fflush(stdout);
    }
    const uint64_t next = a.step_factor > 1 ? size * a.step_factor : size + a.step_bytes;
    if (next <= size) break;
    size = next;
  }
  if (g_rank == 0) {
    printf("# %-20s : %lld %s\n", "Out of bounds values", (long long)g_wrong, g_wrong ? "FAILED" : "OK");
    printf("# %-20s : %g \n#\n# Collective test concluded: %s\n", "Avg bus bandwidth",
           g_bw_n ? g_bw_sum / g_bw_n : 0.0, kCollNames[a.coll]);
  }
  free(b.send);
  free(b.recv);
  MPI_Finalize();
  return g_wrong ? 1 : 0;
}
