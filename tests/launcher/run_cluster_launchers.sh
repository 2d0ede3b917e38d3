#!/usr/bin/env bash
# Braid ranks started across 2 emulated hosts (tools/cluster) by launchers
# other than braidrun:
#  - as srun starts tasks: Slurm's variables alone (SLURM_PROCID,
#    SLURM_NTASKS, a compressed SLURM_STEP_NODELIST, SLURM_JOB_ID), no
#    MASTER_ADDR or MASTER_PORT: the store must come up on the first node;
#  - Open MPI's mpirun (rsh agent: tools/cluster rsh), where it exists, with
#    MASTER_ADDR and MASTER_PORT passed by -x: ranks from OMPI_COMM_WORLD_*;
#  - the same without them: the ranks and the store's address through PMIx
#    (env:// finding the launcher, and pmix://), where Braid has PMIx.
# Every rank must finish its token ring and sum. Skipped (77) where
# namespaces cannot be made (not root).
set -uo pipefail
src="$1"; hello="$2"
source "$(dirname "$0")/cluster_up.sh"
cluster_up bl 2
fail=0

# Slurm: 2 tasks per node on ${name}1 and ${name}2, the node list compressed.
job=$(( 1000 + $$ % 50000 ))
pids=()
for r in 0 1 2 3; do
  host="${name}$(( r / 2 + 1 ))"
  "$cluster" exec "$host" env -u MASTER_ADDR -u MASTER_PORT -u RANK -u WORLD_SIZE \
    SLURM_PROCID=$r SLURM_NTASKS=4 SLURM_STEP_NODELIST="${name}[1-2]" SLURM_JOB_ID=$job \
    "$hello" > /tmp/$name.out.$r 2>&1 &
  pids+=($!)
done
for i in 0 1 2 3; do
  wait "${pids[$i]}" || { echo "FAIL: Slurm-started task $i failed"; cat /tmp/$name.out.$i; fail=1; }
  grep -q "^rank $i of 4 .*sum of ranks 6$" /tmp/$name.out.$i || { echo "FAIL: task $i did not report"; cat /tmp/$name.out.$i; fail=1; }
done
rm -f /tmp/$name.out.[0-3]
(( fail )) || echo "Slurm's variables alone, node list ${name}[1-2]: 4 tasks on 2 hosts found the store on ${name}1"

# Open MPI's mpirun across the hosts.
if command -v mpirun.openmpi >/dev/null; then
  subnet=$("$cluster" subnet --name "$name")
  port=$(( 20000 + $$ % 20000 ))
  OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 timeout 120 mpirun.openmpi -np 4 \
    --host "${name}1:2,${name}2:2" --mca plm_rsh_agent "$cluster rsh" --mca btl_tcp_if_include "$subnet" \
    --mca oob_tcp_if_include "$subnet" --bind-to none -x MASTER_ADDR="${name}1" -x MASTER_PORT=$port \
    "$hello" > /tmp/$name.out 2>&1 || { echo "FAIL: mpirun across the hosts"; cat /tmp/$name.out; fail=1; }
  for r in 0 1 2 3; do
    grep -q "^rank $r of 4 .*sum of ranks 6$" /tmp/$name.out || { echo "FAIL: mpirun's rank $r did not report"; fail=1; }
  done
  (( fail )) || echo "Open MPI's mpirun: 4 ranks on 2 hosts, ranks from OMPI_COMM_WORLD_*"
  # Through PMIx: no MASTER_ADDR or MASTER_PORT; env:// finds the PMIx
  # launcher by itself, pmix:// asks for it.
  for how in env pmix; do
    out=/tmp/$name.pmix.out
    env -u MASTER_ADDR -u MASTER_PORT OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 timeout 120 \
      mpirun.openmpi -np 4 --host "${name}1:2,${name}2:2" --mca plm_rsh_agent "$cluster rsh" \
      --mca btl_tcp_if_include "$subnet" --mca oob_tcp_if_include "$subnet" --bind-to none \
      "$hello" $how > $out 2>&1
    rc=$?
    if grep -q "has no PMIx" $out; then
      echo "this build has no PMIx (libpmix-dev): the PMIx part did not run"; break
    fi
    (( rc == 0 )) || { echo "FAIL: mpirun through PMIx ($how)"; cat $out; fail=1; }
    for r in 0 1 2 3; do
      grep -q "^rank $r of 4 (${how}://).*sum of ranks 6$" $out || { echo "FAIL: PMIx ($how) rank $r did not report"; cat $out; fail=1; }
    done
    (( fail )) || echo "Open MPI's mpirun through PMIx ($how://, no MASTER_ADDR): 4 ranks on 2 hosts"
  done
  rm -f /tmp/$name.pmix.out
else
  echo "no mpirun.openmpi here: the Open MPI part did not run"
fi
exit $fail
