# Sourced by the benchmarks that measure one build (compare_shm.sh,
# compare_tcp.sh, sim_one_host.sh); not run.
#
#   pick_build SCRIPT ARG "CANDIDATES" EXE...
#       The build to measure: ARG if given, else the first of CANDIDATES
#       (build folders under $root) that holds bench/braid-bench. Every EXE
#       (a path in the build) must be there and executable; if one is not,
#       it says which and exits 2. Sets $build to the build's absolute path.
pick_build() {
  local script=$1 candidates=$3 d exe
  build=$2
  shift 3
  if [[ -z $build ]]; then
    for d in $candidates; do [[ -x $root/$d/bench/braid-bench ]] && { build=$root/$d; break; }; done
  fi
  for exe in "$@"; do
    [[ -n $build && -x $build/$exe ]] ||
      { echo "$script: no $exe in '${build:-${candidates// / or }}': build first (meson setup B && ninja -C B)" >&2; exit 2; }
  done
  build=$(cd "$build" && pwd)
}
