#!/usr/bin/env bash
# Braid vs Open MPI over TCP loopback, 2 ranks, in one sitting: point-to-point
# pingpong (half round trip, as osu_latency) and all_reduce float32 sum, at the
# same sizes, alternating Braid and Open MPI for ROUNDS rounds so that drift in
# the machine's load hits both alike. Prints markdown tables: per size the
# median time of each with [min-max] over the rounds, the ratio of medians and
# the ratio of best rounds (on a shared machine the best round is the closest
# to an idle one). Every run is checked (-c 1). Raw outputs stay in LOG_DIR.
#
#   bench/compare_tcp.sh [BUILD_DIR]        (default: build-bench, then build)
#
# Needs braid-bench and braidrun from the build, and Open MPI: mpirun.openmpi
# plus mpi-bench-openmpi (built by meson when mpicc.openmpi is found; otherwise
# this script compiles it with
#   mpicc.openmpi -O2 -std=c11 -o mpi-bench-openmpi bench/mpi/mpi_bench.c -lm).
# Debian's Open MPI and MPICH can be installed side by side, with the plain
# mpicc/mpirun pointing at either, so the Open MPI-suffixed names are used;
# where they do not exist (other distributions), a plain mpirun that is Open
# MPI and the plain-mpicc build (mpi-bench) are used instead.
# Environment: ROUNDS (default 5), LOG_DIR (default a fresh mktemp -d),
# SIZES (default "8 64 1K 16K 256K 1M 4M 16M 64M").
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
source "$here/pick_build.sh"
pick_build compare_tcp.sh "${1:-}" "build-bench build" bench/braid-bench
braidrun=$build/tools/braidrun
braid_bench=$build/bench/braid-bench
rounds=${ROUNDS:-5}
sizes=${SIZES:-"8 64 1K 16K 256K 1M 4M 16M 64M"}
log_dir=${LOG_DIR:-$(mktemp -d /tmp/compare_tcp.XXXXXX)}
mkdir -p "$log_dir"

# The MCA flags below are Open MPI's: use its own launcher and wrapper.
if command -v mpirun.openmpi >/dev/null; then
  mpirun=mpirun.openmpi mpicc=mpicc.openmpi mpi_bench=${MPI_BENCH:-$build/bench/mpi-bench-openmpi}
elif command -v mpirun >/dev/null && mpirun --version 2>&1 | grep -q 'Open MPI'; then
  mpirun=mpirun mpicc=mpicc mpi_bench=${MPI_BENCH:-$build/bench/mpi-bench}
else
  echo "compare_tcp.sh: Open MPI's mpirun not found: install Open MPI (openmpi-bin, libopenmpi-dev)" >&2; exit 2
fi
if [[ ! -x $mpi_bench ]]; then
  command -v "$mpicc" >/dev/null || { echo "compare_tcp.sh: neither $mpi_bench nor $mpicc found" >&2; exit 2; }
  mpi_bench=$log_dir/$(basename "$mpi_bench")
  "$mpicc" -O2 -std=c11 -o "$mpi_bench" "$here/mpi/mpi_bench.c" -lm
fi
if [[ $(id -u) == 0 ]]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
# ob1 + the tcp BTL on lo only: without "pml ob1" Open MPI may pick UCX, which
# would use shared memory and ignore the btl list.
mpirun_cmd=("$mpirun" -np 2 --mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include lo)
braidrun_cmd=("$braidrun" --no-prefix --timeout 300 -n 2)

bytes_of() {
  local s=$1
  case $s in
    *K) echo $(( ${s%K} << 10 ));; *M) echo $(( ${s%M} << 20 ));; *G) echo $(( ${s%G} << 30 ));; *) echo "$s";;
  esac
}

# Iterations: enough for a stable mean at small sizes, few at large ones, so
# that the whole comparison stays within about ten minutes on 2 cores.
iters_for() {  # op bytes -> "-n N -w W"
  local op=$1 b=$2
  if   (( b <= 1024 ));     then [[ $op == pingpong ]] && echo "-n 5000 -w 500" || echo "-n 3000 -w 300"
  elif (( b <= 16384 ));    then [[ $op == pingpong ]] && echo "-n 2000 -w 200" || echo "-n 1000 -w 100"
  elif (( b <= 262144 ));   then echo "-n 500 -w 50"
  elif (( b <= 1048576 ));  then echo "-n 100 -w 10"
  elif (( b <= 4194304 ));  then echo "-n 40 -w 4"
  elif (( b <= 16777216 )); then echo "-n 16 -w 2"
  else                           echo "-n 8 -w 2"
  fi
}

