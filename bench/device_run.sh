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
  # test_cuda_probe links libbraid.so (as an application does): carry it too.
  cp -L "$build/libbraid.so"* "$pack/lib/" 2>/dev/null
  # The non-system shared libraries they load (glibc, libstdc++ and libgcc
  # are the machine's own: newer there than here).
  for b in "$pack"/bin/*; do
    ldd "$b" | awk '/=> \// {print $3}'
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
