/* Braid's C API: C99, usable from C and C++.
 *
 * A wrapper over the same runtime as the C++ API (<braid/braid.hpp>), not a
 * second implementation: every call here is one call there. Conventions:
 *   - every function returns BRAID_OK or an error code (one per
 *     braid::ErrorCode); braid_error_string() gives this thread's last error
 *     message. Nothing throws across this boundary. An argument error (a
 *     root out of range, a null buffer) leaves the job usable.
 *   - `request` NULL: the call blocks until done. Non-NULL: the call returns
 *     at once with *request set; braid_wait() completes and releases it
 *     (braid_test() polls). Buffers must stay valid until then.
 *   - sendbuf == recvbuf: in place (all_reduce, reduce; all_gather and
 *     reduce_scatter: this rank's own block of the buffer holds its input or
 *     gets its result).
 *   - `group` BRAID_WORLD (NULL) is the default group. Ranks (root, src,
 *     dst) are global ranks even when a group is given; on a communicator's
 *     group (braid_comm_group) they are the communicator's, 0..size-1.
 *   - counts are 64-bit element counts of `dtype`.
 *   - thread safety as in C++: init, finalize, group creation from one
 *     thread; ops from any.
 */
#ifndef BRAID_BRAID_H
#define BRAID_BRAID_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Status codes: BRAID_OK, then one per braid::ErrorCode, in its order. */
enum {
  BRAID_OK = 0,
  BRAID_ERR_INVALID_ARGUMENT = 1, /* the caller passed something wrong */
  BRAID_ERR_INVALID_STATE = 2,    /* not valid now (an op before init, init twice) */
  BRAID_ERR_TIMEOUT = 3,          /* a deadline passed */
  BRAID_ERR_PEER_FAILURE = 4,     /* a peer died or left */
  BRAID_ERR_TRANSPORT = 5,        /* an I/O error or a malformed frame from a peer */
  BRAID_ERR_STORE = 6,            /* the bootstrap store failed or is unreachable */
  BRAID_ERR_NOT_SUPPORTED = 7,    /* built without the needed feature */
  BRAID_ERR_INTERNAL = 8
};

/* In C++ the enums below hold any int (a fixed underlying type), as they do
 * in C: a C caller may pass a value outside them, which Braid then refuses
 * with BRAID_ERR_INVALID_ARGUMENT; without it merely reading such a value in
 * C++ would be undefined behaviour (UBSan's report in tools/sanitize). The
 * type is int either way. */
#ifdef __cplusplus
#define BRAID_ENUM_BASE : int
#else
#define BRAID_ENUM_BASE
#endif

/* Element types: braid::DType, in its order. */
typedef enum BRAID_ENUM_BASE {
  BRAID_INT8 = 0,
  BRAID_UINT8 = 1,
  BRAID_INT32 = 2,
  BRAID_INT64 = 3,
  BRAID_FLOAT16 = 4,
  BRAID_BFLOAT16 = 5,
  BRAID_FLOAT32 = 6,
  BRAID_FLOAT64 = 7
} braid_dtype_t;
#define BRAID_FLOAT BRAID_FLOAT32
#define BRAID_DOUBLE BRAID_FLOAT64

/* Reductions: braid::ReduceOp, in its order. AVG needs a floating dtype;
 * the bitwise ones an integer dtype. */
typedef enum BRAID_ENUM_BASE {
  BRAID_SUM = 0,
  BRAID_PROD = 1,
  BRAID_MIN = 2,
  BRAID_MAX = 3,
  BRAID_AVG = 4,
  BRAID_BAND = 5,
  BRAID_BOR = 6,
  BRAID_BXOR = 7
} braid_op_t;

typedef struct braid_group_s* braid_group_t;
typedef struct braid_request_s* braid_request_t;
typedef struct braid_comm_s* braid_comm_t;

#define BRAID_WORLD ((braid_group_t)0)
#define BRAID_ANY_SOURCE (-2)

/* --- init and identity ---------------------------------------------------- */

/* init_method: "env://" (NULL means it), "tcp://HOST:PORT" or "file:///path".
 * rank, world_size: -1 to take them from the environment (env://) or, for
 * rank, in order of arrival. Backend "auto", timeout 300 s. */
