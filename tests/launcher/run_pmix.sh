#!/usr/bin/env bash
# Braid under a PMIx launcher on this host: Open MPI's mpirun starts hello
# with no MASTER_ADDR or MASTER_PORT, and the ranks and the store's address
# come through PMIx, both as env:// (which finds the launcher) and as
# pmix://. Skipped (77) without mpirun.openmpi, or where this build has no
# PMIx (libpmix-dev). Across hosts: run_cluster_launchers.sh.
set -uo pipefail
hello="$1"
command -v mpirun.openmpi >/dev/null || { echo "no mpirun.openmpi here (Open MPI): not run"; exit 77; }
out=$(mktemp)
trap 'rm -f "$out"' EXIT
fail=0
for how in env pmix; do
  env -u MASTER_ADDR -u MASTER_PORT -u RANK -u WORLD_SIZE OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
    timeout 120 mpirun.openmpi -np 3 --oversubscribe --bind-to none "$hello" $how > "$out" 2>&1
  rc=$?
  grep -q "has no PMIx" "$out" && { echo "this build has no PMIx (meson feature 'pmix', libpmix-dev): not run"; exit 77; }
  (( rc == 0 )) || { echo "FAIL: mpirun -np 3 hello $how exited $rc"; cat "$out"; fail=1; continue; }
  for r in 0 1 2; do
    grep -q "^rank $r of 3 (${how}://).*sum of ranks 3$" "$out" || { echo "FAIL: rank $r ($how) did not report"; cat "$out"; fail=1; }
  done
  (( fail )) || echo "mpirun -np 3 hello $how: 3 ranks met through PMIx, no MASTER_ADDR"
done
exit $fail
