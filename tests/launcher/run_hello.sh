#!/usr/bin/env bash
# braidrun -n 4 running a program that uses each init method.
set -euo pipefail
braidrun="$1"; hello="$2"
for method in env tcp file; do
  echo "== braidrun -n 4 hello $method"
  "$braidrun" -n 4 --timeout 60 "$hello" "$method"
done
