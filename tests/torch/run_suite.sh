#!/bin/bash
# Run PyTorch's distributed test suite (world size 2) against braid.
#
#   tests/torch/run_suite.sh [plain|gloo|both|baseline] [filter]
#
#   plain     BACKEND=braid
#   gloo      braid as Gloo: BACKEND=gloo with every default group made "braid"
#   both      plain, then gloo
#   baseline  real Gloo (BACKEND=gloo, no patch): the reference count
#   filter    regular expression(s) on test names, comma separated (optional)
#
# Environment: BRAID_TORCH_PATH (default build-cuda/src/bindings/torch),
# WORLD_SIZE (2), SUITE_TIMEOUT (per-test seconds, 180), SUITE_LOG_DIR
# (tests/torch/logs). Writes $SUITE_LOG_DIR/<mode>.log and <mode>.json and
# prints each mode's summary. Exit status: nonzero if any test failed.
set -u
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
mode="${1:-both}"
filter="${2:-}"
logdir="${SUITE_LOG_DIR:-$here/logs}"
mkdir -p "$logdir"
default_path="$root/build/src/bindings/torch"
[[ -d "$default_path" ]] || default_path="$root/build-cuda/src/bindings/torch"
export BRAID_TORCH_PATH="${BRAID_TORCH_PATH:-$default_path}"
py=/usr/bin/python3

case "$mode" in
  plain|gloo|baseline) modes=("$mode") ;;
  both) modes=(plain gloo) ;;
  *) echo "usage: $0 [plain|gloo|both|baseline] [filter]" >&2; exit 2 ;;
esac

rc=0
for m in "${modes[@]}"; do
  log="$logdir/$m.log"
  args=(--mode "$m" --world-size "${WORLD_SIZE:-2}" --timeout "${SUITE_TIMEOUT:-180}" --json "$logdir/$m.json")
  [ -n "$filter" ] && args+=(--filter "$filter")
  echo "== $m: $py $here/dist_suite.py ${args[*]}  (log: $log)"
  # The whole run is bounded too (per-test timeouts and the watchdog bound each test).
  timeout -k 30 "${SUITE_TOTAL_TIMEOUT:-7200}" "$py" "$here/dist_suite.py" "${args[@]}" >"$log" 2>&1
  r=$?
  [ $r -ne 0 ] && rc=$r
  sed -n '/^SUMMARY/,$p' "$log"
  [ $r -eq 124 ] && echo "$m: the whole run timed out (SUITE_TOTAL_TIMEOUT)"
done
exit $rc
