#!/usr/bin/env bash
# Braid vs Open MPI vs MPICH over shared memory, on this host, in one sitting.
#
# Primary set: all_reduce float32 sum, 2 ranks, at 8 B, 64 B, 1 KiB, 16 KiB,
# 256 KiB, 1 MiB, 4 MiB, 16 MiB, 64 MiB and 256 MiB. Secondary set (SECONDARY=1,
# the default): broadcast, all_gather and reduce_scatter at 1 KiB, 1 MiB and
# 64 MiB on 2 ranks, and all_reduce on 4 and 8 ranks at 8 B, 1 KiB, 1 MiB and
# 16 MiB. Every measurement is one launch of one size; for each of them the
# three run back to back (Braid, Open MPI, MPICH), and the whole list is
# repeated ROUNDS times, so drift in the machine's load hits all three alike.
#
# Each launch measures out of place and then in place (nccl-tests' two column
# groups; both programs do the same: out of place first, then in place, on the
# same buffers, each after its own warm-up). The tables compare out of place
# with out of place and in place with in place, never across.
#
# Per size: the median time of each over the rounds with [min-max], busbw from
# the median time (nccl-tests' factors: all_reduce 2(n-1)/n, all_gather and
# reduce_scatter (n-1)/n, broadcast 1), Braid's median over the better MPI
# median (< 1: Braid is faster), the same over best rounds, and Braid's busbw
# over Open MPI's. Time is nccl-tests': mean over the timed iterations,
# maximum over ranks.
#
#   bench/compare_shm.sh [BUILD_DIR]        (default: build-bench, then build)
#
# Launchers: every side binds the same way. When the ranks fit the CPUs
# (BIND=core, the default then) each rank is bound to CPUs of its own: Open
# MPI to a core each (its default at 2 ranks), MPICH's hydra likewise (it does
# not bind by default and is told to), braidrun to a block of CPUs each (its
# default; with as many ranks as CPUs, one CPU each). With more ranks than
# CPUs (BIND=none) nothing is bound.
#   braidrun --no-prefix --timeout 300 --bind-to block|none -n N braid-bench ...
#       (default backend: shared memory between local ranks; every Braid log
#       is checked for it)
#   mpirun.openmpi -np N --bind-to B --oversubscribe --mca pml ob1
#       --mca btl self,vader mpi-bench-openmpi ...
#   mpiexec.mpich -n N -bind-to B mpi-bench-mpich ...
# mpi-bench-openmpi and mpi-bench-mpich come from bench/meson.build (each built
# by its own wrapper, mpicc.openmpi / mpicc.mpich); if the build lacks one, this
# script compiles it with that wrapper into LOG_DIR.
#
# Environment: BIND (core or none: every side, every rank count; default: core
# where the ranks fit the CPUs, none elsewhere), ROUNDS (5), LOG_DIR (a fresh mktemp -d), SIZES (primary sizes),
# SECONDARY (1; 0 runs the primary set only), IMPLS ("braid openmpi mpich"),
# BRAID_ARGS (extra braid-bench flags, e.g. "-R 1"; BRAID_ALGO passes through),
# CHECK (first: -c 1 in round 1 and -c 0 after, which keeps the whole script
# near ten minutes; all: -c 1 every round; none).
# Raw outputs and times.txt (one line per launch) stay in LOG_DIR.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
source "$here/pick_build.sh"
pick_build compare_shm.sh "${1:-}" "build-bench build" bench/braid-bench
braidrun=$build/tools/braidrun
braid_bench=$build/bench/braid-bench
rounds=${ROUNDS:-5}
sizes=${SIZES:-"8 64 1K 16K 256K 1M 4M 16M 64M 256M"}
secondary=${SECONDARY:-1}
check=${CHECK:-first}
read -r -a impls <<<"${IMPLS:-braid openmpi mpich}"
log_dir=${LOG_DIR:-$(mktemp -d /tmp/compare_shm.XXXXXX)}
mkdir -p "$log_dir"
[[ -x $braidrun ]] || { echo "compare_shm.sh: no $braidrun" >&2; exit 2; }

