#!/usr/bin/env bash
# Braid's point-to-point bandwidth over RDMA verbs against ib_write_bw, in ONE
# Soft-RoCE VM run (tools/rxe-vm), both on rxe0 (loopback through the emulated
# device). Absolute figures inside the VM say nothing about hardware; the ratio
# is the result. Both are measured the same way: a window of transfers in
# flight (ib_write_bw: its default tx depth; braid-bench bw: --window W isends
# per iteration, then a 1-byte ack). Per size, ROUNDS rounds alternate
# ib_write_bw and Braid so that drift in the host's load hits both alike.
# Prints a markdown table: size, ib_write_bw MiB/s (median), Braid MiB/s
# (median), ratio of medians, plus every round's figures. Every Braid run is
# checked (-c 1). Raw outputs stay in the VM's log, printed with --raw.
#
#   bench/compare_verbs_bw.sh [--build-dir DIR] [--rounds N] [--raw]
#
# DIR: a build made on this host (default build-verbs) with braid-bench and
# braidrun. "MB/s" is perftest's unit, MiB/s (2^20 bytes/s); Braid's figure is
# size / (time per message) converted to the same unit.
# Environment: IB_ITERS_1M (default 300), BRAID_ITERS_1M (default 5),
# WINDOW_1M (64), IB_ITERS_64M (default 10), BRAID_ITERS_64M (default 2),
# WINDOW_64M (4). Exit status: 0 if every run passed, 1 otherwise, 77 if the
# VM cannot run here.
set -uo pipefail

HERE=$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")" && pwd -P)
REPO=$(cd "$HERE/.." && pwd -P)

