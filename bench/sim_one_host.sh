#!/usr/bin/env bash
# braid-sim against what it predicts on one host: 2-rank all_reduce (float32
# sum, out of place) over shared memory and over TCP, 8 B to 16 MiB, the
# clause of issue 17's item 6 that holds on one host ("within 25% of the
# measured time at every size from 8 B, for shm and tcp"). COLL and RANKS
# measure another collective or group size the same way.
#
# Each round launches `braid-bench allreduce` once per backend, alternating
# them, and reads bench/probes' line-exchange (the round trip of a cache
# line between CPUs 0 and 1) right before each launch: the host's phase
# (bench/RESULTS.md section 33), which the fast boxes' costs follow and which
# braid-sim is given (--line-exchange-ns, the median of the launch's
# readings per backend, for shared memory's fast boxes and TCP's messages
# alike), with the host's last-level cache from sysfs
# (--cache-mib: where the bytes are). Per size: the measured median [min-max] over the
# rounds, braid-sim's time for its own choice ('*'), and measured / sim;
# the last line counts the sizes within 25% (|sim - t| <= 0.25 t).
#
#   bench/sim_one_host.sh [BUILD_DIR]       (default: build-dev, then build)
# Environment: ROUNDS (default 3), SIZES as braid-bench's -b/-e/-f (default
# "8 16M 8"), ITERS (default 200), COLL (default allreduce), RANKS (default
# 2), SIM_ARGS (more braid-sim options; "--cache-mib 0" prices without the
# caches), LOG_DIR (default a fresh mktemp -d), REPORT_ONLY=1
# (price and print what LOG_DIR holds).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
source "$here/pick_build.sh"
pick_build sim_one_host.sh "${1:-}" "build-dev build" bench/braid-bench tools/braid-sim bench/line-exchange
rounds=${ROUNDS:-3}
read -r lo hi factor <<<"${SIZES:-8 16M 8}"
iters=${ITERS:-200}
coll=${COLL:-allreduce}
ranks=${RANKS:-2}
# The last-level cache, as sysfs names it ("32768K"), in MiB (0: unknown).
llc=$(awk '{ v = $1 + 0; if ($1 ~ /M$/) v *= 1024; printf "%d\n", v / 1024 }' \
      "$(ls -d /sys/devices/system/cpu/cpu0/cache/index* 2>/dev/null | tail -1)/size" 2>/dev/null || echo 0)
log_dir=${LOG_DIR:-$(mktemp -d /tmp/sim_one_host.XXXXXX)}
mkdir -p "$log_dir"

line_ns() { "$build/bench/line-exchange" | awk '{ printf "%d\n", $(NF-3) * 1000 }'; }
# REPORT_ONLY=1: price and print what LOG_DIR already holds, measuring nothing.
[[ ${REPORT_ONLY:-0} == 1 ]] && rounds=0
for ((round = 1; round <= rounds; ++round)); do
  for backend in shm tcp; do
    line_ns >>"$log_dir/line-$backend.txt"
    "$build/tools/braidrun" --no-prefix --timeout 300 -n "$ranks" "$build/bench/braid-bench" "$coll" \
      -b "$lo" -e "$hi" -f "$factor" -n "$iters" -w 20 -c 0 --backend "$backend" >"$log_dir/$backend-r$round.txt"
  done
done

echo "# sim_one_host.sh: $ranks-rank $coll, float32, out of place, $(ls "$log_dir"/shm-r*.txt | wc -l) rounds of $iters calls, last-level cache $llc MiB, build of $(git -C "$root" describe --always --dirty 2>/dev/null || echo ?), $(date -u +%F' '%H:%M) UTC; logs in $log_dir"
for backend in shm tcp; do
  line=$(sort -n "$log_dir/line-$backend.txt" | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }')
  # The line exchange prices the fast boxes and TCP over loopback; and where
  # the ranks outnumber the CPUs, as the runtime sees it, shared memory
  # pays their turns on them (--shared-cpus; over TCP braid-sim has no such
  # term on one host).
  line_args=(--line-exchange-ns "$line")
  [[ $backend == shm ]] && (( ranks > $(nproc) )) && line_args+=(--shared-cpus)
  sim=$("$build/tools/braid-sim" "$coll" --ranks "$ranks" --backend "$backend" -b "$lo" -e "$hi" -f "$factor" \
        "${line_args[@]}" --cache-mib "$llc" ${SIM_ARGS:-} |
        awk '/^ *[0-9]/ { for (i = 3; i <= NF; ++i) if ($i ~ /\*$/) { sub(/\*$/, "", $i); print $1, $i } }')
  echo
  echo "## $backend: line exchange ${line} ns a round (median of $(wc -l <"$log_dir/line-$backend.txt") readings: $(tr '\n' ' ' <"$log_dir/line-$backend.txt"))"
  echo
  echo "| size | measured, us [min-max] | braid-sim | measured / sim |"
  echo "|---:|---|---:|---:|"
  cat "$log_dir/$backend"-r*.txt | awk '/^ *[0-9]/ { print $1, $6 }' |
    awk -v sim="$sim" '
      BEGIN { n = split(sim, s, /[ \n]/); for (i = 1; i < n; i += 2) price[s[i]] = s[i + 1] }
      { t[$1] = t[$1] " " $2; if (!($1 in seen)) { seen[$1] = 1; order[++k] = $1 } }
      END {
        within = 0
        for (j = 1; j <= k; ++j) {
          b = order[j]; m = split(substr(t[b], 2), v, " ")
          for (x = 1; x <= m; ++x) for (y = x + 1; y <= m; ++y) if (v[y] < v[x]) { z = v[x]; v[x] = v[y]; v[y] = z }
          med = m % 2 ? v[(m + 1) / 2] : (v[m / 2] + v[m / 2 + 1]) / 2
          p = price[b]; ok = (p - med <= 0.25 * med && med - p <= 0.25 * med)
          within += ok
          printf "| %s | %.2f [%.2f-%.2f] | %.2f | %.2f%s |\n", b, med, v[1], v[m], p, med / p, ok ? "" : " (miss)"
        }
        printf "\n%d of %d sizes within 25%%\n", within, k
      }'
done
