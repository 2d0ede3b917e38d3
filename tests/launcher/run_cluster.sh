#!/usr/bin/env bash
# braidrun across emulated hosts: tools/cluster makes 2 hosts (network
# namespaces on a bridge), braidrun --hosts H1:2,H2:2 --agent "tools/cluster
# exec" starts 4 ranks of hello on them. Every rank must finish, ranks of one
# host must talk shared memory and ranks of two hosts TCP. Skipped (77) where
# namespaces cannot be made (not root).
set -uo pipefail
src="$1"; braidrun="$2"; hello="$3"
source "$(dirname "$0")/cluster_up.sh"
cluster_up bt 2
# Each host runs cubic, Linux's default, whatever this machine's default is
# (tools/cluster --cc).
"$cluster" status --name "$name" | tee /tmp/$name.out
[[ $(grep -c " cc cubic cpus " /tmp/$name.out) == 2 ]] || { echo "the hosts' TCP congestion control is not cubic"; exit 1; }
BRAID_DEBUG=INFO "$braidrun" --hosts "${name}1:2,${name}2:2" --agent "$cluster exec" --timeout 120 "$hello" env \
  > /tmp/$name.out 2>&1
rc=$?
cat /tmp/$name.out | grep -v " INFO " | head -20
[[ $rc == 0 ]] || { echo "braidrun across the hosts failed ($rc)"; cat /tmp/$name.out | tail -30; exit 1; }
for r in 0 1 2 3; do
  grep -q "^rank $r of 4 " /tmp/$name.out || { echo "rank $r did not report"; exit 1; }
done
grep -q "INFO rank [0-9]*: shm$" /tmp/$name.out || { echo "no shared-memory link between ranks of one host"; exit 1; }
grep -q "INFO rank [0-9]*: tcp$" /tmp/$name.out || { echo "no TCP link between the hosts"; exit 1; }
# What travels to another host: with an agent that starts from an empty
# environment (as ssh would give a fresh login), the ranks see Braid's
# variables, every BRAID_* and -x's, but not the rest of braidrun's
# environment, and each its own host name.
CLUSTER_NOT_PASSED=here BRAID_CLUSTER_ALSO=too "$braidrun" --hosts "${name}1:1,${name}2:1" \
  --agent "env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin $cluster exec" -x BRAID_CLUSTER_X=carried --timeout 60 \
  sh -c 'echo "rank=$RANK size=$WORLD_SIZE x=$BRAID_CLUSTER_X not=${CLUSTER_NOT_PASSED:-} braid=${BRAID_CLUSTER_ALSO:-} host=$(hostname)"' \
  > /tmp/$name.out 2>&1 || { echo "the -x run failed"; cat /tmp/$name.out; exit 1; }
cat /tmp/$name.out
grep -q "^rank=0 size=2 x=carried not= braid=too host=${name}1$" /tmp/$name.out &&
  grep -q "^rank=1 size=2 x=carried not= braid=too host=${name}2$" /tmp/$name.out ||
  { echo "Braid's variables, -x's or BRAID_* did not travel through the agent"; exit 1; }
echo "4 ranks on 2 emulated hosts running cubic: shared memory inside each, TCP between them; -x travels"
