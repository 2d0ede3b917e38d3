#!/usr/bin/env bash
# Braid across emulated hosts, side by side with Open MPI (TCP between hosts,
# its shared memory inside) and optionally with an older Braid build, in one
# sitting: tools/cluster makes HOSTS network namespaces on a bridge, each
# with its own hostname, optionally shaped with tbf; every implementation
# runs each (collective, size) in turn, and the whole list repeats ROUNDS
# times, so drift in the machine's load hits all alike. Prints a markdown
# table per collective: median time over the rounds [min-max] and busbw
# (nccl-tests' definition), out of place, float32 sum; every run checked.
# Where iperf3 exists it first measures the link between two hosts.
#
#   bench/compare_hosts.sh BUILD [BEFORE_BUILD]      (root: namespaces)
#   HOSTS=2 PER_HOST=2 RATE=4gbit (empty: unshaped) ROUNDS=3
#   COLLS="allreduce allgather reducescatter broadcast" SIZES="8 1K 32K 512K 2M 8M 32M"
#   MPI=1 (0: Braid only)  LOG_DIR=...
#
# Open MPI runs as the notes measured it fair on 2 cores: ob1 with the tcp
# BTL between hosts and vader inside, yield_when_idle (ranks outnumber the
# CPUs), no binding; its rsh agent is tools/cluster rsh.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
build=$(cd "${1:?usage: compare_hosts.sh BUILD [BEFORE_BUILD]}" && pwd)
before=${2:+$(cd "$2" && pwd)}
hosts=${HOSTS:-2} per=${PER_HOST:-2} rate=${RATE-4gbit} rounds=${ROUNDS:-3}
colls=${COLLS:-"allreduce allgather reducescatter broadcast"}
sizes=${SIZES:-"8 1K 32K 512K 2M 8M 32M"}
use_mpi=${MPI:-1}
log_dir=${LOG_DIR:-$(mktemp -d /tmp/compare_hosts.XXXXXX)}
mkdir -p "$log_dir"
[[ $(id -u) == 0 ]] || { echo "compare_hosts.sh: needs root (tools/cluster)" >&2; exit 2; }
for b in "$build" ${before:+"$before"}; do
  [[ -x $b/bench/braid-bench && -x $b/tools/braidrun ]] || { echo "compare_hosts.sh: $b lacks braid-bench or braidrun" >&2; exit 2; }
done

source "$here/cluster_bench.sh"
name=cmp
cluster_start $name "$hosts" "$per" "$rate"

impls="braid"
[[ -n $before ]] && impls+=" before"
if [[ $use_mpi == 1 ]]; then
  command -v mpirun.openmpi >/dev/null && command -v mpicc.openmpi >/dev/null ||
    { echo "compare_hosts.sh: Open MPI (mpirun.openmpi, mpicc.openmpi) not found; MPI=0 runs Braid only" >&2; exit 2; }
  mpi_bench=$log_dir/mpi-bench-openmpi
  mpicc.openmpi -O2 -std=c11 -o "$mpi_bench" "$here/mpi/mpi_bench.c" -lm
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  subnet=$("$cluster" subnet --name $name)
  mpirun_cmd=(mpirun.openmpi -np "$n" --host "$host_list" --mca plm_rsh_agent "$cluster rsh" --mca pml ob1
              --mca btl tcp,vader,self --mca btl_tcp_if_include "$subnet" --mca oob_tcp_if_include "$subnet"
              --mca mpi_yield_when_idle 1 --bind-to none)
  impls+=" mpi"
fi

link="not measured (no iperf3)"
if command -v iperf3 >/dev/null && (( hosts >= 2 )); then
  "$cluster" exec ${name}1 iperf3 -s -1 -D >/dev/null 2>&1; sleep 0.5  # a daemon: waits for one client
  gbit=$("$cluster" exec ${name}2 iperf3 -c ${name}1 -t 3 -f g 2>/dev/null | awk '/receiver/ { print $(NF-2) }')
  link="${gbit:-?} Gbit/s (iperf3, one stream, ${name}2 to ${name}1)"
fi

iters_for() {
  local b=$1
  if (( b <= 32768 )); then echo "-n 200 -w 20"; elif (( b <= 2097152 )); then echo "-n 20 -w 3"; else echo "-n 5 -w 1"; fi
}
one() {  # impl coll size -> "time_us wrong"
  local impl=$1 coll=$2 b=$3 log
  log=$log_dir/$impl-$coll-$b-r$round.txt
  local args=("$coll" -b "$b" -e "$b" $(iters_for "$b") -c 1)
  case $impl in
    braid)  "$build/tools/braidrun" --hosts "$host_list" --agent "$cluster exec" --timeout 600 "$build/bench/braid-bench" "${args[@]}" ;;
    before) "$before/tools/braidrun" --hosts "$host_list" --agent "$cluster exec" --timeout 600 "$before/bench/braid-bench" "${args[@]}" ;;
    mpi)    timeout 600 "${mpirun_cmd[@]}" "$mpi_bench" "${args[@]}" ;;
  esac >"$log" 2>&1 || { echo "compare_hosts.sh: $impl $coll $b failed, see $log" >&2; exit 1; }
  awk '/^ *[0-9]/ { print $6, $9; exit }' "$log"
}

echo "# compare_hosts.sh: $hosts hosts x $per ranks, rate ${rate:-unshaped}, link $link, $rounds rounds; logs in $log_dir" >&2
: >"$log_dir/times.txt"
for round in $(seq 1 "$rounds"); do
  for coll in $colls; do
    for s in $sizes; do
      b=$(bytes_of "$s")
      # all_gather and reduce_scatter need an element per rank (float32).
      [[ $coll == allgather || $coll == reducescatter ]] && (( b < 4 * n )) && continue
      for impl in $impls; do
        read -r t wrong < <(one "$impl" "$coll" "$b")
        [[ $wrong == 0 ]] || { echo "compare_hosts.sh: $impl $coll $b round $round: #wrong=$wrong" >&2; exit 1; }
        echo "$coll $impl $b $t" >>"$log_dir/times.txt"
      done
    done
  done
  echo "# round $round done" >&2
done

echo "## $hosts hosts x $per ranks per host, ${rate:-unshaped} links; link: $link"
for coll in $colls; do
  f=$(busbw_factor "$coll" $n)
  echo; echo "### $coll, float32, out of place: median of $rounds rounds [min-max], us; busbw GB/s"; echo
  header="| size |"; rule="|---:|"
  for impl in $impls; do header+=" $impl time | $impl busbw |"; rule+="---:|---:|"; done
  [[ $impls == *mpi* ]] && { header+=" Braid / Open MPI |"; rule+="---:|"; }
  echo "$header"; echo "$rule"
  for s in $sizes; do
    b=$(bytes_of "$s")
    [[ $coll == allgather || $coll == reducescatter ]] && (( b < 4 * n )) && continue
    row="| $s |"
    for impl in $impls; do
      read -r m lo hi < <(awk -v c=$coll -v i=$impl -v b=$b '$1 == c && $2 == i && $3 == b { print $4 }' "$log_dir/times.txt" | stats)
      eval "med_$impl=$m"
      row+=$(awk -v m=$m -v lo=$lo -v hi=$hi -v b=$b -v f=$f 'BEGIN { printf " %.1f [%.4g-%.4g] | %.3f |", m, lo, hi, b / 1e3 / m * f }')
    done
    [[ $impls == *mpi* ]] && row+=$(awk -v a=$med_braid -v o=$med_mpi 'BEGIN { printf " %.2f |", a / o }')
    echo "$row"
  done
done
