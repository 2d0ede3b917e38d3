#!/usr/bin/env bash
# TCP with one socket per peer against several (BRAID_TCP_SOCKETS), side by
# side in one sitting across emulated hosts (tools/cluster): every setting
# runs each (collective, size) in turn, and the whole list repeats ROUNDS
# times. Prints a markdown table: median time over the rounds [min-max] in
# us and busbw (nccl-tests' definition), float32 sum, out of place, checked.
# Where iperf3 exists it first measures the link with 1 and 4 streams.
#
#   bench/compare_sockets.sh BUILD      (root: namespaces)
#   HOSTS=2 PER_HOST=1 RATE= (empty: unshaped; e.g. 4gbit) ROUNDS=3
#   SOCKETS="1 2 4" COLLS="allreduce broadcast" SIZES="1M 4M 16M 64M"
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
build=$(cd "${1:?usage: compare_sockets.sh BUILD}" && pwd)
hosts=${HOSTS:-2} per=${PER_HOST:-1} rate=${RATE-} rounds=${ROUNDS:-3}
settings=${SOCKETS:-"1 2 4"}
colls=${COLLS:-"allreduce broadcast"}
sizes=${SIZES:-"1M 4M 16M 64M"}
log_dir=${LOG_DIR:-$(mktemp -d /tmp/compare_sockets.XXXXXX)}
mkdir -p "$log_dir"
[[ $(id -u) == 0 ]] || { echo "compare_sockets.sh: needs root (tools/cluster)" >&2; exit 2; }
source "$here/cluster_bench.sh"
name=sck
cluster_start $name "$hosts" "$per" "$rate"

link="not measured (no iperf3)"
if command -v iperf3 >/dev/null; then
  link=""
  for streams in 1 4; do
    gbit=$(iperf3_gbit ${name}1 ${name}2 $streams)
    link+="${link:+, }${gbit:-?} Gbit/s with $streams stream(s)"
  done
fi

one() {  # sockets coll bytes -> "time_us wrong"
  local k=$1 coll=$2 b=$3 log=$log_dir/s$1-$2-$3-r$round.txt iters="-n 20 -w 3"
  (( b > 8388608 )) && iters="-n 5 -w 1"
  BRAID_BACKEND=tcp BRAID_TCP_SOCKETS=$k "$build/tools/braidrun" --hosts "$host_list" --agent "$cluster exec" \
    --timeout 600 "$build/bench/braid-bench" "$coll" -b "$b" -e "$b" $iters -c 1 >"$log" 2>&1 ||
    { echo "compare_sockets.sh: $k sockets, $coll $b failed, see $log" >&2; exit 1; }
  awk '/^ *[0-9]/ { print $6, $9; exit }' "$log"
}
echo "# compare_sockets.sh: $hosts hosts x $per, rate ${rate:-unshaped}, link $link, $rounds rounds; logs in $log_dir" >&2
: >"$log_dir/times.txt"
for round in $(seq 1 "$rounds"); do
  for coll in $colls; do
    for s in $sizes; do
      b=$(bytes_of "$s")
      for k in $settings; do
        read -r t wrong < <(one "$k" "$coll" "$b")
        [[ $wrong == 0 ]] || { echo "compare_sockets.sh: $k sockets $coll $b: #wrong=$wrong" >&2; exit 1; }
        echo "$coll $k $b $t" >>"$log_dir/times.txt"
      done
    done
  done
  echo "# round $round done" >&2
done
echo "## $hosts hosts x $per ranks per host, ${rate:-unshaped} links, backend tcp; link: $link"
for coll in $colls; do
  f=$(busbw_factor "$coll" $n)
  echo; echo "### $coll, float32, out of place: median of $rounds rounds [min-max], us; busbw GB/s"; echo
  header="| size |"; rule="|---:|"
  for k in $settings; do header+=" $k socket(s) | busbw |"; rule+="---:|---:|"; done
  echo "$header"; echo "$rule"
  for s in $sizes; do
    b=$(bytes_of "$s"); row="| $s |"
    for k in $settings; do
      read -r m lo hi < <(awk -v c=$coll -v k=$k -v b=$b '$1 == c && $2 == k && $3 == b { print $4 }' "$log_dir/times.txt" | stats)
      row+=$(awk -v m=$m -v lo=$lo -v hi=$hi -v b=$b -v f=$f 'BEGIN { printf " %.1f [%.4g-%.4g] | %.3f |", m, lo, hi, b / 1e3 / m * f }')
    done
    echo "$row"
  done
done
