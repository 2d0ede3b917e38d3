#!/usr/bin/env bash
# Multicast init (tcp://239.x.y.z:PORT, tcp://[ff15::...]:PORT) across 2
# emulated hosts (tools/cluster): processes started with nothing but the
# address, the port, the world size and a group name find each other, get
# ranks 0..n-1 and a store on a port of rank 0's own. Two jobs on one address
# and port stay apart by group_name; IPv4 and IPv6; without a route to the
# group, or with too few processes, a clear error. Skipped (77) where
# namespaces cannot be made (not root).
set -uo pipefail
src="$1"; hello="$2"
source "$(dirname "$0")/cluster_up.sh"
cluster_up bm 2
fail=0
port=$(( 30000 + $$ % 20000 ))

# job ADDR GROUP N_PER_HOST TAG: starts N_PER_HOST processes on each host, in the background.
pids=()
job() {
  local addr=$1 group=$2 per=$3 tag=$4 world=$(( 2 * $3 ))
  for h in 1 2; do
    for k in $(seq 1 "$per"); do
      "$cluster" exec "${name}$h" env -u MASTER_PORT MASTER_ADDR="$addr" MASTER_PORT=$port WORLD_SIZE=$world \
        "$hello" tcp "$group" 60 > /tmp/$name.$tag.$h.$k 2>&1 &
      pids+=($!)
    done
  done
}
# check TAG WORLD: every process of the job reported, the ranks are 0..WORLD-1, each once.
check() {
  local tag=$1 world=$2
  local got
  got=$(cat /tmp/$name.$tag.* | sed -n 's/^rank \([0-9]*\) of '"$world"' .*sum of ranks .*/\1/p' | sort -n | tr '\n' ' ')
  [[ $got == "$(seq -s ' ' 0 $((world - 1))) " ]] || { echo "FAIL: $tag: ranks '$got', expected 0..$((world - 1))"; cat /tmp/$name.$tag.*; fail=1; }
}
waitall() { for p in "${pids[@]}"; do wait "$p" || true; done; pids=(); }

# Two jobs at once on one IPv4 group and port, kept apart by group_name.
job 239.7.7.7 alpha 2 v4a
job 239.7.7.7 beta 1 v4b
waitall
check v4a 4
check v4b 2
(( fail )) || echo "IPv4 239.7.7.7:$port: job alpha (4 ranks, 2 hosts) and job beta (2 ranks) at once, ranks distinct"

# IPv6.
job '[ff15::7]' gamma 2 v6
waitall
check v6 4
(( fail )) || echo "IPv6 [ff15::7]:$port: 4 ranks on 2 hosts"

# The interface named: BRAID_SOCKET_IFNAME=eth0 (each host's link to the bridge).
export BRAID_SOCKET_IFNAME=eth0
job 239.7.7.7 delta 1 ifname
waitall
unset BRAID_SOCKET_IFNAME
check ifname 2
(( fail )) || echo "BRAID_SOCKET_IFNAME=eth0: 2 ranks on 2 hosts"

# Too few processes: a clear error within the timeout (hello's 3 s here).
"$cluster" exec "${name}1" env MASTER_ADDR=239.7.7.8 MASTER_PORT=$port WORLD_SIZE=3 "$hello" tcp lonely 3 \
  > /tmp/$name.few 2>&1 && { echo "FAIL: a world of 3 with one process succeeded"; fail=1; }
grep -q "heard 1 of the 3 processes" /tmp/$name.few || { echo "FAIL: the too-few error"; cat /tmp/$name.few; fail=1; }

# No route to the group (a host with loopback only): said at once.
ns="${name}x"
ip netns add "$ns" && ip -n "$ns" link set lo up
ip netns exec "$ns" env MASTER_ADDR=239.7.7.9 MASTER_PORT=$port WORLD_SIZE=2 "$hello" tcp nowhere 30 > /tmp/$name.noroute 2>&1 &&
  { echo "FAIL: init without a route to the group succeeded"; fail=1; }
ip netns del "$ns"
grep -q "no route to the group" /tmp/$name.noroute || { echo "FAIL: the no-route error"; cat /tmp/$name.noroute; fail=1; }
(( fail )) || echo "errors: too few processes ('heard 1 of the 3'), no route ('no route to the group')"
rm -f /tmp/$name.v4a.* /tmp/$name.v4b.* /tmp/$name.v6.* /tmp/$name.ifname.* /tmp/$name.few /tmp/$name.noroute
exit $fail
