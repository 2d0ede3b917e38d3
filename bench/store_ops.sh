#!/usr/bin/env bash
# Store operations during a job's life as the world grows (issue 17, item 7):
# runs examples/hello (init, a token ring, an all_reduce, destroy) at each
# world size on this host and reads the store's own count of the requests it
# served, by kind (its INFO line at shutdown); prints them per rank. With the
# roster (src/runtime/bootstrap.cpp, load_roster) the sets, gets, adds and
# compare-sets of a rank stay the same whatever the size (rank 0's gets grow:
# it reads every rank's records once). hello's all_reduce is a one-sided plan
# on one host: a group's first one-sided call maps every member's window,
# whose records the group's first rank gathers into one key
# (transports/shm/window.cpp, gather_records); the others poll for that key,
# a few times more where many ranks share few CPUs.
#
#   bench/store_ops.sh [BUILD]      SIZES="2 4 8 16 32 64" (default)
set -euo pipefail
build=$(cd "${1:-build}" && pwd)
sizes=${SIZES:-"2 4 8 16 32 64"}
echo "| ranks | store requests | per rank | per rank, by kind |"
echo "|---:|---:|---:|---|"
for n in $sizes; do
  out=$(BRAID_DEBUG=INFO "$build/tools/braidrun" --bind-to none -n "$n" --timeout 300 "$build/examples/hello" 2>&1) ||
    { echo "the job of $n ranks failed:"; tail -5 <<<"$out"; exit 1; }
  line=$(grep "served [0-9]* requests" <<<"$out" | head -1)
  req=$(sed 's/.*served \([0-9]*\) requests.*/\1/' <<<"$line")
  kinds=$(sed 's/.*clients (\(.*\))$/\1/' <<<"$line" |
          awk -v n="$n" 'BEGIN { RS = ", " } { printf "%s%s %.1f", (NR > 1 ? ", " : ""), $1, $2 / n }')
  awk -v n="$n" -v r="$req" -v k="$kinds" 'BEGIN { printf "| %d | %d | %.1f | %s |\n", n, r, r / n, k }'
done
