#!/usr/bin/env bash
# Every tool's --help and --version follow one layout: --help prints
# "usage: TOOL ..." first, lists -h/--help and --version, and exits 0;
# --version prints "TOOL (Braid) VERSION".
set -euo pipefail
src="$1"; build="$2"; version="$3"
declare -A path=(
  [braidrun]="$build/tools/braidrun" [braid-bench]="$build/bench/braid-bench" [braid-sim]="$build/tools/braid-sim"
  [braid-info]="$build/tools/braid-info" [braid-store]="$build/tools/braid-store" [braid-plot]="$src/tools/braid-plot")
fail=0
for tool in "${!path[@]}"; do
  help=$("${path[$tool]}" --help) || { echo "$tool --help exited $?"; fail=1; continue; }
  first=$(head -1 <<<"$help")
  [[ $first == "usage: $tool"* || $first == "usage: braidrun -n N $tool"* ]] || { echo "$tool --help starts '$first'"; fail=1; }
  grep -q -- "-h, --help" <<<"$help" || { echo "$tool --help does not list -h, --help"; fail=1; }
  grep -q -- "--version" <<<"$help" || { echo "$tool --help does not list --version"; fail=1; }
  v=$("${path[$tool]}" --version) || { echo "$tool --version exited $?"; fail=1; continue; }
  [[ $v == "$tool (Braid) $version" ]] || { echo "$tool --version printed '$v'"; fail=1; }
  echo "$tool: ok"
done
exit $fail
