# Sourced by the tests that run across emulated hosts: makes a cluster of
# tools/cluster (cluster_up PREFIX N [tools/cluster up options]), sets
# $cluster and $name, tears it down on exit, and skips the test (77) where
# namespaces cannot be made (not root, no ip or unshare).
# Needs $src, the source tree.
cluster="$src/tools/cluster"
cluster_up() {
  local prefix=$1 n=$2; shift 2
  [[ $(id -u) == 0 ]] || { echo "not root: network namespaces (tools/cluster) need it"; exit 77; }
  command -v ip >/dev/null && command -v unshare >/dev/null || { echo "no ip or unshare here"; exit 77; }
  name="$prefix$(( $$ % 100000 ))"
  if ! "$cluster" up "$n" "$@" --name "$name" > /tmp/$name.log 2>&1; then
    echo "tools/cluster could not make hosts here: $(cat /tmp/$name.log)"; "$cluster" down --name "$name" 2>/dev/null; exit 77
  fi
  trap '"$cluster" down --name "$name"; rm -f /tmp/$name.log /tmp/$name.out' EXIT
}
