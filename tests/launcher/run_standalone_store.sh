#!/usr/bin/env bash
# A standalone braid-store serves a job: rank 0 finds the port taken and uses it.
set -euo pipefail
store="$1"; braidrun="$2"; hello="$3"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$store" --port "$port" &
pid=$!
trap 'kill $pid 2>/dev/null || true' EXIT
sleep 0.3
"$braidrun" -n 3 --port "$port" --timeout 60 "$hello" env
# The job is over and the store still serves (later jobs on it need their
# own group_name: keys of this one stay).
kill -0 $pid
