#!/usr/bin/env bash
# Braid across emulated hosts, side by side with Open MPI (TCP between hosts,
# its shared memory inside) and optionally with an older Braid build, in one
# sitting: tools/cluster makes HOSTS network namespaces on a bridge, each
# with its own hostname, optionally shaped with tbf; every implementation
# runs each (collective, size) in turn, and the whole list repeats ROUNDS
# times, so drift in the machine's load hits all alike. Prints a markdown
# table per collective: median time over the rounds [min-max] and busbw
# (nccl-tests' definition), out of place, float32 sum; every run checked.
# Where iperf3 exists it first measures the link between two hosts; on a
# shaped link each row also gives Braid's busbw over the algorithmic ceiling
# (that link times the collective's factor, below). Each row also gives
# braid-sim's prediction for what the runtime chooses, priced with the link
# the job's own probe measured (BRAID_DEBUG=INFO of short jobs: latency,
# rate and the gap between small messages) and with the machine's own
# stream between two unshaped namespaces (iperf3), and the measured time
# over it.
#
#   bench/compare_hosts.sh BUILD [BEFORE_BUILD]      (root: namespaces)
#   HOSTS=2 PER_HOST=2 RATE=4gbit (empty: unshaped) ROUNDS=3
#   TCP_CC=cubic (the hosts' TCP congestion control; 'machine': this machine's)
#   CPUS_PER_HOST=K: each host K CPUs of its own (tools/cluster up --cpus),
#   as real hosts have, where the machine has HOSTS x K; braid-sim then
#   prices the hosts as machines of their own (no --machine-cpus). Unset,
#   the hosts share all of the machine's CPUs
#   COLLS="allreduce allgather reducescatter broadcast" SIZES="8 1K 32K 512K 2M 8M 32M 64M"
#   MPI=1 (0: Braid only)  LOG_DIR=...
#   GRID=1: every configuration issue 17 names, one after the other: 2 and 4
#   hosts x 1 and 2 ranks per host, unshaped and at RATE (default 4gbit);
#   logs in LOG_DIR/<hosts>x<per>-<rate>/
#
# Open MPI runs as the notes measured it fair on 2 cores: ob1 with the tcp
# BTL between hosts and vader inside, yield_when_idle (ranks outnumber the
# CPUs), no binding; its rsh agent is tools/cluster rsh.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
if [[ ${GRID:-0} == 1 ]]; then
  grid_dir=${LOG_DIR:-$(mktemp -d /tmp/compare_hosts.XXXXXX)}
  shaped=${RATE-4gbit}
  for h in 2 4; do
    for p in 1 2; do
      for r in "" "$shaped"; do
        GRID=0 HOSTS=$h PER_HOST=$p RATE=$r LOG_DIR=$grid_dir/${h}x$p-${r:-unshaped} "$0" "$@"
        echo
      done
    done
  done
  exit 0
fi
build=$(cd "${1:?usage: compare_hosts.sh BUILD [BEFORE_BUILD]}" && pwd)
before=${2:+$(cd "$2" && pwd)}
hosts=${HOSTS:-2} per=${PER_HOST:-2} rate=${RATE-4gbit} rounds=${ROUNDS:-3}
colls=${COLLS:-"allreduce allgather reducescatter broadcast"}
sizes=${SIZES:-"8 1K 32K 512K 2M 8M 32M 64M"}
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

link="not measured (no iperf3)" gbit=""
if command -v iperf3 >/dev/null && (( hosts >= 2 )); then
  gbit=$(iperf3_gbit ${name}1 ${name}2)
  link="${gbit:-?} Gbit/s (iperf3, one stream, ${name}2 to ${name}1)"
fi
# The machine's own stream between two of its namespaces, unshaped, for
# braid-sim --machine-stream-mbps (the sender's CPU carries it): the link
# above where it is unshaped, else a pair of hosts of its own.
stream=""
if command -v iperf3 >/dev/null && (( hosts >= 2 )); then
  if [[ -z $rate ]]; then
    stream=$gbit
  else
    "$cluster" up 2 --name ${name}s ${TCP_CC:+--cc "$TCP_CC"} >/dev/null 2>&1
    stream=$(iperf3_gbit ${name}s1 ${name}s2)
    "$cluster" down --name ${name}s >/dev/null 2>&1
  fi
fi

# The link as the runtime's cost model sees it: what the job's probe
# measures at init (link_probe.hpp), for braid-sim's predictions; the median
# of three short jobs' probes (one probe now and then reads several times
# the usual latency).
probes=$(for i in 1 2 3; do
  "$build/tools/braidrun" --hosts "$host_list" --agent "$cluster exec" --timeout 120 env BRAID_DEBUG=INFO \
    "$build/bench/braid-bench" allreduce -b 8 -e 8 -n 1 -w 0 -c 0 2>&1 |
    sed -n 's/.*link between hosts ([^)]*): \([0-9.]*\) us one way, \([0-9.]*\) Gbit\/s, a gap of \([0-9.]*\) us.*/\1 \2 \3/p' | head -1
done)
probe_us=$(awk '{ print $1 }' <<<"$probes" | stats | awk '{ print $1 }')
probe_gbit=$(awk '{ print $2 }' <<<"$probes" | stats | awk '{ print $1 }')
probe_gap=$(awk '{ print $3 }' <<<"$probes" | stats | awk '{ print $1 }')
[[ -n $probe_us && -n $probe_gbit && -n $probe_gap ]] || { probe_us=0; probe_gbit=0; probe_gap=0; }
sim_args=()
[[ -n $stream && -z ${CPUS_PER_HOST:-} ]] && sim_args+=(--machine-stream-mbps "$(awk -v g="$stream" 'BEGIN { printf "%d", g * 1000 }')")
[[ $probe_us != 0 ]] && sim_args+=(--link-latency-ns "$(awk -v u="$probe_us" 'BEGIN { printf "%d", u * 1000 }')"
                                   --link-mbps "$(awk -v g="$probe_gbit" 'BEGIN { printf "%d", g * 1000 }')"
                                   --link-gap-ns "$(awk -v u="$probe_gap" 'BEGIN { printf "%d", u * 1000 }')")
