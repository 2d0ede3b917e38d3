#!/usr/bin/python3
"""Run PyTorch's own distributed test suite (DistributedTest._DistTestBase from
torch/testing/_internal/distributed/distributed_test.py) against the braid
backend, the way torch's test/distributed/test_distributed_spawn.py drives it.

    /usr/bin/python3 tests/torch/dist_suite.py --mode plain   [--filter RE ...]
    /usr/bin/python3 tests/torch/dist_suite.py --mode gloo    [--filter RE ...]
    /usr/bin/python3 tests/torch/dist_suite.py --mode baseline

Modes:
  plain     BACKEND=braid. "braid" is added to DistTestCases.backend_feature
            "plugin", "ddp" and "subgroup", so the plugin-gated tests run;
            tests gated on the names gloo/nccl skip.
  gloo      Braid as Gloo: BACKEND=gloo, and dist.init_process_group is patched
            so every default group it creates is "braid". new_group() with no
            backend follows torch: it takes the default group's backend, which
            is then braid; new_group(backend="gloo") still gets real Gloo. This
            runs the tests written for Gloo on braid. Tests that check the
            backend's *name* (get_backend() == "gloo", isinstance
            ProcessGroupGloo) see "braid" and fail: see SUITE_RESULTS.md.
  baseline  Real Gloo (BACKEND=gloo, no patch): the reference count.

Environment stand-ins applied in this process and in every spawned rank (the
ranks re-import this file as their __main__):
  * a stand-in `expecttest` module (tests/torch/_stubs) - Debian lacks it;
  * torch.nn.parallel._replicated_tensor_ddp_utils._set_ddp_with_replicated_tensor
    is a no-op: torch's _run turns DDP+ReplicatedTensor on, whose import of
    torch.distributed._shard fails on Python 3.11.

braid_torch is found through --braid-torch-path, else BRAID_TORCH_PATH, else
../../build-cuda/src/bindings/torch relative to this file.

Prints one line per test (PASS/FAIL/ERROR/SKIP, seconds, reason) and a summary
with the names of the tests that did not pass; exit status 0 only if none
failed or errored. Each test has a timeout (--timeout, seconds; torch's own
TIMEOUT_OVERRIDE entries are raised to at least it); a watchdog SIGKILLs a
test's ranks if they outlive it by 60 s.
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
MODES = ("plain", "gloo", "baseline")

if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mode", choices=MODES, default="plain")
    ap.add_argument("--filter", "-k", action="append", default=[],
                    help="regular expression searched in test names; repeatable (any matches). "
                         "A comma-separated list is also split.")
    ap.add_argument("--exclude", action="append", default=[], help="regular expression of tests to leave out")
    ap.add_argument("--world-size", type=int, default=int(os.environ.get("WORLD_SIZE", "2")))
    ap.add_argument("--timeout", type=int, default=int(os.environ.get("DISTRIBUTED_TESTS_DEFAULT_TIMEOUT", "180")),
                    help="per-test timeout in seconds (default 180)")
    ap.add_argument("--braid-torch-path", default=os.environ.get("BRAID_TORCH_PATH", ""))
    ap.add_argument("--init-method", default=os.environ.get("INIT_METHOD", "env://"),
                    help="INIT_METHOD for the few tests that read it (default env://)")
    ap.add_argument("--json", default="", help="write per-test results to this JSON file")
    ap.add_argument("--list", action="store_true", help="list the selected tests and exit")
    ap.add_argument("--require-pass", action="store_true",
                    help="a skipped test also counts against the exit status (for a chosen subset)")
    ap.add_argument("-v", "--verbose", action="store_true", help="print the full error of each failure")
    _ARGS = ap.parse_args()
    _path = _ARGS.braid_torch_path or os.path.normpath(os.path.join(HERE, "..", "..", "build-cuda", "src",
                                                                     "bindings", "torch"))
    os.environ["BRAID_TORCH_PATH"] = os.path.abspath(_path)
    os.environ["BRAID_SUITE_MODE"] = _ARGS.mode
    os.environ["BACKEND"] = "braid" if _ARGS.mode == "plain" else "gloo"
    os.environ["WORLD_SIZE"] = str(_ARGS.world_size)
    os.environ["INIT_METHOD"] = _ARGS.init_method
    os.environ["DISTRIBUTED_TESTS_DEFAULT_TIMEOUT"] = str(_ARGS.timeout)
    os.environ.setdefault("TEMP_DIR", "/tmp")  # replaced per test by initialize_temp_directories
    # torch's common_utils parses sys.argv when imported: give it none of ours.
    sys.argv = [sys.argv[0]]

# ---- everything below runs in the driver and in each spawned rank ----------

MODE = os.environ.get("BRAID_SUITE_MODE", "plain")
_stubs = os.path.join(HERE, "_stubs")
for p in (os.environ.get("BRAID_TORCH_PATH", ""), _stubs):
    if p and p not in sys.path:
        sys.path.insert(0, p)
os.environ["PYTHONPATH"] = os.pathsep.join(
    [p for p in (os.environ.get("BRAID_TORCH_PATH", ""), _stubs) if p]
    + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.distributed.distributed_c10d as c10d  # noqa: E402

if MODE != "baseline":
    import braid_torch  # noqa: E402,F401  registers "braid"

import torch.nn.parallel._replicated_tensor_ddp_utils as _rt_utils  # noqa: E402

_rt_utils._set_ddp_with_replicated_tensor = lambda value: None

from torch.testing._internal import common_distributed  # noqa: E402
from torch.testing._internal.common_distributed import DistTestCases  # noqa: E402

if MODE != "baseline":
    for feature in ("plugin", "ddp", "subgroup"):
        DistTestCases.backend_feature[feature].add("braid")

if MODE == "gloo":
    _real_init = c10d.init_process_group

    def _init_as_braid(backend=None, *args, **kwargs):
        if backend is None or str(backend).lower() == "gloo":
            backend = "braid"
        return _real_init(backend, *args, **kwargs)

    c10d.init_process_group = _init_as_braid
    dist.init_process_group = _init_as_braid

# Per-test timeout: torch's overrides are at least ours.
_T = int(os.environ.get("DISTRIBUTED_TESTS_DEFAULT_TIMEOUT", "180"))
common_distributed.TIMEOUT_DEFAULT = _T
for _k in list(common_distributed.TIMEOUT_OVERRIDE):
    common_distributed.TIMEOUT_OVERRIDE[_k] = max(_T, common_distributed.TIMEOUT_OVERRIDE[_k])

import logging  # noqa: E402

# torch's test helpers log every spawn and store barrier at INFO; the ranks'
# exceptions come back to the driver anyway (and are logged at ERROR).
logging.getLogger().setLevel(logging.WARNING)

from torch.testing._internal.distributed.distributed_test import (  # noqa: E402
    DistributedTest,
    TestDistBackend,
)


class TestDistBackendWithSpawn(TestDistBackend, DistributedTest._DistTestBase):
    def setUp(self):
        super().setUp()
        self._spawn_processes()
        torch.backends.cudnn.flags(enabled=True, allow_tf32=False).__enter__()


# ---- the driver -------------------------------------------------------------

def _main(args):
    import json
    import re
    import signal
    import threading
    import time
    import unittest

    loader = unittest.TestLoader()
    names = loader.getTestCaseNames(TestDistBackendWithSpawn)
    pats = [re.compile(p) for f in args.filter for p in f.split(",") if p]
    excl = [re.compile(p) for f in args.exclude for p in f.split(",") if p]
    sel = [n for n in names if (not pats or any(p.search(n) for p in pats)) and not any(p.search(n) for p in excl)]
    if args.list:
        print("\n".join(sel))
        return 0
    suite = unittest.TestSuite(TestDistBackendWithSpawn(n) for n in sel)

    results = {}
    current = {"test": None, "start": 0.0}

    def watchdog():
        while True:
            time.sleep(5)
            t = current["test"]
            if t is None:
                continue
            limit = common_distributed.get_timeout(t.id()) + 60
            if time.time() - current["start"] > limit:
                print(f"WATCHDOG {t.id().split('.')[-1]}: over {limit}s, killing its ranks", flush=True)
                for p in getattr(t, "processes", []):
                    if p.exitcode is None and p.pid:
                        try:
                            os.kill(p.pid, signal.SIGKILL)
                        except OSError:
                            pass
                current["start"] = time.time()

    threading.Thread(target=watchdog, daemon=True).start()

    def short(err_text):
        lines = [l for l in err_text.strip().splitlines() if l.strip()]
        # The innermost exception raised in a rank, if any.
        for l in reversed(lines):
            if re.match(r"^\s*[\w.]*(Error|Exception|Timeout)\b", l) and "Process" not in l[:8]:
                return l.strip()[:300]
        return (lines[-1].strip() if lines else "")[:300]

    class Result(unittest.TestResult):
        def startTest(self, test):
            super().startTest(test)
            current["test"], current["start"] = test, time.time()
            self._t0 = time.time()

        def _record(self, test, status, detail=""):
            name = test.id().split(".")[-1]
            dt = time.time() - self._t0
            results[name] = {"status": status, "seconds": round(dt, 1), "detail": detail}
            line = f"{status:5} {name} ({dt:.1f}s)"
            if detail and status != "PASS":
                line += f": {detail if status == 'SKIP' else short(detail)}"
            print(line, flush=True)
            if args.verbose and status in ("FAIL", "ERROR"):
                print("    " + detail.replace("\n", "\n    "), flush=True)

        def stopTest(self, test):
            super().stopTest(test)
            current["test"] = None

        def addSuccess(self, test):
            super().addSuccess(test)
            self._record(test, "PASS")

        def addFailure(self, test, err):
            super().addFailure(test, err)
            self._record(test, "FAIL", self.failures[-1][1])

        def addError(self, test, err):
            super().addError(test, err)
            self._record(test, "ERROR", self.errors[-1][1])

        def addSkip(self, test, reason):
            super().addSkip(test, reason)
            self._record(test, "SKIP", reason)

        def addExpectedFailure(self, test, err):
            super().addExpectedFailure(test, err)
            self._record(test, "XFAIL")

        def addUnexpectedSuccess(self, test):
            super().addUnexpectedSuccess(test)
            self._record(test, "XPASS")

    def so_stamp():
        import glob
        import hashlib
        sos = glob.glob(os.path.join(os.environ.get("BRAID_TORCH_PATH", ""), "braid_torch", "_C*.so"))
        if not sos:
            return "none"
        with open(sos[0], "rb") as f:
            return f"{os.path.basename(sos[0])} mtime={time.ctime(os.path.getmtime(sos[0]))} " \
                   f"sha1={hashlib.sha1(f.read()).hexdigest()[:12]}"

    stamp0 = so_stamp() if MODE != "baseline" else "n/a"
    print(f"dist_suite: braid_torch._C: {stamp0}", flush=True)
    print(f"dist_suite: mode={MODE} BACKEND={os.environ['BACKEND']} WORLD_SIZE={os.environ['WORLD_SIZE']} "
          f"timeout={_T}s tests={len(sel)} braid_torch={os.environ.get('BRAID_TORCH_PATH')}", flush=True)
    t0 = time.time()
    result = Result()
    suite.run(result)
    wall = time.time() - t0

    if MODE != "baseline" and so_stamp() != stamp0:
        print(f"WARNING: braid_torch._C changed during the run (now {so_stamp()}): "
              "the ranks of later tests loaded another build", flush=True)
    by = {}
    for n, r in results.items():
        by.setdefault(r["status"], []).append(n)
    passed = len(by.get("PASS", [])) + len(by.get("XFAIL", []))
    print()
    print(f"SUMMARY mode={MODE} world_size={os.environ['WORLD_SIZE']} ran={len(results)} passed={passed} "
          f"failed={len(by.get('FAIL', []))} errors={len(by.get('ERROR', []))} skipped={len(by.get('SKIP', []))} "
          f"xpass={len(by.get('XPASS', []))} wall={wall:.0f}s")
    for status in ("FAIL", "ERROR", "XPASS"):
        for n in by.get(status, []):
            print(f"  {status} {n}: {short(results[n]['detail']) if results[n]['detail'] else ''}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"mode": MODE, "world_size": int(os.environ["WORLD_SIZE"]), "wall_s": round(wall),
                       "tests": results}, f, indent=1, sort_keys=True)
    bad = len(by.get("FAIL", [])) + len(by.get("ERROR", [])) + len(by.get("XPASS", []))
    if args.require_pass:
        for n in by.get("SKIP", []):
            print(f"  SKIP {n} (--require-pass: every selected test must pass)")
        bad += len(by.get("SKIP", [])) + (0 if results else 1)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(_main(_ARGS))
