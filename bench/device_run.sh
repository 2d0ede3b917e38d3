#!/usr/bin/env bash
# bench/device_run.sh: everything issue #6 wants from the GPU machine, in one
# call: the GPU tests, the reduction kernels' bandwidth against a D2D copy,
# and all_reduce of 256 MiB between 2 ranks sharing the GPU against its floor.
#
# The device machine has nvcc, meson and ninja but no fmt, no Catch2 and no
# network, so the binaries are built HERE and carried, with the shared
# libraries they need that it may lack (libfmt, libibverbs, libnl); libbraid
# itself is linked in statically (and carries the CUDA runtime), so the
# machine needs nothing but its NVIDIA driver.
#
# 1. Here (no GPU needed), build and pack:
#      cd /work/main
#      nice ninja -C build-cuda -j1 tests/cuda/test_cuda_ops tests/cuda/test_cuda_kernels \
#          tests/cuda/test_cuda_host tests/cuda/test_cuda_probe tests/cuda/time-cuda-all-reduce \
#          bench/cuda-reduce-bench
#      bench/device_run.sh --pack          # -> .devrun/ (bin/ + lib/), ~10 MB
#    (.devrun/ is kept out of git: --pack adds it to .git/info/exclude.)
# 2. Through the device tool's `run` (one call, well inside its 10 minutes):
#      run(command = "bash bench/device_run.sh", carry = [".devrun"], timeout_s = 600)
#    Everything it prints also lands in $OUT/device_run.log (fetched with the
#    reply); the summary table comes last.
#
# Options (step 2): --quick (BRAID_CUDA_OPS_QUICK=1) runs test_cuda_ops at 1
# and 2 ranks only, its largest cases at 16 MiB rather than 256, when time is short.
#
# The whole test suite of the CUDA build, as a second call:
#      run(command = "bash bench/device_run.sh --suite", carry = [".devrun"], timeout_s = 600)
# SUITE_ONLY="name ..." runs only those tests, started in that order (the rest of a call that ran
# out of time). --pack also stages every test program of the build (stripped) under
# .devrun/suite with `meson introspect --tests`; the device machine's meson is
# another version than the one that configured the build, so
# bench/device_suite.py runs that list as `meson test` would. Left out there:
# the tests that need this machine's toolchain or a VM (install-pkgconfig,
# install-cmake, readme-examples, verbs-vm, verbs-vm-two-devices), which say
# nothing about the GPU.
set -uo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
pack="$here/.devrun"

if [[ "${1:-}" == "--pack" ]]; then
  build="${BUILD:-$here/build-cuda}"
  rm -rf "$pack" && mkdir -p "$pack/bin" "$pack/lib" || exit 1
  bins=(tests/cuda/test_cuda_ops tests/cuda/test_cuda_kernels tests/cuda/test_cuda_host
        tests/cuda/test_cuda_probe tests/cuda/time-cuda-all-reduce bench/cuda-reduce-bench)
  for b in "${bins[@]}"; do
    [[ -x "$build/$b" ]] || { echo "missing $build/$b: build it first (see the header)"; exit 1; }
    cp "$build/$b" "$pack/bin/"
  done
  # The suite: every test program and what its commands name, stripped, at
  # the same paths under suite/ as under the build folder.
  meson introspect "$build" --tests > "$pack/tests.json" || exit 1
  python3 - "$build" "$pack/tests.json" > "$pack/suite_files" <<'PY'
import json, os, sys
build = os.path.realpath(sys.argv[1])
seen = set()
for t in json.load(open(sys.argv[2])):
    for a in t["cmd"]:
        if a.startswith(build + "/") and os.path.isfile(a) and a not in seen:
            seen.add(a); print(os.path.relpath(a, build))