declare -A launcher_of=([openmpi]=mpirun.openmpi [mpich]=mpiexec.mpich)
declare -A wrapper_of=([openmpi]=mpicc.openmpi [mpich]=mpicc.mpich)
declare -A bench_of=([braid]=$braid_bench)
for impl in "${impls[@]}"; do
  [[ $impl == braid ]] && continue
  [[ -n ${launcher_of[$impl]:-} ]] || { echo "compare_shm.sh: unknown implementation '$impl' in IMPLS" >&2; exit 2; }
  command -v "${launcher_of[$impl]}" >/dev/null || { echo "compare_shm.sh: ${launcher_of[$impl]} not found: install $impl (Debian: openmpi-bin libopenmpi-dev, mpich libmpich-dev) or leave it out of IMPLS" >&2; exit 2; }
  b=$build/bench/mpi-bench-$impl
  if [[ ! -x $b ]]; then
    command -v "${wrapper_of[$impl]}" >/dev/null || { echo "compare_shm.sh: neither $b nor ${wrapper_of[$impl]} found" >&2; exit 2; }
    b=$log_dir/mpi-bench-$impl
    "${wrapper_of[$impl]}" -O2 -std=c11 -o "$b" "$here/mpi/mpi_bench.c" -lm
  fi
  bench_of[$impl]=$b
done
if [[ $(id -u) == 0 ]]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi

launch_cmd=()
cpus=$(nproc)
launch() {  # impl ranks -> launch_cmd: the launcher words, then the program
  local impl=$1 n=$2 bind
  bind=${BIND:-$( (( n <= cpus )) && echo core || echo none)}
  case $impl in
    braid)   launch_cmd=("$braidrun" --no-prefix --timeout 300 --bind-to "${bind/core/block}" -n "$n" "${bench_of[braid]}");;
    # ob1 + vader: without "pml ob1" Open MPI may pick UCX, which ignores the btl list.
    openmpi) launch_cmd=(mpirun.openmpi -np "$n" --bind-to "$bind" --oversubscribe --mca pml ob1 --mca btl self,vader "${bench_of[openmpi]}");;
    mpich)   launch_cmd=(mpiexec.mpich -n "$n" -bind-to "$bind" "${bench_of[mpich]}");;
  esac
}

bytes_of() {
  local s=$1
  case $s in
    *K) echo $(( ${s%K} << 10 ));; *M) echo $(( ${s%M} << 20 ));; *G) echo $(( ${s%G} << 30 ));; *) echo "$s";;
  esac
}
human() {
  local b=$1
  if (( b >= 1048576 && b % 1048576 == 0 )); then echo "$(( b >> 20 )) MiB"
  elif (( b >= 1024 && b % 1024 == 0 )); then echo "$(( b >> 10 )) KiB"
  else echo "$b B"; fi
}

# Iterations: the same for all three. 2 ranks: many at small sizes, few at
# large ones. 4 and 8 ranks oversubscribe the 2 cores, where a busy-polling
# rank can hold a core for a whole time slice (MPICH takes milliseconds per
# call there), so fewer.
iters_for() {  # ranks bytes -> "-n N -w W"
  local n=$1 b=$2
  if (( n > 2 )); then
    if   (( b <= 1024 ));    then echo "-n 50 -w 5"
    elif (( b <= 1048576 )); then echo "-n 20 -w 2"
    else                          echo "-n 10 -w 2"
    fi
    return
  fi
  if   (( b <= 1024 ));      then echo "-n 5000 -w 500"
  elif (( b <= 16384 ));     then echo "-n 2000 -w 200"
  elif (( b <= 262144 ));    then echo "-n 500 -w 50"
  elif (( b <= 1048576 ));   then echo "-n 200 -w 20"
  elif (( b <= 4194304 ));   then echo "-n 50 -w 5"
  elif (( b <= 16777216 ));  then echo "-n 20 -w 3"
  elif (( b <= 67108864 ));  then echo "-n 8 -w 2"
  else                            echo "-n 4 -w 1"
  fi
}

# The list of measurements: "op ranks size".
items=()
for s in $sizes; do items+=("allreduce 2 $s"); done
if [[ $secondary == 1 ]]; then
  for op in broadcast allgather reducescatter; do
    for s in 1K 1M 64M; do items+=("$op 2 $s"); done
  done
  for n in 4 8; do
    for s in 8 1K 1M 16M; do items+=("allreduce $n $s"); done
  done
fi