# One measurement: prints "size time_us wrong" from the first table row.
one() {  # impl op size_text
  local impl=$1 op=$2 s=$3 b
  b=$(bytes_of "$s")
  local args=("$op" -b "$b" -e "$b" $(iters_for "$op" "$b") -c 1)
  [[ $impl == braid ]] && args+=(--backend tcp)  # "auto" may pick a faster local transport
  [[ $op == allreduce ]] && args+=(-d float -o sum)
  local log="$log_dir/$impl-$op-$s-r$round.txt"
  if [[ $impl == braid ]]; then
    "${braidrun_cmd[@]}" "$braid_bench" "${args[@]}" >"$log" 2>&1 || { echo "braid-bench failed, see $log" >&2; exit 1; }
  else
    "${mpirun_cmd[@]}" "$mpi_bench" "${args[@]}" >"$log" 2>&1 || { echo "mpi-bench failed, see $log" >&2; exit 1; }
  fi
  # nccl-tests row: size count type redop root time algbw busbw #wrong ...
  awk '/^ *[0-9]/ { print $1, $6, $9; exit }' "$log"
}

start=$(date +%s)
: >"$log_dir/times.txt"  # a reused LOG_DIR must not mix in older rounds
echo "# compare_tcp.sh: $rounds rounds, sizes: $sizes; logs in $log_dir" >&2
for round in $(seq 1 "$rounds"); do
  for op in pingpong allreduce; do
    for s in $sizes; do
      for impl in braid mpi; do   # alternate within each size too
        read -r size t wrong < <(one "$impl" "$op" "$s")
        [[ $wrong == 0 ]] || { echo "compare_tcp.sh: $impl $op $s round $round: #wrong=$wrong" >&2; exit 1; }
        echo "$op $impl $size $t" >>"$log_dir/times.txt"
      done
    done
  done
  echo "# round $round done after $(( $(date +%s) - start )) s" >&2
done

# "median min max" of the numbers on stdin.
stats() { sort -g | awk '{ v[NR] = $1 } END {
  m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; print m, v[1], v[NR] }'; }
human() {
  local b=$1
  if (( b >= 1048576 && b % 1048576 == 0 )); then echo "$(( b >> 20 )) MiB"
  elif (( b >= 1024 && b % 1024 == 0 )); then echo "$(( b >> 10 )) KiB"
  else echo "$b B"; fi
}

for op in pingpong allreduce; do
  if [[ $op == pingpong ]]; then
    echo; echo "### pingpong, 2 ranks, TCP loopback: half round trip (median of $rounds rounds, [min-max])"
  else
    echo; echo "### all_reduce float32 sum, 2 ranks, TCP loopback, out of place (median of $rounds rounds, [min-max])"
  fi
  echo
  echo "| size | Braid time (us) | Open MPI time (us) | Braid / Open MPI (median) | Braid / Open MPI (best round) | Braid algbw (GB/s) | Open MPI algbw (GB/s) |"
  echo "|---:|---:|---:|---:|---:|---:|---:|"
  for s in $sizes; do
    b=$(bytes_of "$s")
    read -r tb tb_lo tb_hi < <(awk -v op=$op -v b="$b" '$1 == op && $2 == "braid" && $3 == b { print $4 }' "$log_dir/times.txt" | stats)
    read -r tm tm_lo tm_hi < <(awk -v op=$op -v b="$b" '$1 == op && $2 == "mpi" && $3 == b { print $4 }' "$log_dir/times.txt" | stats)
    awk -v h="$(human "$b")" -v b="$b" -v tb="$tb" -v tm="$tm" -v bl="$tb_lo" -v bh="$tb_hi" -v ml="$tm_lo" -v mh="$tm_hi" 'BEGIN {
      printf "| %s | %.2f [%.4g-%.4g] | %.2f [%.4g-%.4g] | %.2f | %.2f | %.3f | %.3f |\n", h, tb, bl, bh, tm, ml, mh, tb / tm, bl / ml, b / 1e3 / tb, b / 1e3 / tm }'
  done
done
echo
echo "Total wall time: $(( $(date +%s) - start )) s; raw outputs: $log_dir" >&2
