#!/usr/bin/env bash
# The bytes a 2-host all_reduce sends across, counted on the veth links of an
# emulated cluster (tools/cluster: 2 hosts x 2 ranks, a 4 Gbit/s link each, as
# a network slower than memory is): with the automatic
# choice (the hierarchical plan where a group spans hosts) each host sends S
# bytes per call of S bytes (the least possible: reduce inside the host,
# exchange halves across, share inside) plus framing; the flat ring, forced,
# sends 1.5 S, which shows the count can tell them apart. Two runs that differ
# only in their iteration count are subtracted, so that init, warm-up and the
# check cancel out. It also checks the link probe at init (link_probe.hpp).
# Skipped (77) where namespaces cannot be made (not root).
set -uo pipefail
src="$1"; braidrun="$2"; bench="$3"
source "$(dirname "$0")/cluster_up.sh"
cluster_up bb 2 --rate 4gbit

# The link probe at init: every rank logs the same figures, and they are the
# shaped link's (tbf at 4 Gbit/s: iperf3 measures 3.83 here).
BRAID_DEBUG=INFO "$braidrun" --hosts "${name}1:2,${name}2:2" --agent "$cluster exec" --timeout 120 \
  "$bench" allreduce -b 8 -e 8 -n 1 -w 0 > /tmp/$name.out 2>&1 || { echo "the probe run failed"; cat /tmp/$name.out; exit 1; }
grep "link between hosts" /tmp/$name.out
[[ $(grep -c "link between hosts" /tmp/$name.out) == 4 ]] || { echo "FAIL: not every rank logged the probe's figures"; exit 1; }
[[ $(grep "link between hosts" /tmp/$name.out | sed 's/^.*braid\[[0-9]*\] //' | sort -u | wc -l) == 1 ]] ||
  { echo "FAIL: ranks hold different link figures"; exit 1; }
gbit=$(grep -m1 "link between hosts" /tmp/$name.out | sed 's/.* \([0-9.]*\) Gbit\/s.*/\1/')
awk -v g="$gbit" 'BEGIN { exit !(g >= 2.0 && g <= 5.0) }' || { echo "FAIL: the probe measured $gbit Gbit/s on a 4 Gbit/s link"; exit 1; }
# The gap between small messages sent back to back: measured (not 0), and
# less than what a message waiting for the one before it to arrive and be
# answered would take (4 one-way latencies, room for 4 ranks on 2 CPUs).
read -r one_way gap < <(grep -m1 "link between hosts" /tmp/$name.out |
  sed 's/.*: \([0-9.]*\) us one way, .* a gap of \([0-9.]*\) us .*/\1 \2/')
awk -v l="$one_way" -v g="$gap" 'BEGIN { exit !(g > 0 && g < 4 * l) }' ||
  { echo "FAIL: the probe's gap between small messages is '$gap' us against $one_way us one way"; exit 1; }
BRAID_LINK_PROBE=0 BRAID_DEBUG=INFO "$braidrun" --hosts "${name}1:1,${name}2:1" --agent "$cluster exec" --timeout 120 \
  "$bench" allreduce -b 8 -e 8 -n 1 -w 0 > /tmp/$name.out 2>&1 || { echo "the run without probe failed"; cat /tmp/$name.out; exit 1; }
! grep -q "link between hosts" /tmp/$name.out || { echo "FAIL: BRAID_LINK_PROBE=0 still probed"; exit 1; }
echo "probe: every rank has the same figures, $gbit Gbit/s on the 4 Gbit/s link, $one_way us one way, a gap of $gap us; BRAID_LINK_PROBE=0 turns it off"

