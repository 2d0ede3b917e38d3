#!/usr/bin/env bash
# Progress lines: braid-sim (and braid-bench, which shares src/common/progress.hpp)
# rewrite one line on stderr while stderr is a terminal, and write nothing
# there otherwise. The terminal is a pseudo-terminal from script(1); skipped
# (77) without it.
set -euo pipefail
build="$1"
command -v script >/dev/null || { echo "script(1) (util-linux) is missing: no pseudo-terminal to test with"; exit 77; }
sim="$build/tools/braid-sim allreduce --ranks 4 -b 8 -e 1M -f 64"
on_tty=$(script -qec "$sim > /dev/null" /dev/null)
grep -q "braid-sim: 512 bytes (up to 1048576)" <<<"$on_tty" || { echo "no progress on a terminal: '$on_tty'"; exit 1; }
[[ $on_tty == *$'\r\033[K' ]] || { echo "the progress line is not cleared at the end"; exit 1; }
quiet=$($sim 2>&1 >/dev/null)
[[ -z $quiet ]] || { echo "progress written to a stderr that is not a terminal: '$quiet'"; exit 1; }
bench=$(script -qec "$build/tools/braidrun -n 2 $build/bench/braid-bench allreduce -b 8 -e 64K -f 8 -n 5 -w 1 > /dev/null" /dev/null)
grep -q "braid-bench: allreduce float sum: size" <<<"$bench" || { echo "no braid-bench progress on a terminal: '$bench'"; exit 1; }
echo "progress on a terminal, silence elsewhere"