# One launch: appends "op ranks impl size t_oop t_ip" to times.txt.
one() {  # impl op ranks size_text round
  local impl=$1 op=$2 n=$3 s=$4 round=$5 b c
  b=$(bytes_of "$s")
  c=0
  [[ $check == all || ( $check == first && $round == 1 ) ]] && c=1
  local args=("$op" -b "$b" -e "$b" $(iters_for "$n" "$b") -c "$c")
  [[ $op == allreduce || $op == reducescatter ]] && args+=(-d float -o sum)
  [[ $op == broadcast ]] && args+=(-d float -r 0)
  [[ $op == allgather ]] && args+=(-d float)
  # BRAID_ARGS: extra braid-bench flags (e.g. "-R 1" for mem_alloc buffers).
  [[ $impl == braid && -n ${BRAID_ARGS:-} ]] && read -r -a extra <<<"$BRAID_ARGS" && args+=("${extra[@]}")
  local log="$log_dir/$impl-$op-n$n-$s-r$round.txt"
  launch "$impl" "$n"
  echo "${launch_cmd[*]} ${args[*]}" >"$log.cmd"
  if [[ $impl == braid ]]; then
    BRAID_DEBUG=INFO "${launch_cmd[@]}" "${args[@]}" >"$log" 2>&1 || { echo "compare_shm.sh: braid-bench failed, see $log" >&2; exit 1; }
    # Peers connect on first use; every link made must be shared memory
    # (BRAID_DEBUG=INFO logs "rank P: shm" per link, and a warning
    # when a link falls back to TCP); one-sided plans use no links, only the
    # group's shared-memory window ("one-sided window ... mapped").
    if ! grep -q -e ': shm$' -e 'one-sided window for group' "$log" || grep -q 'trying the next transport' "$log"; then
      echo "compare_shm.sh: $log: not every link is shared memory" >&2; exit 1
    fi
  else
    "${launch_cmd[@]}" "${args[@]}" >"$log" 2>&1 || { echo "compare_shm.sh: $impl failed, see $log" >&2; exit 1; }
  fi
  # nccl-tests row: size count type redop root time algbw busbw #wrong time algbw busbw #wrong
  local row
  row=$(awk '/^ *[0-9]/ { print $1, $6, $9, $10, $13; exit }' "$log")
  [[ -n $row ]] || { echo "compare_shm.sh: no result row in $log" >&2; exit 1; }
  read -r size t_oop w_oop t_ip w_ip <<<"$row"
  for w in "$w_oop" "$w_ip"; do
    [[ $w == 0 || $w == N/A ]] || { echo "compare_shm.sh: $impl $op n=$n $s round $round: #wrong=$w, see $log" >&2; exit 1; }
  done
  echo "$op $n $impl $size $t_oop $t_ip" >>"$log_dir/times.txt"
}

start=$(date +%s)
: >"$log_dir/times.txt"  # a reused LOG_DIR must not mix in older rounds
load_start=$(uptime)
echo "# compare_shm.sh: $rounds rounds, ${#items[@]} measurements x ${#impls[@]} implementations; logs in $log_dir" >&2
echo "# start: $load_start" >&2
for round in $(seq 1 "$rounds"); do
  for item in "${items[@]}"; do
    read -r op n s <<<"$item"
    for impl in "${impls[@]}"; do one "$impl" "$op" "$n" "$s" "$round"; done
  done
  echo "# round $round done after $(( $(date +%s) - start )) s; $(uptime)" >&2
done
load_end=$(uptime)

# "median min max" of the numbers on stdin.
stats() { sort -g | awk '{ v[NR] = $1 } END {
  if (NR == 0) { print "nan nan nan"; exit }
  m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; print m, v[1], v[NR] }'; }
factor_of() {  # op ranks
  case $1 in
    allreduce) awk -v n="$2" 'BEGIN { print 2 * (n - 1) / n }';;
    allgather|reducescatter) awk -v n="$2" 'BEGIN { print (n - 1) / n }';;
    *) echo 1;;
  esac
}
declare -A label_of=([braid]=Braid [openmpi]="Open MPI" [mpich]=MPICH)
declare -A opname_of=([allreduce]=all_reduce [broadcast]=broadcast [allgather]=all_gather [reducescatter]=reduce_scatter)

