# Shared by the benchmarks that run across emulated hosts (compare_hosts.sh,
# compare_sockets.sh); sourced, not run.
#
#   cluster_start NAME HOSTS PER RATE  brings up tools/cluster (RATE empty:
#                                      unshaped; TCP_CC=ALGO: the hosts' TCP
#                                      congestion control, default cubic,
#                                      'machine' this machine's;
#                                      CPUS_PER_HOST=K: K CPUs of its own
#                                      to each host, up --cpus), tears it
#                                      down at exit; sets $cc and
#                                      $cluster, $host_list ("NAME1:PER,...")
#                                      and $n (the ranks)
#   iperf3_gbit SERVER CLIENT [STREAMS] one iperf3 run (3 s, STREAMS at once,
#                                      default 1) from host CLIENT to host
#                                      SERVER of $cluster: Gbit/s in all
#   bytes_of SIZE                      8, 1K, 64M -> bytes
#   stats                              numbers on stdin -> "median min max"
#   busbw_factor COLL N                nccl-tests' busbw / algbw for COLL on N ranks

cluster_start() {
  local name=$1 hosts=$2 per=$3 rate=$4 i
  cluster=$root/tools/cluster
  "$cluster" down --name "$name" >/dev/null 2>&1 || true
  "$cluster" up "$hosts" --name "$name" ${rate:+--rate "$rate"} ${TCP_CC:+--cc "$TCP_CC"} \
    ${CPUS_PER_HOST:+--cpus "$CPUS_PER_HOST"} >&2
  cc=$(ip netns exec "${name}1" sysctl -n net.ipv4.tcp_congestion_control)
  trap '"$cluster" down --name '"$name"' >/dev/null 2>&1' EXIT
  host_list=""
  for i in $(seq 1 "$hosts"); do host_list+="${host_list:+,}$name$i:$per"; done
  n=$((hosts * per))
}

iperf3_gbit() {
  "$cluster" exec "$1" iperf3 -s -1 -D >/dev/null 2>&1; sleep 0.5  # a daemon: waits for one client
  # With several streams the last 'receiver' line is their sum.
  "$cluster" exec "$2" iperf3 -c "$1" -t 3 -P "${3:-1}" -f g 2>/dev/null | awk '/receiver/ { v = $(NF-2) } END { print v }'
}

bytes_of() {
  case $1 in
    *K) echo $(( ${1%K} << 10 ));; *M) echo $(( ${1%M} << 20 ));; *) echo "$1";;
  esac
}

stats() { sort -g | awk '{ v[NR] = $1 } END { m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; print m, v[1], v[NR] }'; }

busbw_factor() {
  case $1 in
    allreduce) awk -v n="$2" 'BEGIN { print 2 * (n - 1) / n }' ;;
    allgather|reducescatter) awk -v n="$2" 'BEGIN { print (n - 1) / n }' ;;
    *) echo 1 ;;
  esac
}
