#!/bin/bash
# slow_phase_catch.sh: the 4-rank all_reduce of 16 MiB under each hand-off
# mode (BRAID_HANDOFF, src/runtime/handoff.hpp), in the host's slow phase
# only (bench/RESULTS.md sections 33 and 36). It polls line-exchange; when a
# reading is above 0.15 us (the slow level; the usual one is 0.04-0.06), it
# runs cache, auto and stream back to back, rotating their order, each
# followed by another reading (in parentheses), and prints one line:
#   catch K phase=P | MODE OUT/IN us (P after) | ...
# Stops after CATCH catches (default 8) or SECS seconds (default 600).
#
#   BUILD=build-dev bench/probes/slow_phase_catch.sh
cd "$(dirname "$0")/../.." || exit 1
BUILD=${BUILD:-build-dev}
CATCH=${CATCH:-8}; SECS=${SECS:-600}
end=$((SECONDS + SECS)); got=0; rot=0
modes=(cache auto stream)
phase() { "$BUILD/bench/line-exchange" 2>&1 | tail -1 | awk '{print $(NF-3)}'; }
while [ $SECONDS -lt $end ] && [ $got -lt "$CATCH" ]; do
  p=$(phase)
  if ! awk -v p="$p" 'BEGIN { exit !(p > 0.15) }'; then
    sleep 0.5
    continue
  fi
  got=$((got + 1)); line="catch $got phase=$p"
  for k in 0 1 2; do
    m=${modes[$(((k + rot) % 3))]}
    t=$(BRAID_HANDOFF=$m "$BUILD/tools/braidrun" -n 4 "$BUILD/bench/braid-bench" allreduce -b 16M -e 16M -n 12 -w 2 -c 0 2>&1 |
        awk '/^ *16777216/ {print $6 "/" $10}')
    line="$line | $m $t ($(phase))"
  done
  rot=$((rot + 1)); echo "$line"
done
