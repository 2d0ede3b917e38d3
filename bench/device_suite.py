#!/usr/bin/env python3
"""bench/device_suite.py: the whole meson test suite of a CUDA build, on a
machine that has no meson of the right version (the GPU machine).

`meson introspect --tests` (run here, at pack time, by device_run.sh --pack)
lists every test with its command, environment, working directory, timeout
and whether it may run beside others. This runs that list as `meson test`
would: parallel tests several at a time, the others alone, exit 77 counted as
skipped, a timeout as a failure. It ends with the suite's usual closing line,
"N passed, N failed, N skipped".

    device_suite.py TESTS.json [--jobs N] [--log DIR] [--timeout-multiplier K]
"""
import argparse
import concurrent.futures as cf
import json
import os
import subprocess
import sys
import time


def run_one(t, logdir, mult):
    env = dict(os.environ)
    env.update(t.get("env") or {})
    limit = (t.get("timeout") or 30) * mult
    t0 = time.monotonic()
    try:
        p = subprocess.run(t["cmd"], cwd=t.get("workdir") or None, env=env, timeout=limit,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        rc, out = p.returncode, p.stdout
    except subprocess.TimeoutExpired as e:
        rc, out = "TIMEOUT", e.stdout or b""
    except OSError as e:
        rc, out = "ERROR", str(e).encode()
    dt = time.monotonic() - t0
    verdict = "ok" if rc == 0 else "SKIP" if rc == 77 else "FAIL"
    if logdir:
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in t["name"])
        with open(os.path.join(logdir, safe + ".log"), "wb") as f:
            f.write(out)
    return t["name"], verdict, rc, dt, out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("tests")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--log", default=None)
    ap.add_argument("--timeout-multiplier", type=float, default=1.0)
    a = ap.parse_args()
    tests = json.load(open(a.tests))
    if a.log:
        os.makedirs(a.log, exist_ok=True)
    results = []
    parallel = [t for t in tests if t.get("is_parallel", True)]
    serial = [t for t in tests if not t.get("is_parallel", True)]
    with cf.ThreadPoolExecutor(max_workers=a.jobs) as ex:
        futs = [ex.submit(run_one, t, a.log, a.timeout_multiplier) for t in parallel]
        for f in cf.as_completed(futs):
            r = f.result()
            results.append(r)
            print(f"{r[1]:5} {r[3]:7.1f}s  {r[0]}", flush=True)
    for t in serial:
        r = run_one(t, a.log, a.timeout_multiplier)
        results.append(r)
        print(f"{r[1]:5} {r[3]:7.1f}s  {r[0]}", flush=True)
    for name, verdict, rc, _, out in results:
        if verdict == "FAIL":
            print(f"\n--- {name} (rc {rc}), last lines:")
            print("\n".join(out.decode(errors="replace").splitlines()[-40:]))
    n = {v: sum(1 for r in results if r[1] == v) for v in ("ok", "FAIL", "SKIP")}
    print(f"{n['ok']} passed, {n['FAIL']} failed, {n['SKIP']} skipped")
    return 1 if n["FAIL"] else 0


if __name__ == "__main__":
    sys.exit(main())