int braid_init(const char* init_method, int rank, int world_size);

typedef struct {
  const char* init_method; /* NULL: "env://" */
  int rank;                /* -1: from the environment / in order of arrival */
  int world_size;          /* -1: from the environment */
  const char* backend;     /* NULL: "auto"; "tcp", "shm", "verbs", "cuda" */
  int64_t timeout_ms;      /* 0: 300000; the default deadline of every wait */
  const char* group_name;  /* NULL: ""; jobs sharing a store stay apart by name */
} braid_init_options_t;
/* The defaults above, to change field by field. */
braid_init_options_t braid_init_options_default(void);
int braid_init_ex(const braid_init_options_t* options);

/* Ends the job for this process (destroy_process_group); groups made with
 * braid_group_new must not be used afterwards. */
int braid_finalize(void);
int braid_initialized(void); /* 1 or 0 */
int braid_rank(void);        /* -1 before init */
int braid_size(void);        /* -1 before init */

/* This thread's last error message ("" if none). Valid until this thread's
 * next Braid call. */
const char* braid_error_string(void);
/* The name of a status code ("BRAID_ERR_TIMEOUT"). */
const char* braid_status_name(int status);
const char* braid_version(void);

/* --- groups --------------------------------------------------------------- */

/* Every rank of the job calls it with the same ranks in the same order (as
 * MPI_Comm_create and torch's new_group); a rank outside gets a group whose
 * braid_group_rank is -1. Free it with braid_group_free. */
int braid_group_new(const int* ranks, int n, braid_group_t* group);
int braid_group_free(braid_group_t group);
/* Splits parent (BRAID_WORLD for the world) by colour, as MPI_Comm_split:
 * every member of parent calls it; members with the same color >= 0 form a
 * group ordered by key, then by parent rank. BRAID_NO_COLOR: *group is a
 * group this rank is outside of (braid_group_rank -1); free it too. */
#define BRAID_NO_COLOR (-1)
int braid_group_split(braid_group_t parent, int color, int key, braid_group_t* group);
int braid_group_rank(braid_group_t group); /* -1 if outside, or on error */
int braid_group_size(braid_group_t group); /* -1 on error */

/* --- communicators: groups made by their members alone --------------------- */

/* A process group of its own, made by just its members over a store they
 * share (braid::Communicator), beside the default group or without one.
 * store: "tcp://HOST:PORT" (serve = 1 on the member that hosts it) or
 * "file:///PATH"; name (NULL: "comm") keeps communicators on one store apart;
 * timeout_ms 0: 300000. Every member calls it; it returns once all joined. */
int braid_comm_create(const char* store, int serve, int rank, int size, const char* name, int64_t timeout_ms,
                      braid_comm_t* comm);
int braid_comm_free(braid_comm_t comm);
int braid_comm_rank(braid_comm_t comm); /* -1 on error */
int braid_comm_size(braid_comm_t comm); /* -1 on error */
/* Its group, for every op (ranks in ops are then the communicator's,
 * 0..size-1). Owned by the communicator: braid_group_free refuses it. */
braid_group_t braid_comm_group(braid_comm_t comm);

/* --- requests ------------------------------------------------------------- */

/* Waits for the op and releases the request; returns the op's status. */
int braid_wait(braid_request_t request);
/* Like braid_wait, giving up after timeout_ms: *done says whether it
 * completed (then it is released); the request stays valid if not. */
int braid_wait_for(braid_request_t request, int64_t timeout_ms, int* done);
/* Non-blocking: *done = 1 once the op finished; it is then released and
 * *request set to NULL, and the op's status returned. */
int braid_test(braid_request_t* request, int* done);
/* Waits for every request (NULL entries are skipped), releasing each; returns
 * the first failure's status (all are waited for regardless). */
int braid_wait_all(braid_request_t* requests, int n);
/* Waits until one request (of the non-NULL ones) completes: *index says
 * which; it is released, requests[*index] set to NULL, and its status
 * returned. BRAID_ERR_INVALID_ARGUMENT when every entry is NULL. */
int braid_wait_any(braid_request_t* requests, int n, int* index);

/* --- point to point ------------------------------------------------------- */

