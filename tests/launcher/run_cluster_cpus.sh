#!/usr/bin/env bash
# tools/cluster up --cpus K: each emulated host gets K CPUs of its own, and
# what runs there (exec, rsh, and so braidrun's ranks) is bound to them.
# Here 2 hosts of 1 CPU each: every rank of host 1 sees CPU list A, every
# rank of host 2 list B, one CPU each, A != B; asking for more CPUs than
# the machine has is refused, saying so. Skipped (77) where namespaces
# cannot be made (not root) or the machine has 1 CPU.
set -uo pipefail
src="$1"; braidrun="$2"
(( $(nproc) >= 2 )) || { echo "one CPU here: no two hosts can have one each"; exit 77; }
source "$(dirname "$0")/cluster_up.sh"
cluster_up bc 2 --cpus 1
"$cluster" status --name "$name"
"$braidrun" --hosts "${name}1:2,${name}2:2" --agent "$cluster exec" --timeout 60 \
  sh -c 'echo "rank=$RANK host=$(hostname) cpus=$(awk "/^Cpus_allowed_list/ { print \$2 }" /proc/self/status) nproc=$(nproc)"' \
  > /tmp/$name.out 2>&1 || { echo "braidrun across the hosts failed"; cat /tmp/$name.out; exit 1; }
cat /tmp/$name.out
a=$(awk -v h="${name}1" '$2 == "host=" h { print $3 }' /tmp/$name.out | sort -u)
b=$(awk -v h="${name}2" '$2 == "host=" h { print $3 }' /tmp/$name.out | sort -u)
[[ $(grep -c "nproc=1$" /tmp/$name.out) == 4 ]] || { echo "a rank sees more than its host's one CPU"; exit 1; }
[[ -n $a && -n $b && $(wc -l <<<"$a") == 1 && $(wc -l <<<"$b") == 1 && $a != "$b" ]] ||
  { echo "the hosts' ranks should see one CPU list per host, different hosts different lists: '$a' '$b'"; exit 1; }
# More CPUs than the machine has: refused, saying how many it gives.
too=$(( $(nproc) + 1 ))
if out=$("$cluster" up 1 --cpus "$too" --name "${name}x" 2>&1); then
  "$cluster" down --name "${name}x"; echo "--cpus $too accepted on $(nproc) CPUs"; exit 1
fi
grep -q "this machine gives" <<<"$out" || { echo "--cpus $too refused without saying why: $out"; exit 1; }
echo "2 hosts with a CPU each: their ranks bound to ${a#cpus=} and ${b#cpus=}"
