#!/usr/bin/env python3
"""Every code example in README.md is compiled and run, as a reader would.

    check_readme.py SOURCE_ROOT BUILD_ROOT FORTRAN(0|1) TORCH(0|1)

Each fenced block is matched to an entry below by a phrase it contains. A
block with no entry fails the test: a new example must say here how it runs.
C++ and C blocks are built against this build's libbraid (fragments get the
declarations they assume and a main around them); Fortran against its
module; Python (the torch backend) with /usr/bin/python3; each program runs
under braidrun at the rank counts listed. CMake blocks must name only the
targets BraidConfig.cmake defines (tests/install/check_cmake.sh builds such a
project); shell blocks are the README's own commands (what CI runs) and
diagrams are not code.
"""
import os
import re
import subprocess
import sys
import tempfile

src, build, have_fortran, have_torch = sys.argv[1], sys.argv[2], sys.argv[3] == "1", sys.argv[4] == "1"

# What a fragment assumes exists, and the main around it.
FRAGMENT_MAIN = """#include <braid/braid.hpp>
#include <cstdlib>
#include <string>
#include <vector>
{decls}
int main() {{
  braid::init_process_group();
  const int rank = braid::get_rank(), size = braid::get_world_size();
  (void)rank; (void)size;
  {{
{body}
  }}
  braid::destroy_process_group();
  return 0;
}}
"""

EXAMPLES = [
    # (language, phrase in the block, how: 'program' | 'fragment' | 'check' | 'skip', ranks, declarations)
    ("cpp", "int me = braid::get_rank(), n = braid::get_world_size();", "program", [1, 2, 3], ""),
    ("cpp", "braid::DistributedSampler sampler(dataset_size", "fragment", [2, 3], """
const std::int64_t dataset_size = 40, epochs = 2;
std::vector<float> w1(1000, 1.0f), w2(300, 2.0f);
std::vector<float> loss(1, 0.5f);  // the example reduces vectors (braid::tensor(vec))
std::vector<std::int64_t> counts(4, 1);
std::vector<braid::Tensor> gradient_views() { return {braid::tensor(w1), braid::tensor(w2)}; }
void forward(std::int64_t) {}
void compute_gradient(std::size_t) {}
void step() {}
"""),
    ("cpp", "braid::Communicator experts(store, rank, size", "fragment", [2, 3], """
// The rendezvous point of the communicator's store: next to the launcher's.
const std::string host = "127.0.0.1";
const int port = std::atoi(std::getenv("MASTER_PORT")) + 1;
std::vector<float> v(1000, 1.0f);
"""),
    ("cpp", "group = braid::shrink_group({.group = &group});", "fragment", [1, 2, 3], ""),
    ("cpp", "braid::mem_alloc(n * sizeof(float))", "fragment", [1, 2], """
const std::size_t n = 1 << 16;
"""),
    ("c", "#include <braid/braid.h>", "program", [1, 2, 4], ""),
    ("fortran", "use braid", "program", [1, 2, 4], ""),
    ("python", "import braid_torch", "python", [1], ""),
    ("cmake", "find_package(Braid", "check", [], ""),
    ("sh", "tools/quickstart bench", "skip", [], ""),
    ("", "the public C++ API", "skip", [], ""),  # the layer diagram
]


def blocks(text):
    for m in re.finditer(r"^```([a-z]*)\n(.*?)^```", text, re.S | re.M):
        yield text[: m.start()].count("\n") + 1, m.group(1), m.group(2)


def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({r.returncode}):\n{r.stdout}{r.stderr}")
    return r


def fortran_module_dir():
    for root, _, files in os.walk(os.path.join(build, "src", "bindings", "fortran")):
        if "braid.mod" in files:
            return root
    raise RuntimeError("braid.mod is not in the build tree")


def main():
    readme = open(os.path.join(src, "README.md")).read()
    braidrun = os.path.join(build, "tools", "braidrun")
    inc = ["-I" + os.path.join(src, "include"), "-I" + os.path.join(build, "include")]
    # The build tree has the versioned library only (libbraid.so is made at install).
    link = ["-L" + build, "-l:libbraid.so.0", "-Wl,-rpath," + os.path.abspath(build)]
    failures, checked = [], 0
    with tempfile.TemporaryDirectory() as tmp:
        for line, lang, body in blocks(readme):
            entry = next((e for e in EXAMPLES if e[0] == lang and e[1] in body), None)
            where = f"README.md:{line} ({lang or 'plain'})"
            if entry is None:
                failures.append(f"{where}: no entry in tests/readme/check_readme.py says how to check it")
                continue
            _, _, how, ranks, decls = entry
            try:
                exe = os.path.join(tmp, f"ex{line}")
                if how == "skip":
                    print(f"{where}: not code that runs (commands CI runs itself, or a diagram)")
                    continue
                if how == "check":
                    config = open(os.path.join(src, "tools", "cmake", "BraidConfig.cmake.in")).read()
                    for target in set(re.findall(r"Braid::\w+", body)):
                        if f"add_library({target} " not in config:
                            raise RuntimeError(f"{target} is not a target BraidConfig.cmake defines")
                    print(f"{where}: every target it names is defined")
                    checked += 1
                    continue
                if lang == "cpp":
                    code = body if how == "program" else FRAGMENT_MAIN.format(decls=decls, body=body)
                    open(exe + ".cpp", "w").write(code)
                    run(["g++", "-std=c++20", "-Wall", "-Werror", "-Wno-unused-variable", *inc, exe + ".cpp",
                         "-o", exe, *link])
                elif lang == "c":
                    open(exe + ".c", "w").write(body)
                    run(["cc", "-std=c99", "-Wall", "-pedantic", "-Werror", *inc, exe + ".c", "-o", exe, *link])
                elif lang == "fortran":
                    if not have_fortran:
                        print(f"{where}: not run: this build has no Fortran module (gfortran not found)")
                        continue
                    fdir = os.path.join(build, "src", "bindings", "fortran")
                    open(exe + ".f90", "w").write(body)
                    run(["gfortran", "-I" + fortran_module_dir(), exe + ".f90", "-o", exe, "-L" + fdir,
                         "-l:libbraid_fortran.so.0", *link, "-Wl,-rpath," + os.path.abspath(fdir)])
                elif lang == "python":
                    if not have_torch:
                        print(f"{where}: not run: this build has no torch backend")
                        continue
                    code = "import torch\nmodel = torch.nn.Linear(4, 2)\n" + body + \
                           "\nimport torch.distributed as dist\nt = torch.ones(3)\ndist.all_reduce(t)\n" \
                           "assert t.tolist() == [1.0, 1.0, 1.0]\ndist.destroy_process_group()\n"
                    open(exe + ".py", "w").write(code)
                    env = dict(os.environ, PYTHONPATH=os.path.join(build, "src", "bindings", "torch"),
                               OMP_NUM_THREADS="1")
                    run([braidrun, "-n", "1", "--timeout", "120", "/usr/bin/python3", exe + ".py"], env=env)
                    print(f"{where}: ran at 1 rank")
                    checked += 1
                    continue
                for n in ranks:
                    run([braidrun, "-n", str(n), "--timeout", "60", exe])
                print(f"{where}: built and ran at {', '.join(map(str, ranks))} ranks")
                checked += 1
            except RuntimeError as e:
                failures.append(f"{where}: {e}")
    for f in failures:
        print("FAILED", f)
    print(f"{checked} README examples checked, {len(failures)} failed")
    return 1 if failures else 0


sys.exit(main())