/* Messages match on (group, source, tag). */
int braid_send(const void* buf, int64_t count, braid_dtype_t dtype, int dst, int64_t tag,
               braid_group_t group, braid_request_t* request);
/* src may be BRAID_ANY_SOURCE; *source (may be NULL) gets the sender's global
 * rank once the receive completes (for a request: at braid_wait/braid_test). */
int braid_recv(void* buf, int64_t count, braid_dtype_t dtype, int src, int64_t tag, braid_group_t group,
               int* source, braid_request_t* request);
/* braid_recv that also says how many elements arrived (MPI_Get_count):
 * *received (may be NULL) gets it, which may be fewer than count; written
 * as *source is, once the receive completes. A message larger than count is
 * an error, as in braid_recv. */
int braid_recv_count(void* buf, int64_t count, braid_dtype_t dtype, int src, int64_t tag, braid_group_t group,
                     int* source, int64_t* received, braid_request_t* request);

/* Sends sendcount elements to dst while receiving up to recvcount from src
 * (MPI_Sendrecv: a ring shift cannot deadlock). *source as in braid_recv. */
int braid_sendrecv(const void* sendbuf, int64_t sendcount, int dst, void* recvbuf, int64_t recvcount, int src,
                   braid_dtype_t dtype, int64_t tag, braid_group_t group, int* source, braid_request_t* request);

/* --- collectives ---------------------------------------------------------- */

int braid_barrier(braid_group_t group, braid_request_t* request);
int braid_broadcast(void* buf, int64_t count, braid_dtype_t dtype, int root, braid_group_t group,
                    braid_request_t* request);
int braid_all_reduce(const void* sendbuf, void* recvbuf, int64_t count, braid_dtype_t dtype, braid_op_t op,
                     braid_group_t group, braid_request_t* request);
/* recvbuf is written on root only (may be NULL elsewhere). */
int braid_reduce(const void* sendbuf, void* recvbuf, int64_t count, braid_dtype_t dtype, braid_op_t op, int root,
                 braid_group_t group, braid_request_t* request);
/* count elements from each rank; recvbuf holds group-size blocks, in group
 * rank order. */
int braid_all_gather(const void* sendbuf, void* recvbuf, int64_t count, braid_dtype_t dtype, braid_group_t group,
                     braid_request_t* request);
/* recvbuf (group-size blocks of count) on root only; NULL elsewhere. */
int braid_gather(const void* sendbuf, void* recvbuf, int64_t count, braid_dtype_t dtype, int root,
                 braid_group_t group, braid_request_t* request);
/* sendbuf (group-size blocks of count) on root only; NULL elsewhere. */
int braid_scatter(const void* sendbuf, void* recvbuf, int64_t count, braid_dtype_t dtype, int root,
                  braid_group_t group, braid_request_t* request);
/* sendbuf holds group-size blocks of count; recvbuf gets this rank's block
 * reduced over the group (sendbuf == recvbuf: it lands in this rank's block). */
int braid_reduce_scatter(const void* sendbuf, void* recvbuf, int64_t count, braid_dtype_t dtype, braid_op_t op,
                         braid_group_t group, braid_request_t* request);
/* Block i of sendbuf (count elements) goes to group rank i; block j of
 * recvbuf comes from group rank j. */
int braid_all_to_all(const void* sendbuf, void* recvbuf, int64_t count, braid_dtype_t dtype, braid_group_t group,
                     braid_request_t* request);
/* Uneven blocks: sendcounts[i] elements to group rank i, recvcounts[j] from
 * group rank j, each packed in rank order. */
int braid_all_to_all_v(const void* sendbuf, const int64_t* sendcounts, void* recvbuf, const int64_t* recvcounts,
                       braid_dtype_t dtype, braid_group_t group, braid_request_t* request);
/* All-reduces n buffers in place in one call (mixed dtypes and sizes; one
 * all_reduce per dtype). */
int braid_all_reduce_coalesced(void* const* bufs, const int64_t* counts, const braid_dtype_t* dtypes, int n,
                               braid_op_t op, braid_group_t group, braid_request_t* request);

#ifdef __cplusplus
}
#endif

#endif /* BRAID_BRAID_H */
