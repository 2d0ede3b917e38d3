#!/usr/bin/env bash
# A real Slurm across 2 emulated hosts (tools/slurm-cluster: slurmctld, one
# slurmd per host, munge): srun starts 4 Braid ranks, 2 per node, with
# Slurm's variables alone; they must find the store on the step's first node
# and finish their token ring, sum and a checked all_reduce. Skipped (77)
# where Slurm is not installed (slurm-wlm and munge from Debian; the
# quickstart does not install them) or namespaces cannot be made.
set -uo pipefail
src="$1"; hello="$2"; bench="$3"
[[ $(id -u) == 0 ]] || { echo "not root: network namespaces and Slurm's daemons need it"; exit 77; }
for p in slurmctld slurmd srun munged sinfo; do
  command -v $p >/dev/null || { echo "no $p here: apt-get install slurm-wlm munge to run this test"; exit 77; }
done
name="ss$(( $$ % 10000 ))"
conf=$("$src/tools/slurm-cluster" up 2 --name "$name" 2>/tmp/$name.log) ||
  { echo "tools/slurm-cluster could not start Slurm here:"; cat /tmp/$name.log; "$src/tools/slurm-cluster" down --name "$name"; exit 77; }
trap '"$src/tools/slurm-cluster" down --name "$name"; rm -f /tmp/$name.log /tmp/$name.out' EXIT
fail=0
SLURM_CONF=$conf timeout 120 "$src/tools/cluster" exec "${name}1" srun -N2 -n4 --ntasks-per-node=2 \
  env -u MASTER_ADDR -u MASTER_PORT -u RANK -u WORLD_SIZE "$hello" > /tmp/$name.out 2>&1 ||
  { echo "FAIL: srun hello"; cat /tmp/$name.out; fail=1; }
for r in 0 1 2 3; do
  grep -q "^rank $r of 4 .*sum of ranks 6$" /tmp/$name.out || { echo "FAIL: task $r did not report"; fail=1; }
done
SLURM_CONF=$conf timeout 120 "$src/tools/cluster" exec "${name}1" srun -N2 -n4 --ntasks-per-node=2 \
  env -u MASTER_ADDR -u MASTER_PORT "$bench" allreduce -b 8 -e 1M -f 128 -n 5 -w 1 -c 1 > /tmp/$name.out 2>&1 ||
  { echo "FAIL: srun braid-bench"; cat /tmp/$name.out; fail=1; }
grep -q "Out of bounds values : 0 OK" /tmp/$name.out || { echo "FAIL: braid-bench under srun: wrong results"; cat /tmp/$name.out; fail=1; }
(( fail )) || echo "srun on a real Slurm (2 emulated nodes): 4 tasks, store on ${name}1, all_reduce right"
# srun --mpi=pmix: the ranks and the store's address through Slurm's PMIx
# server (pmix://), where Slurm has the plugin and Braid has PMIx.
SLURM_CONF=$conf timeout 120 "$src/tools/cluster" exec "${name}1" srun --mpi=pmix -N2 -n4 --ntasks-per-node=2 \
  env -u MASTER_ADDR -u MASTER_PORT -u RANK -u WORLD_SIZE "$hello" pmix > /tmp/$name.out 2>&1
rc=$?
if grep -q "has no PMIx" /tmp/$name.out; then
  echo "this build has no PMIx: srun --mpi=pmix not tried"
elif grep -qi "mpi/pmix.*\(not found\|invalid\)\|MPI type.*pmix" /tmp/$name.out; then
  echo "this Slurm has no PMIx plugin: srun --mpi=pmix not tried"; cat /tmp/$name.out
else
  (( rc == 0 )) || { echo "FAIL: srun --mpi=pmix hello pmix"; cat /tmp/$name.out; fail=1; }
  for r in 0 1 2 3; do
    grep -q "^rank $r of 4 (pmix://).*sum of ranks 6$" /tmp/$name.out || { echo "FAIL: PMIx task $r did not report"; fail=1; }
  done
  (( fail )) || echo "srun --mpi=pmix: 4 tasks on 2 nodes met through Slurm's PMIx, no MASTER_ADDR"
fi
exit $fail