# table COLUMN ITEM...: one markdown table, from times.txt's column 5 (out of
# place) or 6 (in place).
table() {
  local col=$1; shift
  local -A med_of=() min_of=()
  local hdr="| op | ranks | size |" sep="|---|---:|---:|"
  for impl in "${impls[@]}"; do hdr+=" ${label_of[$impl]} time (us) |"; sep+="---:|"; done
  for impl in "${impls[@]}"; do hdr+=" ${label_of[$impl]} busbw (GB/s) |"; sep+="---:|"; done
  hdr+=" Braid / better MPI time (median) | Braid / better MPI time (best rounds) | Braid / Open MPI busbw |"
  sep+="---:|---:|---:|"
  echo "$hdr"; echo "$sep"
  local item
  for item in "$@"; do
    read -r op n s <<<"$item"
    local b size f line="" bws="" med best
    b=$(bytes_of "$s")
    # The size column as the programs print it: all_gather and reduce_scatter
    # round down to n blocks of whole float32 elements.
    size=$b
    [[ $op == allgather || $op == reducescatter ]] && size=$(( b / 4 / n * n * 4 ))
    f=$(factor_of "$op" "$n")
    med_of=() min_of=()
    for impl in "${impls[@]}"; do
      read -r med lo hi < <(awk -v op="$op" -v n="$n" -v i="$impl" -v sz="$size" -v c="$col" '$1 == op && $2 == n && $3 == i && $4 == sz && $c != "N/A" { print $c }' "$log_dir/times.txt" | stats)
      med_of[$impl]=$med; min_of[$impl]=$lo
      line+=$(awk -v m="$med" -v l="$lo" -v h="$hi" 'BEGIN { if (m == "nan") printf " - |"; else printf " %.2f [%.4g-%.4g] |", m, l, h }')
      bws+=$(awk -v m="$med" -v sz="$size" -v f="$f" 'BEGIN { if (m == "nan") printf " - |"; else printf " %.3f |", sz / 1e3 / m * f }')
    done
    local ratios
    ratios=$(awk -v tb="${med_of[braid]:-nan}" -v bb="${min_of[braid]:-nan}" \
                 -v to="${med_of[openmpi]:-nan}" -v bo="${min_of[openmpi]:-nan}" \
                 -v tm="${med_of[mpich]:-nan}" -v bm="${min_of[mpich]:-nan}" 'BEGIN {
      bt = (to == "nan") ? tm : (tm == "nan" ? to : (to + 0 < tm + 0 ? to : tm))
      bb2 = (bo == "nan") ? bm : (bm == "nan" ? bo : (bo + 0 < bm + 0 ? bo : bm))
      if (tb == "nan" || bt == "nan") printf " - | - |"; else printf " %.2f | %.2f |", tb / bt, bb / bb2
      if (tb == "nan" || to == "nan") printf " - |"; else printf " %.2f |", to / tb }')
    echo "| ${opname_of[$op]} | $n | $(human "$size") |$line$bws$ratios"
  done
}

primary=() rest=()
for item in "${items[@]}"; do
  read -r op n s <<<"$item"
  if [[ $op == allreduce && $n == 2 ]]; then primary+=("$item"); else rest+=("$item"); fi
done
echo
echo "Load at start: \`$load_start\`; at end: \`$load_end\`; $rounds rounds; medians with [min-max] over the rounds."
echo "Busbw is computed from the median time. Ratios: time ratio < 1 and busbw ratio > 1 mean Braid is better."
echo
echo "#### all_reduce float32 sum, 2 ranks, shared memory, out of place"
echo
table 5 "${primary[@]}"
echo
echo "#### all_reduce float32 sum, 2 ranks, shared memory, in place"
echo
table 6 "${primary[@]}"
if (( ${#rest[@]} )); then
  echo
  echo "#### broadcast (root 0), all_gather, reduce_scatter (float32 sum) on 2 ranks; all_reduce float32 sum on 4 and 8 ranks (2 cores: oversubscribed); out of place"
  echo
  table 5 "${rest[@]}"
  echo
  echo "#### the same, in place"
  echo
  table 6 "${rest[@]}"
fi
echo
echo "Total wall time: $(( $(date +%s) - start )) s; raw outputs: $log_dir" >&2