# ---- inside the VM ----------------------------------------------------------------------
if [[ ${1:-} == --inside ]]; then
  BUILD=$2 ROUNDS=$3 RAW=$4
  bench=$BUILD/bench/braid-bench braidrun=$BUILD/tools/braidrun
  logs=/tmp/bwlogs; mkdir -p $logs
  fail=0
  declare -A ib br
  # ib_write_bw SIZE ITERS -> prints MiB/s (BW average) or nothing
  ib_run() {
    local s=$1 n=$2 log=$logs/ib_$1_$3
    ib_write_bw -d rxe0 -x "$RXE_GID0" -s "$s" -n "$n" > "$log.srv" 2>&1 &
    local spid=$!
    sleep 1
    ib_write_bw -d rxe0 -x "$RXE_GID0" -s "$s" -n "$n" "$RXE_ADDR0" > "$log.cli" 2>&1 || fail=1
    wait $spid || fail=1
    # "#bytes #iterations BW peak[MB/sec] BW average[MB/sec] MsgRate[Mpps]"
    awk -v s="$s" '$1 == s && NF >= 5 {print $4}' "$log.cli" | tail -1
  }
  # braid-bench bw SIZE ITERS WINDOW -> prints MiB/s from the time column (us per message)
  br_run() {
    local s=$1 n=$2 w=$3 log=$logs/br_$1_$4
    timeout 600 "$braidrun" --no-prefix --timeout 300 -n 2 "$bench" bw -b "$s" -e "$s" --backend verbs \
      -n "$n" -w 2 -c 1 --window "$w" > "$log" 2>&1 || fail=1
    awk -v s="$s" '$1 == s && NF >= 9 && $9 == 0 {printf "%.1f\n", s / ($6 * 1e-6) / 1048576}' "$log" | tail -1
  }
  sizes=(1048576 67108864)
  declare -A ibn=([1048576]=${IB_ITERS_1M:-300} [67108864]=${IB_ITERS_64M:-10})
  declare -A brn=([1048576]=${BRAID_ITERS_1M:-5} [67108864]=${BRAID_ITERS_64M:-2})
  declare -A win=([1048576]=${WINDOW_1M:-64} [67108864]=${WINDOW_64M:-4})
  for s in "${sizes[@]}"; do
    for ((r = 1; r <= ROUNDS; ++r)); do
      t0=$(date +%s)
      ib[$s,$r]=$(ib_run "$s" "${ibn[$s]}" "$r")
      t1=$(date +%s)
      br[$s,$r]=$(br_run "$s" "${brn[$s]}" "${win[$s]}" "$r")
      t2=$(date +%s)
      echo "# size $s round $r: ib_write_bw ${ib[$s,$r]:-FAILED} MiB/s ($((t1 - t0)) s), Braid ${br[$s,$r]:-FAILED} MiB/s ($((t2 - t1)) s)" >&2
      [[ -n ${ib[$s,$r]} && -n ${br[$s,$r]} ]] || fail=1
    done
  done
  median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {if (NR == 0) print ""; else if (NR % 2) print a[(NR+1)/2]; else printf "%.1f\n", (a[NR/2]+a[NR/2+1])/2}'; }
  echo
  echo "| size | ib_write_bw MB/s (median) | Braid bw MB/s (median) | Braid / ib_write_bw | rounds: ib_write_bw | rounds: Braid |"
  echo "|---:|---:|---:|---:|---|---|"
  for s in "${sizes[@]}"; do
    ibs=() brs=()
    for ((r = 1; r <= ROUNDS; ++r)); do
      [[ -n ${ib[$s,$r]} ]] && ibs+=("${ib[$s,$r]}")
      [[ -n ${br[$s,$r]} ]] && brs+=("${br[$s,$r]}")
    done
    mi=$(median "${ibs[@]}") mb=$(median "${brs[@]}")
    ratio=$(awk -v a="$mb" -v b="$mi" 'BEGIN {if (a == "" || b == "" || b == 0) print "n/a"; else printf "%.0f%%", 100 * a / b}')
    label=$((s >> 20))MiB
    echo "| $label | $mi | $mb | $ratio | ${ibs[*]} | ${brs[*]} |"
  done
  echo
  echo "ib_write_bw -d rxe0 -x \$RXE_GID0 -s SIZE -n N [\$RXE_ADDR0]: N = ${ibn[1048576]} (1 MiB), ${ibn[67108864]} (64 MiB), default tx depth"
  echo "braidrun -n 2 braid-bench bw -b SIZE -e SIZE --backend verbs -w 2 -c 1: -n ${brn[1048576]} --window ${win[1048576]} (1 MiB), -n ${brn[67108864]} --window ${win[67108864]} (64 MiB)"
  if [[ $RAW == 1 ]]; then
    for f in $logs/*; do echo "==== $f"; grep -v '^#  Rank\|^ *$' "$f"; done
  fi
  exit $fail
fi

# ---- on the host ------------------------------------------------------------------------
BUILD=build-verbs ROUNDS=3 RAW=0
while (($#)); do
  case $1 in
    --build-dir) BUILD=$2; shift 2 ;;
    --rounds) ROUNDS=$2; shift 2 ;;
    --raw) RAW=1; shift ;;
    -h | --help) sed -n '2,22p' "$0"; exit 0 ;;
    *) echo "compare_verbs_bw.sh: unknown option '$1'" >&2; exit 2 ;;
  esac
done
BUILD=$(cd "$REPO" && readlink -f "$BUILD")
for f in bench/braid-bench tools/braidrun; do
  [[ -x $BUILD/$f ]] || { echo "compare_verbs_bw.sh: $BUILD/$f is missing: build first (ninja -C $BUILD)" >&2; exit 2; }
done
envs=()
for v in IB_ITERS_1M BRAID_ITERS_1M WINDOW_1M IB_ITERS_64M BRAID_ITERS_64M WINDOW_64M; do
  [[ -n ${!v:-} ]] && envs+=(--env "$v=${!v}")
done
exec "$REPO/tools/rxe-vm" --build-dir "$BUILD" --timeout 900 --memory 3G "${envs[@]}" -- \
  "$REPO/bench/compare_verbs_bw.sh" --inside "$BUILD" "$ROUNDS" "$RAW"
