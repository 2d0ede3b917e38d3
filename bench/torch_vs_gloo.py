#!/usr/bin/python3
"""Braid against Gloo through torch.distributed, side by side in one run.

For each world size, jobs alternate between the backends (braid, gloo, braid,
gloo, ...: --rounds of each), each timing all_reduce, all_gather (the list
form, which Gloo has) and broadcast of float32 from 8 B to 64 MiB the way torch users time:
warm-up calls, then many calls in a loop under time.perf_counter, a barrier
before each loop, OMP_NUM_THREADS=1 as torchrun sets it; the figure is the slowest rank's mean time per call, and
the table shows the median over rounds. Then the plugin's own cost: braid's
dist.all_reduce of 8 B against braid-bench's time for the same call (in place,
as torch's) on the same ranks, at 2 ranks and in a world of 1, and a DDP step
of examples/ddp_train.py on each backend, 2 ranks (--plugin-only: just these).
--shareable adds a third contender, braid with BRAID_TORCH_SHAREABLE=1 (its
tensors of 1 MiB and more in memory the ranks map: braid_torch's
use_shareable_memory), and its speed-up over Gloo.
Before and after each job it prints the host's phase, as the build's
bench/line-exchange reads it (a cache line between CPUs 0 and 1 and back:
about 0.05 us in this machine kind's usual phase, 0.2 in the slow one that
slows relays through cache threefold, bench/RESULTS.md section 33).

    PYTHONPATH=build/src/bindings/torch /usr/bin/python3 bench/torch_vs_gloo.py --build build
"""
import argparse
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import time

SIZES = [8, 64, 1024, 16384, 65536, 1 << 20, 16 << 20, 64 << 20]
OPS = ["all_reduce", "all_gather", "broadcast"]


def fmt_size(b):
    for unit, k in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= k:
            return f"{b // k} {unit}"
    return f"{b} B"