# braid-sim's time for what it chooses ('*') for one collective and size;
# the emulated hosts are namespaces of this machine, sharing its CPUs
# (--machine-cpus: priced so, while '*' stays the runtime's choice), priced
# as the benchmark times it: its timed calls back to back (--calls), TCP in
# LogP's terms (--logp: the ends' own share of a message's latency, eager
# small messages), bench/RESULTS.md section 35.
sim_us() {
  local calls
  calls=$(iters_for "$2" | awk '{ print $2 }')
  local machine=(--machine-cpus "$(nproc)")
  [[ -n ${CPUS_PER_HOST:-} ]] && machine=()
  "$build/tools/braid-sim" "$1" --ranks "$n" --hosts "$hosts" --backend auto "${sim_args[@]}" \
    "${machine[@]}" --logp --calls "$calls" -b "$2" -e "$2" |
    awk '/^ *[0-9]/ { for (i = 3; i <= NF; ++i) if ($i ~ /\*$/) { sub(/\*$/, "", $i); print $i } }'
}
# The algorithmic ceiling in busbw over a link of L: every host must send
# (all_reduce: reduce-scatter then all_gather across hosts) or receive
# (all_gather, reduce_scatter) (H-1)/H of the data across its own link,
# which in busbw is L x H(n-1)/((H-1)n); a broadcast's every host receives
# it all once: L.
ceiling_factor() {
  case $1 in
    broadcast) echo 1 ;;
    *) awk -v h="$hosts" -v n="$n" 'BEGIN { print h * (n - 1) / ((h - 1) * n) }' ;;
  esac
}

# Warm-up calls pass at least 4 MiB from 4 KiB up: tbf lets a burst (1 MB)
# through at full speed, and a timed loop that starts with the bucket full
# reads faster than the link (an implementation whose init had drained it,
# as Braid's link probe does, would read slower than one whose had not).
iters_for() {
  local b=$1 n w
  if (( b <= 32768 )); then n=200 w=20; elif (( b <= 2097152 )); then n=20 w=3; else n=5 w=1; fi
  (( b >= 4096 && w * b < 4194304 )) && w=$(( (4194304 + b - 1) / b ))
  echo "-n $n -w $w"
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

echo "# compare_hosts.sh: $hosts hosts x $per ranks, rate ${rate:-unshaped}, TCP congestion control $cc, link $link, probe ${probe_us} us ${probe_gbit} Gbit/s gap ${probe_gap} us, machine stream ${stream:-?} Gbit/s, $rounds rounds; logs in $log_dir" >&2
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

cpus_said="the machine's $(nproc), shared by all hosts"
[[ -n ${CPUS_PER_HOST:-} ]] && cpus_said="$CPUS_PER_HOST of its own to each host"
echo "## $hosts hosts x $per ranks per host, ${rate:-unshaped} links; link: $link; the job's probe: $probe_us us one way, $probe_gbit Gbit/s, a gap of $probe_gap us; the machine's stream: ${stream:-?} Gbit/s; TCP congestion control $cc; CPUs: $cpus_said"
shaped_ceiling=""
[[ -n $rate && -n $gbit ]] && shaped_ceiling=$gbit
for coll in $colls; do
  f=$(busbw_factor "$coll" $n)
  echo; echo "### $coll, float32, out of place: median of $rounds rounds [min-max], us; busbw GB/s"; echo
  header="| size |"; rule="|---:|"
  for impl in $impls; do header+=" $impl time | $impl busbw |"; rule+="---:|---:|"; done
  [[ $impls == *mpi* ]] && { header+=" Braid / Open MPI |"; rule+="---:|"; }
  header+=" braid-sim (us) | Braid / sim |"; rule+="---:|---:|"
  [[ -n $shaped_ceiling ]] && { header+=" ceiling busbw | Braid / ceiling |"; rule+="---:|---:|"; }
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
    sim=$(sim_us "$coll" "$b")
    row+=$(awk -v a=$med_braid -v p="${sim:-0}" 'BEGIN { if (p > 0) printf " %.1f | %.2f |", p, a / p; else printf " - | - |" }')
    if [[ -n $shaped_ceiling ]]; then
      c=$(awk -v g="$shaped_ceiling" -v k="$(ceiling_factor "$coll")" 'BEGIN { print g / 8 * k }')
      row+=$(awk -v a=$med_braid -v b=$b -v f=$f -v c=$c 'BEGIN { printf " %.3f | %.2f |", c, b / 1e3 / a * f / c }')
    fi
    echo "$row"
  done
done
