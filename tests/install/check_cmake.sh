#!/usr/bin/env bash
# Installs Braid into a scratch root and builds a tiny CMake project against
# it with find_package(Braid 0.1 CONFIG REQUIRED): a C++ program on
# Braid::braid, a C program on Braid::braid_c, and (where Braid was built
# with gfortran) a Fortran program on Braid::braid_fortran; each runs as a
# world of one. Then a request for a version this Braid cannot serve must
# fail. Skipped (77) where cmake is not installed.
set -euo pipefail
build="$1"
command -v cmake >/dev/null || { echo "cmake is not installed: this test needs it (apt-get install cmake)"; exit 77; }
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
meson install -C "$build" --destdir "$root" --quiet >/dev/null
cfg=$(find "$root" -name BraidConfig.cmake | head -1)
[[ -n "$cfg" ]] || { echo "no BraidConfig.cmake was installed"; exit 1; }
echo "installed: ${cfg#$root}"
fortran=0
find "$root" -name 'libbraid_fortran.so*' | grep -q . && fortran=1

src="$root/consumer"
mkdir -p "$src"
cat > "$src/CMakeLists.txt" <<CMAKE
cmake_minimum_required(VERSION 3.16)
project(consumer LANGUAGES C CXX)
find_package(Braid 0.1 CONFIG REQUIRED)
message(STATUS "Braid \${Braid_VERSION}, Fortran: \${Braid_Fortran_FOUND}")
add_executable(hello_cpp hello.cpp)
target_link_libraries(hello_cpp PRIVATE Braid::braid)
add_executable(hello_c hello.c)
target_link_libraries(hello_c PRIVATE Braid::braid_c)
set_property(TARGET hello_c PROPERTY C_STANDARD 99)
if($fortran)
  enable_language(Fortran)
  add_executable(hello_f hello.f90)
  target_link_libraries(hello_f PRIVATE Braid::braid_fortran)
endif()
CMAKE
cat > "$src/hello.cpp" <<'CPP'
#include <braid/braid.hpp>
#include <cstdio>
int main() {
  braid::init_process_group();
  int x = 5;
  braid::all_reduce(braid::tensor(&x, 1));
  std::printf("C++ through Braid::braid: all_reduce gave %d\n", x);
  braid::destroy_process_group();
  return x == 5 ? 0 : 1;
}
CPP
cat > "$src/hello.c" <<'C'
#include <braid/braid.h>
#include <stdio.h>
int main(void) {
  int x = 6;
  if (braid_init(NULL, -1, -1) != BRAID_OK) return 1;
  if (braid_all_reduce(&x, &x, 1, BRAID_INT32, BRAID_SUM, BRAID_WORLD, NULL) != BRAID_OK) return 2;
  printf("C through Braid::braid_c: all_reduce gave %d\n", x);
  return braid_finalize() == BRAID_OK && x == 6 ? 0 : 3;
}
C
cat > "$src/hello.f90" <<'F'
program hello
  use braid
  implicit none
  integer :: x(1)
  x = 7
  call braid_init()
  call braid_all_reduce(x, x, BRAID_SUM)
  print '(a, i0)', "Fortran through Braid::braid_fortran: all_reduce gave ", x(1)
  call braid_finalize()
  if (x(1) /= 7) error stop 1
end program hello
F
cmake -S "$src" -B "$root/b" -DBraid_DIR="$(dirname "$cfg")" >"$root/cmake.log" 2>&1 || { cat "$root/cmake.log"; exit 1; }
grep "Braid " "$root/cmake.log"
cmake --build "$root/b" >"$root/build.log" 2>&1 || { cat "$root/build.log"; exit 1; }
libdir=$(dirname "$(find "$root" -name 'libbraid.so' | head -1)")
progs=(hello_cpp hello_c)
[[ $fortran == 1 ]] && progs+=(hello_f)
for p in "${progs[@]}"; do
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  MASTER_ADDR=127.0.0.1 MASTER_PORT=$port RANK=0 WORLD_SIZE=1 LD_LIBRARY_PATH="$libdir" "$root/b/$p"
done

# The version file: 0.2 (and 1.0) must not be served by 0.1.x.
for want in 0.2 1.0; do
  mkdir -p "$root/v$want"
  printf 'cmake_minimum_required(VERSION 3.16)\nproject(v LANGUAGES NONE)\nfind_package(Braid %s CONFIG REQUIRED)\n' \
    "$want" > "$root/v$want/CMakeLists.txt"
  if cmake -S "$root/v$want" -B "$root/v$want/b" -DBraid_DIR="$(dirname "$cfg")" >/dev/null 2>&1; then
    echo "find_package(Braid $want) accepted Braid $(grep -o '"[0-9.]*"' "$(dirname "$cfg")/BraidConfigVersion.cmake" | head -1)"
    exit 1
  fi
done
echo "find_package(Braid 0.2) and (Braid 1.0) refused, as they must be"
