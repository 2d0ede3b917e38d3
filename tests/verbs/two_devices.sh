#!/bin/bash
# Point-to-point over verbs between two rxe devices: a VM with two Soft-RoCE
# devices on a veth pair (tools/rxe-vm --two-devices), rank 0 on rxe0 and
# rank 1 on rxe1, braid-bench's checked pingpong (non-zero exit on any wrong
# byte). Exit 77 where the VM cannot run, as tools/rxe-vm does.
set -uo pipefail
build=${1:?usage: two_devices.sh BUILD_DIR}
repo=$(cd "$(dirname "$(readlink -f "$0")")/../.." && pwd -P)
exec "$repo/tools/rxe-vm" --two-devices --timeout 600 -- \
  "$build/tools/braidrun -n 2 --timeout 300 sh -c 'BRAID_IB_HCA==rxe\$RANK exec $build/bench/braid-bench pingpong -b 8 -e 4M -f 8 -n 10 -w 2 --backend verbs'"