S=$((4 << 20))  # bytes per call
sent() { cat /sys/class/net/"${name}$1-v"/statistics/rx_bytes; }  # the bridge side receives what the host sends
# run ITERS [braid-bench options]: prints "host1_bytes host2_bytes" for the run.
run() {
  local iters=$1; shift
  local a b
  a=$(sent 1); b=$(sent 2)
  "$braidrun" --hosts "${name}1:2,${name}2:2" --agent "$cluster exec" --timeout 120 \
    "$bench" allreduce -b $S -e $S -n "$iters" -w 1 -c 1 "$@" > /tmp/$name.out 2>&1 ||
    { echo "braid-bench across the hosts failed"; cat /tmp/$name.out; exit 1; }
  grep -q "Out of bounds values : 0 OK" /tmp/$name.out || { echo "wrong results"; cat /tmp/$name.out; exit 1; }
  echo "$(( $(sent 1) - a )) $(( $(sent 2) - b ))"
}
# per_call LABEL [options]: bytes per host per call, from runs of 4 and 12
# iterations (braid-bench times in place and out of place: 2 calls each).
per_call() {
  local label=$1; shift
  read -r s1 s2 < <(run 4 "$@")
  read -r l1 l2 < <(run 12 "$@")
  local calls=16
  h1=$(( (l1 - s1) / calls )); h2=$(( (l2 - s2) / calls ))
  awk -v l="$label" -v a="$h1" -v b="$h2" -v s="$S" \
    'BEGIN { printf "%s: host 1 sends %d bytes per call (%.3f S), host 2 %d (%.3f S)\n", l, a, a / s, b, b / s }'
}
per_call "automatic choice"
auto1=$h1; auto2=$h2
per_call "flat ring (--algo ring)" --algo ring
ring1=$h1
fail=0
# Every hierarchical plan, run for real on an uneven grid (3 ranks on one
# host, 1 on the other), every dtype, root 0 and root 3, results checked.
for root in 0 3; do
  BRAID_ALGO='allreduce:hierarchical;reducescatter:hierarchical;allgather:hierarchical;broadcast:hierarchical;reduce:hierarchical;barrier:hierarchical' \
    "$braidrun" --hosts "${name}1:3,${name}2:1" --agent "$cluster exec" --timeout 120 \
    "$bench" all -b 4 -e 1M -f 64 -n 2 -w 1 -d all -r $root > /tmp/$name.out 2>&1 ||
    { echo "FAIL: the hierarchical plans on a 3+1 grid (root $root)"; cat /tmp/$name.out | tail -30; fail=1; }
  checked=$(grep -c "Out of bounds values : 0 OK" /tmp/$name.out)
  (( checked >= 9 )) || { echo "FAIL: $checked of braid-bench's collectives checked right (root $root)"; fail=1; }
done
# And the variants for many hosts, which on two hosts move what hierarchical
# does through their own code (halving-doubling and a tree over the hosts).
BRAID_ALGO='allreduce:hierarchical_hd;broadcast:hierarchical_tree;reduce:hierarchical_tree' \
  "$braidrun" --hosts "${name}1:3,${name}2:1" --agent "$cluster exec" --timeout 120 \
  "$bench" all -b 4 -e 1M -f 64 -n 2 -w 1 -d all -r 3 > /tmp/$name.out 2>&1 ||
  { echo "FAIL: hierarchical_hd and hierarchical_tree on a 3+1 grid"; cat /tmp/$name.out | tail -30; fail=1; }
checked=$(grep -c "Out of bounds values : 0 OK" /tmp/$name.out)
(( checked >= 9 )) || { echo "FAIL: $checked of braid-bench's collectives checked right (hierarchical_hd, hierarchical_tree)"; fail=1; }
echo "hierarchical broadcast, reduce, all_reduce, reduce_scatter, all_gather, barrier, hierarchical_hd all_reduce, hierarchical_tree broadcast and reduce: right on a 3+1 grid"
# Framing and TCP/IP headers add about 3% (1448 data bytes per 1514 on the wire).
for h in "$auto1" "$auto2"; do
  (( h <= S * 105 / 100 )) || { echo "FAIL: a host sent more than 1.05 S per call across"; fail=1; }
  (( h >= S * 95 / 100 )) || { echo "FAIL: a host sent less than S per call: the count is not what it seems"; fail=1; }
done
(( ring1 >= S * 14 / 10 )) || { echo "FAIL: the flat ring sent under 1.4 S: the count cannot tell plans apart"; fail=1; }
exit $fail
