#!/bin/bash
# run_in_vm.sh: the verbs transport's tests for real, under Soft-RoCE in a
# throw-away VM (tools/rxe-vm), with BRAID_TEST_BACKEND=verbs.
#
#   tests/verbs/run_in_vm.sh [--build-dir DIR] [--steps "STEP ..."] [--timeout SECS] [--memory SIZE]
#
# DIR is a build made on this host (default build-verbs); it runs inside the
# VM as is. Steps, in order (default: all of them):
#   info      braid-info lists rxe0 and picks the RoCE v2 GID the guest found
#   unit      tests/verbs/test_verbs_unit: loopback QPs, stale registrations
#   wire      tests/verbs/test_verbs_wire: hostile handshakes and malformed messages
#             (with a secret too: a stranger's wrong proof on the verbs listener)
#   auth      tests/p2p/test_auth "[join]": a job with a secret over verbs (its
#             handshakes authenticated), intruders refused
#   p2p       tests/p2p/test_p2p, every case but [bounds]
#   failure   tests/p2p/test_failure, "a rank killed mid-transfer" case
#   coll2     tests/collectives/test_collectives "collectives at 2 ranks"
#   coll4     ... "collectives at 4 ranks"
#   coll8     ... "collectives at 8 ranks"
#   auto      backend "auto" picks verbs between "hosts": examples/hello, two ranks in
#             separate pid namespaces (which Braid counts as separate hosts)
#   hosts     one-sided plans over an RDMA window between such "hosts": braid-bench
#             --backend verbs --algo A, every one-sided algorithm, outputs checked
# Each step prints its time; the script exits 0 only if every step passed
# (77 if the VM cannot run here, as tools/rxe-vm does).
set -uo pipefail

HERE=$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")" && pwd -P)
REPO=$(cd "$HERE/../.." && pwd -P)

