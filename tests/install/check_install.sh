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

# Packaging: a versioned soname; braid.pc keeps fmt, verbs and CUDA private
# and names libraries, not this build's absolute paths, even for --static;
# installed programs find libbraid without LD_LIBRARY_PATH (a relative rpath).
libso=$(find "$root" -name 'libbraid.so' | head -1)
soname=$(readelf -d "$libso" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
echo "soname: $soname"
[[ $soname == libbraid.so.0 ]] || { echo "expected the soname libbraid.so.0, got '$soname'"; exit 1; }
pcfile=$(find "$root" -name braid.pc | head -1)
if grep -E '^(Libs.private|Requires|Requires.private):.*/' "$pcfile"; then echo "braid.pc names an absolute path"; exit 1; fi
grep -q '^Requires: ' "$pcfile" && { echo "braid.pc makes a dependency public (Requires:)"; exit 1; }
static=$(PKG_CONFIG_SYSROOT_DIR= pkg-config --libs --static braid)
echo "pkg-config --libs --static braid: $static"
for tok in $static; do
  case $tok in
    -L/usr/local/lib/*|-L/usr/lib/*) ;;  # braid's own libdir, or a system one
    */*) echo "--static names a path: $tok"; exit 1 ;;
  esac
done
bench=$(find "$root" -type f -name braid-bench | head -1)
env -u LD_LIBRARY_PATH "$bench" --help >/dev/null || { echo "installed braid-bench does not start without LD_LIBRARY_PATH"; exit 1; }
echo "installed braid-bench starts without LD_LIBRARY_PATH (rpath $(readelf -d "$bench" | sed -n 's/.*\(RUNPATH\|RPATH\).*\[\(.*\)\]/\2/p'))"

# The C API from plain C99 with the same flags and nothing else.
cat > "$root/hello_c.c" <<'C'
#include <braid/braid.h>
#include <stdio.h>
int main(void) {
  int x = 21, st;
  if ((st = braid_init(NULL, -1, -1)) != BRAID_OK) { fprintf(stderr, "init: %s\n", braid_error_string()); return 1; }
  if ((st = braid_all_reduce(&x, &x, 1, BRAID_INT32, BRAID_SUM, BRAID_WORLD, NULL)) != BRAID_OK || x != 21) return 2;
  printf("C: rank %d of %d, all_reduce ok\n", braid_rank(), braid_size());
  return braid_finalize() == BRAID_OK ? 0 : 3;
}
C
cc -std=c99 -Wall -Wextra -pedantic -Werror "$root/hello_c.c" -o "$root/hello_c" $flags
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
MASTER_ADDR=127.0.0.1 MASTER_PORT=$port RANK=0 WORLD_SIZE=1 LD_LIBRARY_PATH="$libdir" "$root/hello_c"

# The torch backend, where it was built: the installed package imports with
# nothing but PYTHONPATH (libbraid is linked into it), and a world of one
# runs an all_reduce through it.
pkg=$(find "$root" -type d -name braid_torch -path '*python3/dist-packages*' | head -1)
if [[ -n "$pkg" ]]; then
  echo "braid_torch installed at ${pkg#$root}"
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  PYTHONPATH="$(dirname "$pkg")" MASTER_ADDR=127.0.0.1 MASTER_PORT=$port RANK=0 WORLD_SIZE=1 /usr/bin/python3 -c '
import torch, torch.distributed as dist, braid_torch
dist.init_process_group("braid")
t = torch.ones(3); dist.all_reduce(t)
assert dist.get_backend() == "braid" and t.tolist() == [1.0, 1.0, 1.0]
dist.destroy_process_group()
print("installed braid_torch: all_reduce ok from", braid_torch.__file__)'
fi
