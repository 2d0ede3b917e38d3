#!/usr/bin/env bash
# Two builds of Braid side by side, in one sitting: a change's "before" and
# "after" (issue 16 asks it of the transport layering).
#
# For each backend (shm, tcp), group size (2, 4, 8) and collective
# (all_reduce, all_gather, broadcast), two launches per build: the small sizes
# (8 B, 64 B, 512 B, 4 KiB, 32 KiB; 200 timed iterations) and the large ones
# (1 MiB, 8 MiB, 64 MiB; 5 iterations). The two builds alternate launch by
# launch (A B A B ...) and the whole list repeats ROUNDS times, so drift in
# the machine's load hits both alike. The table gives, per row, each build's
# median time over the rounds (out of place; time is nccl-tests': mean over
# the timed iterations, maximum over ranks) and after/before: < 1 is faster.
#
#   bench/compare_builds.sh BEFORE_BUILD AFTER_BUILD [LOG_DIR]
#   ROUNDS=3 (default)  RANKS="2 4 8"  BACKENDS="shm tcp"  COLLS="allreduce allgather broadcast"
#   SMALL="8 32K 8 200" and LARGE="1M 64M 8 5": each launch's -b, -e, -f and -n
#
# Each build dir needs tools/braidrun and bench/braid-bench. To make a
# "before" build of an older commit:
#   git worktree add /tmp/before <commit>
#   meson setup /tmp/before/b -Dcuda=disabled -Dtorch=disabled -Dtests=false
#   ninja -C /tmp/before/b bench/braid-bench tools/braidrun
set -euo pipefail

before=${1:?usage: compare_builds.sh BEFORE_BUILD AFTER_BUILD [LOG_DIR]}
after=${2:?usage: compare_builds.sh BEFORE_BUILD AFTER_BUILD [LOG_DIR]}
logs=${3:-$(mktemp -d /tmp/braid-compare.XXXXXX)}
rounds=${ROUNDS:-3}
ranks_list=${RANKS:-"2 4 8"}
backends=${BACKENDS:-"shm tcp"}
colls=${COLLS:-"allreduce allgather broadcast"}
mkdir -p "$logs"

for b in "$before" "$after"; do
  for exe in tools/braidrun bench/braid-bench; do
    [[ -x $b/$exe ]] || { echo "$b/$exe is missing: build it first" >&2; exit 2; }
  done
done

launch() {  # build tag backend ranks coll group round
  local build=$1 tag=$2 backend=$3 n=$4 coll=$5 group=$6 round=$7
  local sizes
  local b e f iters
  if [[ $group == small ]]; then
    read -r b e f iters <<<"${SMALL:-8 32K 8 200}"
    sizes=(-b "$b" -e "$e" -f "$f" -n "${iters:-200}" -w 20)
  else
    read -r b e f iters <<<"${LARGE:-1M 64M 8 5}"
    sizes=(-b "$b" -e "$e" -f "$f" -n "${iters:-5}" -w 2)
  fi
  local bind=block
  (( n > $(nproc) )) && bind=none
  local out="$logs/$tag.$backend.$n.$coll.$group.$round.csv"
  "$build/tools/braidrun" --no-prefix --timeout 600 --bind-to "$bind" -n "$n" \
    "$build/bench/braid-bench" "$coll" "${sizes[@]}" --backend "$backend" --csv "$out" \
    > "$logs/$tag.$backend.$n.$coll.$group.$round.log" 2>&1 ||
    { echo "FAILED: $tag $backend $n $coll $group (log in $logs)" >&2; return 1; }
}

start=$(date +%s)
for round in $(seq 1 "$rounds"); do
  for backend in $backends; do
    for n in $ranks_list; do
      for coll in $colls; do
        for group in small large; do
          # Which build goes first alternates with the round.
          if (( round % 2 )); then
            launch "$before" before "$backend" "$n" "$coll" "$group" "$round"
            launch "$after" after "$backend" "$n" "$coll" "$group" "$round"
          else
            launch "$after" after "$backend" "$n" "$coll" "$group" "$round"
            launch "$before" before "$backend" "$n" "$coll" "$group" "$round"
          fi
        done
      done
    done
  done
  echo "round $round done after $(( $(date +%s) - start )) s" >&2
done

python3 - "$logs" <<'EOF'
import csv, glob, os, statistics, sys
from collections import defaultdict
logs = sys.argv[1]
t = defaultdict(list)
for f in glob.glob(os.path.join(logs, '*.csv')):
    tag, backend, n, coll, group, rnd, _ = os.path.basename(f).split('.')
    for row in csv.DictReader(open(f)):
        if row['placement'] != 'out-of-place':
            continue
        t[(backend, int(n), coll, int(row['size']), tag)].append(float(row['time_us']))
keys = sorted({k[:4] for k in t})
def size(b):
    for unit, s in (('MiB', 1 << 20), ('KiB', 1 << 10)):
        if b >= s and b % s == 0:
            return f'{b // s} {unit}'
    return f'{b} B'
print('| backend | ranks | collective | size | before (us) | after (us) | after/before |')
print('|---|---|---|---|---|---|---|')
ratios = []
for k in keys:
    a = t.get(k + ('before',)); b = t.get(k + ('after',))
    if not a or not b:
        continue
    ma, mb = statistics.median(a), statistics.median(b)
    ratios.append(mb / ma)
    print(f'| {k[0]} | {k[1]} | {k[2]} | {size(k[3])} | {ma:.1f} | {mb:.1f} | {mb / ma:.2f} |')
if ratios:
    print(f'\n{len(ratios)} rows; after/before: median {statistics.median(ratios):.2f}, '
          f'min {min(ratios):.2f}, max {max(ratios):.2f}; rows above 1.10: {sum(r > 1.10 for r in ratios)}')
EOF
