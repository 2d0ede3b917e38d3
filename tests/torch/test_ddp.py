#!/usr/bin/python3
"""DDP over "braid" against DDP over Gloo: examples/ddp_train.py, 2 ranks,
three epochs of a small MLP with DistributedSampler, under several DDP
settings. Each run must end with identical parameters on every rank, and
braid's must match Gloo's within 1e-5.

    test_ddp.py EXAMPLE     exit 77 where torch or braid_torch is missing
"""
import os
import sys
import tempfile

try:
    import torch
    import braid_torch  # noqa: F401
except Exception as e:  # noqa: BLE001
    print(f"skipped: torch or braid_torch cannot be imported by {sys.executable}: {e}")
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ranks import free_ports, launch  # noqa: E402

CONFIGS = [
    ["--hook", "none"],
    ["--hook", "allreduce", "--bucket-cap-mb", "0.005"],
    ["--hook", "fp16", "--accumulate", "2", "--bucket-cap-mb", "0.01"],
]


def run(example, backend, args, out, world=2):
    results = launch([sys.executable, example, "--backend", backend, "--out", out] + args, world,
                     free_ports(1)[0], 300, capture=True)
    codes = [c for c, _ in results]
    outs = [o or "" for _, o in results]
    if any(codes) or "identical on all 2 ranks: True" not in outs[0]:
        print(f"{backend} {args}: exit codes {codes}\n" + "\n".join(outs))
        return None
    return torch.load(out)


def main():
    example = sys.argv[1]
    failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        for args in CONFIGS:
            b = run(example, "braid", args, os.path.join(tmp, "braid.pt"))
            g = run(example, "gloo", args, os.path.join(tmp, "gloo.pt"))
            if b is None or g is None:
                failed += 1
                continue
            diff = (b - g).abs().max().item()
            ok = diff <= 1e-5
            failed += not ok
            print(f"{'ok  ' if ok else 'FAIL'} {' '.join(args)}: {b.numel()} parameters, max |braid - gloo| = {diff:.3g}",
                  flush=True)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