PY
  # Tests also run programs and load libraries their commands do not name
  # (braid-info, braid-sim, braid-bench, chaos_rank, libbraid_fortran.so):
  # take every program and shared library of the build, links as links.
  (cd "$build" && find . \( -name '*.p' -o -name 'meson-*' -o -name '*.dir' \) -prune -o \
      \( -type f \( -perm -u+x -o -name '*.so*' \) -o -type l -name '*.so*' \) -print |
      grep -v -e '\.sh$' -e 'mpi-bench-' -e 'braid_torch' | sed 's|^\./||') >> "$pack/suite_files"
  for f in $(sort -u "$pack/suite_files"); do
    mkdir -p "$pack/suite/$(dirname "$f")"
    cp -P "$build/$f" "$pack/suite/$f" && [[ ! -L "$build/$f" ]] && strip -s "$pack/suite/$f" 2>/dev/null
  done
  echo "$(realpath "$build")" > "$pack/build_path"
  # Static test programs compress about tenfold: the carry limit is 64 MiB.
  tar -C "$pack" -cJf "$pack/suite.tar.xz" suite && rm -rf "$pack/suite"
  # test_cuda_probe links libbraid.so (as an application does): carry it too.
  cp -L "$build/libbraid.so"* "$pack/lib/" 2>/dev/null
  # The non-system shared libraries they load (glibc, libstdc++ and libgcc
  # are the machine's own: newer there than here).
  for b in "$pack"/bin/* $(sed "s|^|$build/|" "$pack/suite_files"); do
    ldd "$b" 2>/dev/null | awk '/=> \// {print $3}'
  done | sort -u | grep -Ev '/(libc|libm|libstdc\+\+|libgcc_s|ld-linux[^/]*|libpthread|libdl|librt)\.so' |
    while read -r lib; do cp -L "$lib" "$pack/lib/"; done
  grep -qx '/.devrun/' "$here/.git/info/exclude" 2>/dev/null || echo '/.devrun/' >> "$here/.git/info/exclude"
  du -sh "$pack"; ls "$pack/bin" "$pack/lib"
  exit 0
fi

[[ -d "$pack/bin" ]] || { echo "no $pack: run 'bench/device_run.sh --pack' here first and carry .devrun"; exit 1; }
out="${OUT:-/tmp/device_run_out}"
mkdir -p "$out"
log="$out/device_run.log"
exec > >(tee "$log") 2>&1

export LD_LIBRARY_PATH="$pack/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

if [[ "${1:-}" == "--suite" ]]; then
  # The tests' commands name the build folder and the sources by the paths
  # they had where they were built: recreate those here.
  build=$(cat "$pack/build_path")
  src=$(dirname "$build")
  if [[ "$(realpath "$src" 2>/dev/null)" != "$here" ]]; then
    mkdir -p "$(dirname "$src")" && rm -rf "$src" && ln -s "$here" "$src"
  fi
  rm -rf "$here/$(basename "$build")" /tmp/suite && tar -C /tmp -xJf "$pack/suite.tar.xz" &&
    mv /tmp/suite "$here/$(basename "$build")" || exit 1
  cp -L "$pack"/lib/libbraid.so* "$here/$(basename "$build")/" 2>/dev/null
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 - "$pack/tests.json" > "$out/tests.json" <<'PY'
import json, sys
import os
skip = {"install-pkgconfig", "install-cmake", "readme-examples", "verbs-vm", "verbs-vm-two-devices"}
only = os.environ.get("SUITE_ONLY", "").split()  # a rerun of the tests a cut-short call missed,
tests = [t for t in json.load(open(sys.argv[1]))   # started in the order it names them
         if t["name"] not in skip and (not only or t["name"] in only)]
if only:
    tests.sort(key=lambda t: only.index(t["name"]))
print(json.dumps(tests))
PY
  python3 "$here/bench/device_suite.py" "$out/tests.json" --jobs 8 --log /tmp/suite_logs
  rc=$?
  tar -C /tmp -czf "$out/suite_logs.tar.gz" suite_logs  # one file: few come back
  exit $rc
fi
[[ "${1:-}" == "--quick" ]] && export BRAID_CUDA_OPS_QUICK=1
bin="$pack/bin"
summary=()
step() {  # step NAME TIMEOUT_S CMD...: runs, times, records the outcome
  local name=$1 limit=$2; shift 2
  echo; echo "=== $name: $*"
  local t0=$SECONDS
  timeout "$limit" "$@"
  local rc=$?
  local verdict=FAIL
  case $rc in 0) verdict=ok ;; 77) verdict=skipped ;; 124) verdict=TIMEOUT ;; esac
  summary+=("$(printf '%-34s %-8s %4ds' "$name" "$verdict" $((SECONDS - t0)))")
}

echo "=== machine"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv 2>&1 | head -3
uname -r

step "probe (libbraid.so loads)"   30  "$bin/test_cuda_probe"
step "host side (Catch2)"          60  "$bin/test_cuda_host"
step "kernels vs CPU, bit for bit" 120 "$bin/test_cuda_kernels"
step "ops on device tensors"       420 "$bin/test_cuda_ops"
step "reduce kernels vs D2D copy"  90  "$bin/cuda-reduce-bench" --mib 256
T="$bin/time-cuda-all-reduce"
step "all_reduce 256 MiB, 2 ranks"  120 "$T" --mib 256 --ranks 2 --iters 20 --breakdown
step "  same, bfloat16"             120 "$T" --mib 256 --ranks 2 --iters 20 --dtype bfloat16
step "  same, in place"             120 "$T" --mib 256 --ranks 2 --iters 20 --inplace
step "  same, in place, refilled"   120 "$T" --mib 256 --ranks 2 --iters 20 --inplace --refill
step "  same, algo twoshot"         120 "$T" --mib 256 --ranks 2 --iters 20 --algo twoshot
step "  same, algo ring (staged)"   120 "$T" --mib 256 --ranks 2 --iters 5 --algo ring
step "all_reduce 256 MiB, 4 ranks"  120 "$T" --mib 256 --ranks 4 --iters 20
step "all_reduce 1 MiB, 2 ranks"    120 "$T" --mib 1 --ranks 2 --iters 50
step "  same, bfloat16"             120 "$T" --mib 1 --ranks 2 --iters 50 --dtype bfloat16

echo; echo "=== summary"
printf '%s\n' "${summary[@]}"
grep -E '^(kernel +dtype|cudaMemcpyAsync D2D|reduce3 sum \(16-byte|ratio to floor|all_reduce .* median|breakdown)' "$log" | tail -30