# ---- inside the VM ----------------------------------------------------------------------
if [[ ${1:-} == --inside ]]; then
  BUILD=$2
  shift 2
  export BRAID_TEST_BACKEND=verbs
  failed=()
  run_step() { # name, command...
    local name=$1 t0 t1 rc
    shift
    echo "=== step $name: $*"
    t0=$(date +%s%N)
    "$@"
    rc=$?
    t1=$(date +%s%N)
    local ds=$(((t1 - t0) / 100000000))
    printf '=== step %s: %s in %d.%d s\n' "$name" "$([ $rc = 0 ] && echo PASS || echo "FAIL (exit $rc)")" \
      $((ds / 10)) $((ds % 10))
    [ $rc = 0 ] || failed+=("$name")
  }
  info_step() {
    local out
    out=$("$BUILD/tools/braid-info") || return 1
    echo "$out" | sed -n '/^RDMA devices/,/^CUDA devices/p'
    echo "$out" | grep -q "rxe0 port 1: ACTIVE" || { echo "braid-info does not list rxe0 as ACTIVE"; return 1; }
    echo "$out" | grep -q "Braid would use: rxe0 port 1, GID index ${RXE_GID0} " ||
      { echo "braid-info does not pick GID index ${RXE_GID0}"; return 1; }
  }
  auto_step() {
    local port=$((20000 + RANDOM % 20000)) logs=/tmp/braid-auto r rc=0 pids=()
    mkdir -p $logs
    for r in 0 1; do
      env -u BRAID_TEST_BACKEND MASTER_ADDR=127.0.0.1 MASTER_PORT=$port RANK=$r WORLD_SIZE=2 BRAID_DEBUG=INFO \
        unshare --pid --fork "$BUILD/examples/hello" > $logs/out$r 2> $logs/err$r &
      pids+=($!)
    done
    for r in "${pids[@]}"; do wait "$r" || rc=1; done
    cat $logs/out0 $logs/out1
    grep -h "rank [0-9]*: verbs\|verbs: using" $logs/err0 $logs/err1
    [ $rc = 0 ] && grep -q "sum of ranks 1" $logs/out0 && grep -q "rank 1: verbs$" $logs/err0 ||
      { echo "backend auto did not use verbs between the two namespaces"; cat $logs/err0 $logs/err1; return 1; }
  }
  # One-sided plans over RDMA between "hosts": two ranks in separate pid
  # namespaces (separate hosts to Braid), backend verbs, braid-bench checking
  # every output element, one run per one-sided algorithm.
  hosts_step() {
    local port logs=/tmp/braid-hosts r rc=0 pids=() coll algo runs=0
    mkdir -p $logs
    for coll_algo in allreduce:oneshot allreduce:twoshot allreduce:staged allreduce:push allgather:oneshot \
      allgather:peer_read allgather:staged broadcast:oneshot broadcast:peer_read reduce:oneshot reduce:peer_read \
      reducescatter:oneshot reducescatter:peer_read gather:peer_read scatter:peer_read alltoall:peer_read; do
      coll=${coll_algo%%:*} algo=${coll_algo#*:} pids=() port=$((20000 + RANDOM % 20000))
      for r in 0 1; do
        env -u BRAID_TEST_BACKEND MASTER_ADDR=127.0.0.1 MASTER_PORT=$port RANK=$r WORLD_SIZE=2 BRAID_DEBUG=INFO \
          unshare --pid --fork "$BUILD/bench/braid-bench" $coll --backend verbs --algo $algo -b 8 -e 1M -f 32 \
          -n 3 -w 1 -c 1 --timeout 120 > $logs/out$r 2> $logs/err$r &
        pids+=($!)
      done
      for r in "${pids[@]}"; do wait "$r" || rc=1; done
      runs=$((runs + 1))
      if ! grep -q "RDMA window for group" $logs/err0 || ! grep -q "1048576" $logs/out0; then
        echo "$coll $algo: no RDMA window, or no result up to 1 MiB"; rc=1
      fi
      if [ $rc != 0 ]; then
        echo "--- $coll $algo failed"; tail -n 5 $logs/out0; tail -n 20 $logs/err0 $logs/err1
        return 1
      fi
      echo "$coll $algo: checked 8 B to 1 MiB over an RDMA window between two namespaces"
    done
    echo "$runs one-sided algorithms passed between hosts"
    # A peer killed while one-sided calls run: the survivor fails within
    # seconds, naming it, instead of waiting out its timeout.
    port=$((20000 + RANDOM % 20000)) pids=()
    for r in 0 1; do
      env -u BRAID_TEST_BACKEND MASTER_ADDR=127.0.0.1 MASTER_PORT=$port RANK=$r WORLD_SIZE=2 \
        unshare --pid --fork --kill-child=KILL "$BUILD/bench/braid-bench" allreduce --backend verbs --algo oneshot \
        -b 8 -e 8 -n 1000000 -w 1 -c 0 --timeout 120 > $logs/out$r 2> $logs/err$r &
      pids+=($!)
    done
    sleep 4
    kill -9 "${pids[1]}"
    local t0=$SECONDS
    wait "${pids[0]}" && { echo "rank 0 went on although rank 1 was killed"; return 1; }
    local took=$((SECONDS - t0))
    cat $logs/err0 | tail -n 3
    grep -q "rank 1" $logs/err0 || { echo "rank 0's error does not name rank 1"; return 1; }
    ((took < 60)) || { echo "rank 0 took $took s to fail"; return 1; }
    echo "killing rank 1 mid-run: rank 0 failed after $took s, naming rank 1"
  }
  for step in $STEPS; do
    case $step in
      info) run_step info info_step ;;
      unit) run_step unit "$BUILD/tests/verbs/test_verbs_unit" ;;
      transports) BRAID_TEST_REQUIRE_VERBS=1 run_step transports "$BUILD/tests/transports/test_transports" --durations yes ;;
      wire) run_step wire "$BUILD/tests/verbs/test_verbs_wire" --durations yes ;;
      auth) run_step auth "$BUILD/tests/p2p/test_auth" --durations yes "[join]" ;;
      # (not [bounds]: the verbs transport does not hold peers back yet, and
      # that case would pass over Soft-RoCE only because the flood is slow)
      p2p) run_step p2p "$BUILD/tests/p2p/test_p2p" --durations yes "~[bounds]" ;;
      failure) run_step failure "$BUILD/tests/p2p/test_failure" --durations yes \
        "a rank killed mid-transfer: every survivor learns within seconds" ;;
      coll2) run_step coll2 "$BUILD/tests/collectives/test_collectives" --durations yes "collectives at 2 ranks" ;;
      coll4) run_step coll4 "$BUILD/tests/collectives/test_collectives" --durations yes "collectives at 4 ranks" ;;
      coll8) run_step coll8 "$BUILD/tests/collectives/test_collectives" --durations yes "collectives at 8 ranks" ;;
      auto) run_step auto auto_step ;;
      hosts) run_step hosts hosts_step ;;
      *) echo "unknown step '$step'"; failed+=("$step") ;;
    esac
  done
  if ((${#failed[@]})); then
    echo "=== FAILED: ${failed[*]}"
    exit 1
  fi
  echo "=== all steps passed: $STEPS"
  exit 0
fi

# ---- on the host ------------------------------------------------------------------------
BUILD=build-verbs
STEPS="info unit transports wire auth auto hosts p2p failure coll2 coll4 coll8"
TIMEOUT=1800
MEMORY=3G
while (($#)); do
  case $1 in
    --build-dir) BUILD=$2; shift 2 ;;
    --steps) STEPS=$2; shift 2 ;;
    --timeout) TIMEOUT=$2; shift 2 ;;
    --memory) MEMORY=$2; shift 2 ;;
    -h | --help) sed -n '2,22p' "$0"; exit 0 ;;
    *) echo "run_in_vm.sh: unknown option '$1'" >&2; exit 2 ;;
  esac
done
BUILD=$(cd "$REPO" && readlink -f "$BUILD")
for f in tools/braid-info examples/hello bench/braid-bench tests/verbs/test_verbs_unit tests/verbs/test_verbs_wire tests/p2p/test_p2p tests/p2p/test_failure \
  tests/collectives/test_collectives; do
  [[ -x $BUILD/$f ]] || { echo "run_in_vm.sh: $BUILD/$f is missing: build first (ninja -C $BUILD)" >&2; exit 2; }
done
exec "$REPO/tools/rxe-vm" --build-dir "$BUILD" --timeout "$TIMEOUT" --memory "$MEMORY" \
  --env "STEPS=$STEPS" -- "$REPO/tests/verbs/run_in_vm.sh" --inside "$BUILD"