def worker(backend, sizes, budget, ops=OPS):
    import torch
    import torch.distributed as dist
    if backend.startswith("braid"):
        import braid_torch  # noqa: F401  (BRAID_TORCH_SHAREABLE=1 for braid+shareable: job())
        backend = "braid"
    dist.init_process_group(backend, init_method="env://")
    rank, world = dist.get_rank(), dist.get_world_size()
    out = {}
    for op in ops:
        for size in sizes:
            n = max(1, size // 4)
            t = torch.ones(n)
            outs = [torch.empty(n) for _ in range(world)]  # the list form: Gloo has no _allgather_base

            def call():
                if op == "all_reduce":
                    dist.all_reduce(t)
                elif op == "all_gather":
                    dist.all_gather(outs, t)
                else:
                    dist.broadcast(t, 0)
            # Warm-up: small sizes get more calls, so the first one timed (8 B,
            # the plugin's cost below) finds the ranks past their start-up.
            for _ in range(200 if size <= 65536 else 3):
                call()
            # Calls per loop from a trial, the same on every rank (max).
            dist.barrier()
            t0 = time.perf_counter()
            call()
            trial = torch.tensor([time.perf_counter() - t0], dtype=torch.float64)
            dist.all_reduce(trial, op=dist.ReduceOp.MAX)
            iters = int(min(2000, max(5, budget / max(trial.item(), 1e-6))))
            dist.barrier()
            t0 = time.perf_counter()
            for _ in range(iters):
                call()
            per = torch.tensor([(time.perf_counter() - t0) / iters], dtype=torch.float64)
            dist.all_reduce(per, op=dist.ReduceOp.MAX)
            out[f"{op} {size}"] = per.item()
    if rank == 0:
        print("RESULT " + json.dumps(out), flush=True)
    dist.destroy_process_group()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def job(world, argv, env_extra=None):
    port = free_port()
    procs = []
    for r in range(world):
        # OMP_NUM_THREADS=1, as torchrun sets it for several ranks per host:
        # torch's OpenMP workers otherwise spin on the CPUs the communication
        # needs (all_reduce of 16 MiB through braid: 9-15 ms with them, 2.3-2.7
        # ms without; braid-bench 2.3-3.2 ms).
        env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(r),
                   WORLD_SIZE=str(world), OMP_NUM_THREADS="1", **(env_extra or {}))
        procs.append(subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    outs = [p.communicate(timeout=900)[0] for p in procs]
    if any(p.returncode for p in procs):
        raise SystemExit(f"job {argv} failed:\n" + "\n".join(outs))
    return outs[0]


def phase(build):
    """us per round of bench/line-exchange, or None where the build has none."""
    probe = os.path.join(build, "bench", "line-exchange")
    if not os.access(probe, os.X_OK):
        return None
    m = re.search(r"([0-9.]+) us per round", subprocess.run([probe], capture_output=True, text=True).stdout)
    return float(m.group(1)) if m else None


def result_of(out):
    """A worker job's figures (rank 0 prints them)."""
    return json.loads(out.split("RESULT ", 1)[1].splitlines()[0])


def plugin_cost(label, torch_us, bench_out):
    """dist.all_reduce(8 B) minus braid-bench's in-place time for it (torch's is in place)."""
    m = re.search(r"^\s*8\s+\d+\s+\w+\s+\w+\s+-?\d+(?:\s+\S+){4}\s+([0-9.]+)", bench_out, re.M)
    if m:
        print(f"plugin cost, {label}: dist.all_reduce 8 B {torch_us:.2f} us - braid-bench in place "
              f"{float(m.group(1)):.2f} us = {torch_us - float(m.group(1)):.2f} us", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--worker", default=None)
    ap.add_argument("--build", default="build")
    ap.add_argument("--worlds", default="2,4")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--budget", type=float, default=0.25, help="seconds of timed calls per size")
    ap.add_argument("--plugin-only", action="store_true", help="only the plugin's cost and the DDP step")
    ap.add_argument("--sizes", default=None, help="a worker's sizes (bytes, comma-separated): all_reduce only")
    ap.add_argument("--shareable", action="store_true", help="also braid with BRAID_TORCH_SHAREABLE=1")
    a = ap.parse_args()
    if a.worker:
        if a.sizes:
            worker(a.worker, [int(x) for x in a.sizes.split(",")], a.budget, ["all_reduce"])
        else:
            worker(a.worker, SIZES, a.budget)
        return
    me = os.path.abspath(__file__)
    print(f"# {time.strftime('%Y-%m-%d %H:%M')} torch_vs_gloo.py --worlds {a.worlds} --rounds {a.rounds}", flush=True)
    worlds = [] if a.plugin_only else [int(w) for w in a.worlds.split(",")]
    for world in worlds:
        backends = ["braid", "gloo"] + (["braid+shareable"] if a.shareable else [])
        res = {b: [] for b in backends}
        for rnd in range(a.rounds):
            for backend in backends:
                extra = {"BRAID_TORCH_SHAREABLE": "1" if backend == "braid+shareable" else "0"}
                before = phase(a.build)
                out = job(world, [sys.executable, me, "--worker", backend, "--budget", str(a.budget)], extra)
                res[backend].append(result_of(out))
                if before is not None:
                    print(f"# {world} ranks, round {rnd + 1}, {backend}: line exchange {before:.3f} us before the job, "
                          f"{phase(a.build):.3f} after", flush=True)
        print(f"\n## {world} ranks: median of {a.rounds} rounds, time per call (us); speed-up = gloo / braid")
        more = " braid+shareable | speed-up |" if a.shareable else ""
        print(f"| op | size | braid | gloo | speed-up |{more}\n|---|---|---|---|---|{'---|---|' if a.shareable else ''}")
        for op in OPS:
            for size in SIZES:
                k = f"{op} {size}"
                b = statistics.median(r[k] for r in res["braid"]) * 1e6
                g = statistics.median(r[k] for r in res["gloo"]) * 1e6
                row = f"| {op} | {fmt_size(size)} | {b:.1f} | {g:.1f} | {g / b:.1f}x |"
                if a.shareable:
                    s = statistics.median(r[k] for r in res["braid+shareable"]) * 1e6
                    row += f" {s:.1f} | {g / s:.1f}x |"
                print(row, flush=True)
        # The rounds behind the medians from 16 MiB, in order: with the
        # phase lines above they show which rounds ran in the slow phase.
        print(f"\nper round from 16 MiB, ms ({', '.join(backends)}):")
        for op in OPS:
            for size in (s for s in SIZES if s >= 16 << 20):
                k = f"{op} {size}"
                cells = "; ".join(" / ".join(f"{r[k] * 1e3:.2f}" for r in res[b]) for b in backends)
                print(f"  {op} {fmt_size(size)}: {cells}")
        if world == 2:
            b16 = statistics.median(r[f"all_reduce {16 << 20}"] for r in res["braid"])
            g16 = statistics.median(r[f"all_reduce {16 << 20}"] for r in res["gloo"])
            busbw = lambda t: 2 * (world - 1) / world * (16 << 20) / t / 1e9  # noqa: E731
            print(f"\nall_reduce 16 MiB busbw: braid {busbw(b16):.2f} GB/s, gloo {busbw(g16):.2f} GB/s")
    if 2 in worlds or a.plugin_only:
        plugin_and_ddp(a, me)


def plugin_and_ddp(a, me):
    """The plugin's own cost at 2 ranks and in a world of 1, then a DDP step on each backend."""
    bb = os.path.join(a.build, "bench", "braid-bench")
    for world, label in ((2, "2 ranks"), (1, "1 rank")):
        # A world of 1 has no peer whose scheduling enters the figures: the
        # plugin's cost alone (torch's Python and dispatch included).
        ts = [result_of(job(world, [sys.executable, me, "--worker", "braid", "--budget", str(a.budget),
                                    "--sizes", "8"]))["all_reduce 8"]
              for _ in range(a.rounds)]
        out = job(world, [bb, "allreduce", "-b", "8", "-e", "8", "-n", "20000", "-w", "2000"])
        print(f"\nbraid-bench all_reduce 8 B, {label}:\n{out.strip()}")
        plugin_cost(label, statistics.median(ts) * 1e6, out)
    ex = os.path.join(os.path.dirname(me), "..", "examples", "ddp_train.py")
    for backend in ("braid", "gloo", "braid", "gloo"):
        out = job(2, [sys.executable, ex, "--backend", backend, "--bench", "--epochs", "4", "--width", "256"])
        print("DDP step, " + [ln for ln in out.splitlines() if "median step" in ln][0], flush=True)


if __name__ == "__main__":
    main()
