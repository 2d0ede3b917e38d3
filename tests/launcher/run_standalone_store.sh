#!/usr/bin/env bash
# A standalone braid-store serves a job: rank 0 finds the port taken and uses
# it. The store and the job share the job's secret (BRAID_JOB_TOKEN; braidrun
# would otherwise make a new one, which this store could not prove); a job
# with another secret is refused by it, naming BRAID_JOB_TOKEN.
set -euo pipefail
store="$1"; braidrun="$2"; hello="$3"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
export BRAID_JOB_TOKEN="standalone-$RANDOM-$RANDOM-$$"
"$store" --port "$port" &
pid=$!
trap 'kill $pid 2>/dev/null || true' EXIT
sleep 0.3
"$braidrun" -n 3 --port "$port" --timeout 60 "$hello" env
# The job is over and the store still serves (later jobs on it need their
# own group_name: keys of this one stay).
kill -0 $pid
# Another secret: refused at once, with the reason.
if out=$(BRAID_JOB_TOKEN=another "$braidrun" -n 2 --port "$port" --timeout 60 "$hello" env 2>&1); then
  echo "a job with another secret ran on this store:"; echo "$out"; exit 1
fi
echo "$out" | grep -q "authentication failed" || { echo "no 'authentication failed' in:"; echo "$out"; exit 1; }
echo "$out" | grep -q "BRAID_JOB_TOKEN" || { echo "no BRAID_JOB_TOKEN in:"; echo "$out"; exit 1; }
kill -0 $pid
