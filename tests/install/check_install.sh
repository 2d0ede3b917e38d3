#!/usr/bin/env bash
# Installs Braid into a scratch root and builds + runs a program with nothing
# but `pkg-config --cflags --libs braid`, as a user would after meson install.
set -euo pipefail
build="$1"; src="$2"
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
meson install -C "$build" --destdir "$root" --quiet >/dev/null
pc=$(dirname "$(find "$root" -name braid.pc | head -1)")
[[ -n "$pc" ]] || { echo "no braid.pc was installed"; exit 1; }
export PKG_CONFIG_PATH="$pc" PKG_CONFIG_SYSROOT_DIR="$root"
flags=$(pkg-config --cflags --libs braid)
echo "pkg-config --cflags --libs braid: $flags"
g++ -std=c++20 "$src" -o "$root/hello" $flags
libdir=$(dirname "$(find "$root" -name 'libbraid.so' | head -1)")
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
MASTER_ADDR=127.0.0.1 MASTER_PORT=$port RANK=0 WORLD_SIZE=1 LD_LIBRARY_PATH="$libdir" "$root/hello" env
