/* The C API (braid/braid.h) from C99, as one rank of a job: run it with
 * `braidrun -n 4 test_c_api` (meson test c-api). Every collective and
 * point-to-point op (blocking; all_reduce, point to point, sendrecv and
 * coalesced also with a request), on the world, a subgroup, a split and a
 * communicator (rooted ops there use the communicator's ranks); argument
 * errors that leave the job usable; the error string.
 * Exits 0 when every check held, else 1 after printing each failure. */
#include <braid/braid.h>

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures = 0;
static int me = -1;

#define CHECK(cond)                                                                   \
  do {                                                                                \
    if (!(cond)) {                                                                    \
      fprintf(stderr, "rank %d: %s:%d: CHECK(%s) failed\n", me, __FILE__, __LINE__, #cond); \
      ++failures;                                                                     \
    }                                                                                 \
  } while (0)

#define OK(call)                                                                           \
  do {                                                                                     \
    int st_ = (call);                                                                      \
    if (st_ != BRAID_OK) {                                                                 \
      fprintf(stderr, "rank %d: %s:%d: %s returned %s: %s\n", me, __FILE__, __LINE__, #call, \
              braid_status_name(st_), braid_error_string());                               \
      ++failures;                                                                          \
    }                                                                                      \
  } while (0)

static void test_all_reduce(int n) {
  int32_t in[5], out[5];
  int i;
  for (i = 0; i < 5; ++i) in[i] = me * 10 + i;
  OK(braid_all_reduce(in, out, 5, BRAID_INT32, BRAID_SUM, BRAID_WORLD, NULL));
  for (i = 0; i < 5; ++i) CHECK(out[i] == 10 * n * (n - 1) / 2 + n * i);
  /* in place, float64 max */
  {
    double d[3] = {me * 1.5, -me * 1.0, 7.0};
    OK(braid_all_reduce(d, d, 3, BRAID_FLOAT64, BRAID_MAX, BRAID_WORLD, NULL));
    CHECK(d[0] == (n - 1) * 1.5 && d[1] == 0.0 && d[2] == 7.0);
  }
  /* with a request; avg */
  {
    float f[4] = {(float)me, (float)me, (float)me, (float)me};
    braid_request_t r = NULL;
    OK(braid_all_reduce(f, f, 4, BRAID_FLOAT32, BRAID_AVG, BRAID_WORLD, &r));
    CHECK(r != NULL);
    OK(braid_wait(r));
    CHECK(fabsf(f[3] - (float)(n - 1) / 2.0f) < 1e-6f);
  }
  /* braid_test until done */
  {
    int64_t v = 1 << me, got = 0;
    int done = 0;
    braid_request_t r = NULL;
    OK(braid_all_reduce(&v, &got, 1, BRAID_INT64, BRAID_BOR, BRAID_WORLD, &r));
    while (!done) OK(braid_test(&r, &done));
    CHECK(r == NULL);
    CHECK(got == (1 << n) - 1);
  }
}

static void test_rooted(int n) {
  int i;
  /* broadcast from rank 1 */
  {
    int64_t b[3] = {0, 0, 0};
    if (me == 1) b[0] = 11, b[1] = 22, b[2] = 33;
    OK(braid_broadcast(b, 3, BRAID_INT64, 1, BRAID_WORLD, NULL));
    CHECK(b[0] == 11 && b[1] == 22 && b[2] == 33);
  }
  /* reduce to rank 2 (NULL recvbuf elsewhere) */
  {
    int32_t in = me + 1, out = -1;
    OK(braid_reduce(&in, me == 2 ? &out : NULL, 1, BRAID_INT32, BRAID_PROD, 2, BRAID_WORLD, NULL));
    if (me == 2) {
      int32_t want = 1;
      for (i = 1; i <= n; ++i) want *= i;
      CHECK(out == want);
    }
    CHECK(in == me + 1); /* the input is only read */
  }
  /* gather to rank 0, scatter from rank 3 */
  {
    int32_t mine[2] = {me, -me}, all[16];
    OK(braid_gather(mine, me == 0 ? all : NULL, 2, BRAID_INT32, 0, BRAID_WORLD, NULL));
    if (me == 0)
      for (i = 0; i < n; ++i) CHECK(all[2 * i] == i && all[2 * i + 1] == -i);
    int32_t src[16], got[2] = {-1, -1};
    for (i = 0; i < 2 * n; ++i) src[i] = 100 + i;
    OK(braid_scatter(me == 3 ? src : NULL, got, 2, BRAID_INT32, 3, BRAID_WORLD, NULL));
    CHECK(got[0] == 100 + 2 * me && got[1] == 101 + 2 * me);
  }
}

static void test_gathers(int n) {
  int i, j;
  /* all_gather, out of place and in place */
  {
    uint8_t mine[3] = {(uint8_t)me, (uint8_t)(me + 1), (uint8_t)(me + 2)}, all[24];
    OK(braid_all_gather(mine, all, 3, BRAID_UINT8, BRAID_WORLD, NULL));
    for (i = 0; i < n; ++i) CHECK(all[3 * i] == i && all[3 * i + 2] == i + 2);
    memset(all, 0, sizeof all);
    all[3 * me] = 42, all[3 * me + 1] = 43, all[3 * me + 2] = 44;
    OK(braid_all_gather(all, all, 3, BRAID_UINT8, BRAID_WORLD, NULL));
    for (i = 0; i < n; ++i) CHECK(all[3 * i] == 42 && all[3 * i + 2] == 44);
  }
  /* reduce_scatter: block j of every rank's input is j + rank; then in
   * place, where the result lands in this rank's own block */
  {
    int32_t in[8], out = -1;
    for (j = 0; j < n; ++j) in[j] = j + me;
    OK(braid_reduce_scatter(in, &out, 1, BRAID_INT32, BRAID_SUM, BRAID_WORLD, NULL));
    CHECK(out == n * me + n * (n - 1) / 2);
    for (j = 0; j < n; ++j) in[j] = j + me;
    OK(braid_reduce_scatter(in, in, 1, BRAID_INT32, BRAID_SUM, BRAID_WORLD, NULL));
    CHECK(in[me] == n * me + n * (n - 1) / 2);
  }
  /* all_to_all: block j sent to j holds 10 * me + j */
  {
    int64_t in[8], out[8];
    for (j = 0; j < n; ++j) in[j] = 10 * me + j;
    OK(braid_all_to_all(in, out, 1, BRAID_INT64, BRAID_WORLD, NULL));
    for (j = 0; j < n; ++j) CHECK(out[j] == 10 * j + me);
  }
  /* all_to_all_v: rank r sends r + 1 elements to each rank */
  {
    int64_t sc[8], rc[8], in[64], out[64];
    int pos = 0;
    for (j = 0; j < n; ++j) sc[j] = me + 1, rc[j] = j + 1;
    for (j = 0; j < n * (me + 1); ++j) in[j] = 1000 * me + j / (me + 1);
    OK(braid_all_to_all_v(in, sc, out, rc, BRAID_INT64, BRAID_WORLD, NULL));
    for (j = 0; j < n; ++j)
      for (i = 0; i <= j; ++i) CHECK(out[pos++] == 1000 * j + me);
  }
}

static void test_p2p(int n) {
  /* a ring: send right, receive from the left, blocking send and a request
   * for the receive; then any-source with the source written back */
  int32_t out[4] = {me, me, me, me}, in[4] = {-1, -1, -1, -1};
  const int right = (me + 1) % n, left = (me + n - 1) % n;
  braid_request_t r = NULL;
  int source = -1;
  OK(braid_recv(in, 4, BRAID_INT32, left, 5, BRAID_WORLD, &source, &r));
  OK(braid_send(out, 4, BRAID_INT32, right, 5, BRAID_WORLD, NULL));
  OK(braid_wait(r));
  CHECK(in[0] == left && in[3] == left);
  CHECK(source == left);
  if (me == 0) {
    int k, seen = 0;
    for (k = 1; k < n; ++k) {
      int32_t v = -1;
      source = -1;
      OK(braid_recv(&v, 1, BRAID_INT32, BRAID_ANY_SOURCE, 9, BRAID_WORLD, &source, NULL));
      CHECK(v == source * 3);
      seen |= 1 << source;
    }
    CHECK(seen == (1 << n) - 2);
  } else {
    int32_t v = me * 3;
    braid_request_t s = NULL;
    OK(braid_send(&v, 1, BRAID_INT32, 0, 9, BRAID_WORLD, &s));
    OK(braid_wait_all(&s, 1));
    CHECK(s == NULL);
  }
  /* a receive into a larger buffer says how much arrived: 3 of 8 elements
   * blocking, 2 of 8 through a request; the rest of the buffer untouched */
  {
    int32_t big[8] = {-1, -1, -1, -1, -1, -1, -1, -1};
    int32_t three[3] = {me, me, me};
    int64_t got = -1;
    braid_request_t q = NULL;
    source = -1;
    OK(braid_send(three, 3, BRAID_INT32, right, 14, BRAID_WORLD, &q));
    OK(braid_recv_count(big, 8, BRAID_INT32, left, 14, BRAID_WORLD, &source, &got, NULL));
    OK(braid_wait(q));
    CHECK(got == 3 && source == left && big[2] == left && big[3] == -1);
    got = -1;
    OK(braid_recv_count(big, 8, BRAID_INT32, left, 15, BRAID_WORLD, NULL, &got, &q));
    CHECK(got == -1); /* written at completion, not before */
    OK(braid_send(three, 2, BRAID_INT32, right, 15, BRAID_WORLD, NULL));
    OK(braid_wait(q));
    CHECK(got == 2);
  }
  OK(braid_barrier(BRAID_WORLD, NULL));
}

static void test_mpi_style(int n) {
  /* sendrecv around the ring, then wait_any over two receives */
  int32_t out[3] = {me, me, me}, in[3] = {-1, -1, -1};
  int source = -1, index = -1;
  const int right = (me + 1) % n, left = (me + n - 1) % n;
  OK(braid_sendrecv(out, 3, right, in, 3, left, BRAID_INT32, 11, BRAID_WORLD, &source, NULL));
  CHECK(in[2] == left && source == left);
  {
    braid_request_t rs[3] = {NULL, NULL, NULL};
    int32_t a = -1, b = -1;
    OK(braid_recv(&a, 1, BRAID_INT32, left, 12, BRAID_WORLD, NULL, &rs[0]));
    OK(braid_recv(&b, 1, BRAID_INT32, right, 13, BRAID_WORLD, NULL, &rs[2]));
    OK(braid_send(&me, 1, BRAID_INT32, right, 12, BRAID_WORLD, NULL));
    OK(braid_send(&me, 1, BRAID_INT32, left, 13, BRAID_WORLD, NULL));
    OK(braid_wait_any(rs, 3, &index));
    CHECK(index == 0 || index == 2);
    CHECK(rs[index] == NULL);
    OK(braid_wait_all(rs, 3));
    CHECK(a == left && b == right);
    CHECK(braid_wait_any(rs, 3, &index) == BRAID_ERR_INVALID_ARGUMENT); /* all NULL now */
  }
  /* split the world by parity, key reversing the order */
  {
    braid_group_t half = NULL, none = NULL;
    int32_t v = 1;
    OK(braid_group_split(BRAID_WORLD, me % 2, -me, &half));
    CHECK(braid_group_size(half) == (n + 1 - me % 2) / 2);
    OK(braid_all_reduce(&v, &v, 1, BRAID_INT32, BRAID_SUM, half, NULL));
    CHECK(v == braid_group_size(half));
    OK(braid_group_split(half, braid_group_rank(half) == 0 ? 0 : BRAID_NO_COLOR, 0, &none));
    CHECK(braid_group_rank(none) == (braid_group_rank(half) == 0 ? 0 : -1));
    OK(braid_group_free(none));
    OK(braid_group_free(half));
  }
}

static void test_group(void) {
  /* ranks 0 and 2; everyone calls braid_group_new */
  const int ranks[2] = {2, 0};
  braid_group_t g = NULL;
  OK(braid_group_new(ranks, 2, &g));
  if (me == 0 || me == 2) {
    int32_t v = me + 1, sum = 0;
    CHECK(braid_group_size(g) == 2);
    CHECK(braid_group_rank(g) == (me == 2 ? 0 : 1));
    OK(braid_all_reduce(&v, &sum, 1, BRAID_INT32, BRAID_SUM, g, NULL));
    CHECK(sum == 4);
    /* roots are global ranks */
    int32_t b = me == 2 ? 77 : 0;
    OK(braid_broadcast(&b, 1, BRAID_INT32, 2, g, NULL));
    CHECK(b == 77);
  } else {
    CHECK(braid_group_rank(g) == -1);
  }
  OK(braid_group_free(g));
}

static void test_comm(int n) {
  /* A communicator of the ranks 1..n-1 only, over a file store of their own,
   * beside the default group: its ranks are 0..n-2. */
  char store[256];
  const char* port = getenv("MASTER_PORT");
  snprintf(store, sizeof store, "file:///tmp/braid-c-test-comm-%s", port ? port : "0");
  if (me >= 1) {
    braid_comm_t comm = NULL;
    int32_t v = 1, b = -1;
    OK(braid_comm_create(store, 0, me - 1, n - 1, "odd-ones", 30000, &comm));
    CHECK(braid_comm_rank(comm) == me - 1 && braid_comm_size(comm) == n - 1);
    OK(braid_all_reduce(&v, &v, 1, BRAID_INT32, BRAID_SUM, braid_comm_group(comm), NULL));
    CHECK(v == n - 1);
    if (braid_comm_rank(comm) == 0) b = 99;
    OK(braid_broadcast(&b, 1, BRAID_INT32, 0, braid_comm_group(comm), NULL)); /* the comm's rank 0 */
    CHECK(b == 99);
    {
      /* Rooted ops take the communicator's ranks: its rank 1 is world rank 2. */
      const int cn = n - 1, cme = me - 1;
      int32_t mine = cme + 10, all[8] = {0}, got = -1, sum = -1;
      int32_t src[8];
      int i;
      OK(braid_gather(&mine, cme == 1 ? all : NULL, 1, BRAID_INT32, 1, braid_comm_group(comm), NULL));
      if (cme == 1)
        for (i = 0; i < cn; ++i) CHECK(all[i] == i + 10);
      for (i = 0; i < cn; ++i) src[i] = 100 + i;
      OK(braid_scatter(cme == 1 ? src : NULL, &got, 1, BRAID_INT32, 1, braid_comm_group(comm), NULL));
      CHECK(got == 100 + cme);
      OK(braid_reduce(&mine, cme == 1 ? &sum : NULL, 1, BRAID_INT32, BRAID_SUM, 1, braid_comm_group(comm), NULL));
      if (cme == 1) CHECK(sum == cn * 10 + cn * (cn - 1) / 2);
    }
    CHECK(braid_group_free(braid_comm_group(comm)) == BRAID_ERR_INVALID_ARGUMENT); /* the comm owns it */
    OK(braid_comm_free(comm));
  }
  {
    braid_comm_t bad = NULL;
    CHECK(braid_comm_create("udp://x:1", 0, 0, 1, NULL, 0, &bad) == BRAID_ERR_INVALID_ARGUMENT);
    CHECK(bad == NULL);
  }
  OK(braid_barrier(BRAID_WORLD, NULL));
}

static void test_coalesced(int n) {
  int32_t a[3] = {1, 2, 3};
  double b[2] = {0.5, me};
  float c[1] = {2.0f};
  void* bufs[3] = {a, b, c};
  const int64_t counts[3] = {3, 2, 1};
  const braid_dtype_t dtypes[3] = {BRAID_INT32, BRAID_FLOAT64, BRAID_FLOAT32};
  braid_request_t r = NULL;
  OK(braid_all_reduce_coalesced(bufs, counts, dtypes, 3, BRAID_SUM, BRAID_WORLD, &r));
  OK(braid_wait(r));
  CHECK(a[0] == n && a[2] == 3 * n);
  CHECK(b[0] == 0.5 * n && b[1] == n * (n - 1) / 2.0);
  CHECK(c[0] == 2.0f * n);
}

static void test_errors(int n) {
  int32_t x = 1;
  /* a root out of range: an argument error on every rank, the job goes on */
  int st = braid_broadcast(&x, 1, BRAID_INT32, n + 3, BRAID_WORLD, NULL);
  CHECK(st == BRAID_ERR_INVALID_ARGUMENT);
  CHECK(strlen(braid_error_string()) > 0);
  CHECK(strcmp(braid_status_name(st), "BRAID_ERR_INVALID_ARGUMENT") == 0);
  st = braid_all_reduce(&x, &x, 1, (braid_dtype_t)99, BRAID_SUM, BRAID_WORLD, NULL);
  CHECK(st == BRAID_ERR_INVALID_ARGUMENT);
  CHECK(strstr(braid_error_string(), "dtype 99") != NULL);
  st = braid_all_reduce(NULL, &x, 4, BRAID_INT32, BRAID_SUM, BRAID_WORLD, NULL);
  CHECK(st == BRAID_ERR_INVALID_ARGUMENT);
  CHECK(braid_wait(NULL) == BRAID_ERR_INVALID_ARGUMENT);
  CHECK(braid_init(NULL, -1, -1) == BRAID_ERR_INVALID_STATE); /* twice */
  /* and afterwards the job still works */
  OK(braid_all_reduce(&x, &x, 1, BRAID_INT32, BRAID_SUM, BRAID_WORLD, NULL));
  CHECK(x == n);
  OK(braid_all_reduce(&x, &x, 1, BRAID_INT32, BRAID_SUM, BRAID_WORLD, NULL));
  CHECK(strlen(braid_error_string()) == 0); /* a successful call clears it */
}

int main(void) {
  int n;
  CHECK(braid_rank() == -1 && braid_size() == -1 && braid_initialized() == 0);
  {
    int32_t x = 0;
    CHECK(braid_all_reduce(&x, &x, 1, BRAID_INT32, BRAID_SUM, BRAID_WORLD, NULL) == BRAID_ERR_INVALID_STATE);
  }
  OK(braid_init(NULL, -1, -1));
  me = braid_rank();
  n = braid_size();
  CHECK(braid_initialized() == 1);
  if (n < 4 || n > 8) {
    fprintf(stderr, "run with 4 to 8 ranks (braidrun -n 4), not %d\n", n);
    return 1;
  }
  test_all_reduce(n);
  test_rooted(n);
  test_gathers(n);
  test_p2p(n);
  test_group();
  test_mpi_style(n);
  test_comm(n);
  test_coalesced(n);
  test_errors(n);
  OK(braid_finalize());
  CHECK(braid_rank() == -1);
  if (failures) {
    fprintf(stderr, "rank %d: %d check(s) failed\n", me, failures);
    return 1;
  }
  printf("rank %d of %d: C API ok (%s)\n", me, n, braid_version());
  return 0;
}
