#!/usr/bin/env bash
# braid-sim --calls and --logp: a loop of small broadcasts over TCP is priced
# at the root's sending rate (LogP's o, eager messages, calls back to back),
# not at one call's latency; without --logp the ports are held for the whole
# latency and calls back to back cost what one does; the choice ('*') is the
# runtime's either way; bad values are refused.
set -euo pipefail
sim="${1:?build dir}/tools/braid-sim"
cell() {  # the chosen algorithm's time in braid-sim's table
  "$sim" "$@" | awk '/^ *[0-9]/ { for (i = 3; i <= NF; ++i) if ($i ~ /\*$/) { sub(/\*$/, "", $i); print $i } }'
}
chosen() { "$sim" "$@" | awk '/^ *[0-9]/ { for (i = 3; i <= NF; ++i) if ($i ~ /\*$/) print i }'; }
args=(broadcast --ranks 2 --backend tcp -b 8 -e 8)
one=$(cell "${args[@]}")
loop_plain=$(cell "${args[@]}" --calls 200)
loop_logp=$(cell "${args[@]}" --calls 200 --logp)
echo "one call ${one} us; 200 back to back: ${loop_plain} us a call, with --logp ${loop_logp}"
awk -v a="$one" -v b="$loop_plain" 'BEGIN { exit !(a == b) }' ||
  { echo "FAIL: rendezvous calls back to back should cost what one does"; exit 1; }
awk -v a="$one" -v b="$loop_logp" 'BEGIN { exit !(b < 0.7 * a) }' ||
  { echo "FAIL: --logp should price a loop of small broadcasts at the root's rate, well under one call"; exit 1; }
# --link-gap-ns: a loop of small broadcasts across hosts at the sender's gap,
# also where it is longer than the latency (between namespaces of one
# machine); --logp's 0.6 of the latency without it.
x=(broadcast --ranks 2 --hosts 2 --backend auto --link-latency-ns 6000 --calls 200 --logp -b 8 -e 8)
share=$(cell "${x[@]}")
gap_short=$(cell "${x[@]}" --link-gap-ns 3000)
gap_long=$(cell "${x[@]}" --link-gap-ns 7000)
echo "across hosts, 6 us one way: ${share} us a call; a gap of 3 us: ${gap_short}; of 7 us: ${gap_long}"
awk -v a="$share" -v s="$gap_short" -v l="$gap_long" \
  'BEGIN { exit !(a > 3.5 && a < 3.7 && s > 2.9 && s < 3.1 && l > 6.9 && l < 7.2) }' ||
  { echo "FAIL: a loop of broadcasts across hosts should cost 0.6 x 6 us a call, or the gap where one is given"; exit 1; }
# Across hosts, every collective: the same choice with and without --logp.
for coll in allreduce allgather reducescatter broadcast; do
  h=(${coll} --ranks 8 --hosts 4 --backend auto --machine-cpus 2 -b 8 -e 64M -f 64)
  [[ $(chosen "${h[@]}") == $(chosen "${h[@]}" --logp --calls 5) ]] ||
    { echo "FAIL: $coll: --logp or --calls changed the choice"; exit 1; }
done
for bad in "--calls 0" "--logp --model formula" "--link-gap-ns 5000"; do
  if out=$("$sim" "${args[@]}" $bad 2>&1); then echo "FAIL: '$bad' accepted"; exit 1; fi
  grep -q "calls\|logp" <<<"$out" || { echo "FAIL: '$bad' refused without saying why: $out"; exit 1; }
done
echo "ok"
