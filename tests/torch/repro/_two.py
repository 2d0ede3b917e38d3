"""Run fn(rank, world_size) in 2 processes with a default group of the given
backend ("braid" unless REPRO_BACKEND says otherwise), over a file store.

    /usr/bin/python3 tests/torch/repro/<script>.py      (BRAID_TORCH_PATH optional)
"""
import os
import sys
import tempfile
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.environ.get("BRAID_TORCH_PATH") or
                os.path.normpath(os.path.join(HERE, "..", "..", "..", "build-cuda", "src", "bindings", "torch")))

import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402

import braid_torch  # noqa: E402,F401


def _child(rank, world, init_file, backend, fn, q):
    try:
        dist.init_process_group(backend, init_method="file://" + init_file, rank=rank, world_size=world)
        fn(rank, world)
        dist.destroy_process_group()
        q.put((rank, "ok", ""))
    except BaseException:  # noqa: B902
        q.put((rank, "error", traceback.format_exc()))


def run(fn, world=2, backend=None, timeout=60):
    backend = backend or os.environ.get("REPRO_BACKEND", "braid")
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    fd, init_file = tempfile.mkstemp()
    os.close(fd)
    os.unlink(init_file)
    ps = [ctx.Process(target=_child, args=(r, world, init_file, backend, fn, q)) for r in range(world)]
    for p in ps:
        p.start()
    out = {}
    try:
        for _ in ps:
            r, status, tb = q.get(timeout=timeout)
            out[r] = (status, tb)
    except Exception:  # noqa: B902
        print(f"[{backend}] TIMEOUT after {timeout}s; got {sorted(out)}")
    for p in ps:
        p.join(5)
        if p.exitcode is None:
            p.kill()
    ok = len(out) == world and all(s == "ok" for s, _ in out.values())
    for r in sorted(out):
        if out[r][0] != "ok":
            print(f"[{backend}] rank {r}:\n{out[r][1]}")
    print(f"[{backend}] {'OK' if ok else 'FAILED'}")
    return ok
