#!/usr/bin/env bash
# braid-plot on what it reads: braid-bench --json output and its text table
# from a real 2-rank run, and a braid-sim table, on one set of axes, to PNG
# and to SVG; and clear errors for bad input. Skipped (77) without matplotlib.
set -euo pipefail
src="$1"; build="$2"
plot="$src/tools/braid-plot"
/usr/bin/python3 -c 'import matplotlib' 2>/dev/null ||
  { echo "python3-matplotlib is not installed: braid-plot cannot draw here (apt-get install python3-matplotlib)"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$build/tools/braidrun" -n 2 --timeout 60 "$build/bench/braid-bench" allreduce -b 8 -e 1M -f 8 -n 10 \
  --json "$tmp/run.json" > "$tmp/run.txt"
"$build/tools/braid-sim" allreduce --ranks 2 -b 8 -e 1M -f 8 --backend shm > "$tmp/sim.txt"
"$plot" "$tmp/run.json" "$tmp/run.txt" "$tmp/sim.txt" -o "$tmp/all.png" --labels measured,table,predicted
[[ $(head -c 8 "$tmp/all.png" | od -An -tx1 | tr -d ' \n') == 89504e470d0a1a0a ]] || { echo "not a PNG"; exit 1; }
"$plot" "$tmp/run.json" -o "$tmp/bw.svg" --metric busbw --placement in
grep -q "<svg" "$tmp/bw.svg" || { echo "not an SVG"; exit 1; }
# The markdown tables the bench scripts print (bench/torch_vs_gloo.py).
printf '## 2 ranks: time per call (us)\n| op | size | braid | gloo | speed-up |\n|---|---|---|---|---|\n| all_reduce | 8 B | 7.1 | 304.2 | 42.9x |\n| all_reduce | 1 MiB | 115.5 | 2054.8 | 17.8x |\n' > "$tmp/cmp.md"
"$plot" "$tmp/cmp.md" -o "$tmp/md.png" --metric time
[[ -s "$tmp/md.png" ]] || { echo "no picture from a markdown table"; exit 1; }
echo "drew $(stat -c %s "$tmp/all.png") bytes of PNG and $(stat -c %s "$tmp/bw.svg") of SVG, and a markdown table"
# Bad input: a usage error (2) and an unreadable file (1), each saying why.
set +e
"$plot" "$tmp/run.json" > /dev/null 2> "$tmp/err1"; rc1=$?
echo "not a table" > "$tmp/junk.txt"
"$plot" "$tmp/junk.txt" -o "$tmp/x.png" 2> "$tmp/err2"; rc2=$?
set -e
[[ $rc1 == 2 ]] && grep -q -- "-o OUT.png" "$tmp/err1" || { echo "missing -o: rc $rc1: $(cat "$tmp/err1")"; exit 1; }
[[ $rc2 == 1 ]] && grep -q "no results found" "$tmp/err2" || { echo "junk input: rc $rc2: $(cat "$tmp/err2")"; exit 1; }
"$plot" --help | head -1 | grep -q "braid-plot" || { echo "--help"; exit 1; }
echo "errors are clear"
