"""A barrier only rank 0 enters, on a group made with timeout=1s, must raise
within about 1 s with a message matching torch's " (Timed out|closed|timeout) "
(test_barrier_timeout_full_group; Gloo says "... Timed out waiting 1000ms ...")."""
import re
import time
from datetime import timedelta

import torch.distributed as dist

from _two import run


def body(rank, world):
    g = dist.new_group(timeout=timedelta(seconds=1))
    if rank == 0:
        t0 = time.time()
        try:
            dist.barrier(g)
        except Exception as e:  # noqa: B902
            dt = time.time() - t0
            msg = str(e)
            print(f"rank 0: raised after {dt:.2f}s: {type(e).__name__}: {msg[:300]!r}")
            assert re.search(" (Timed out|closed|timeout) ", msg), "message does not match torch's regex"
            assert dt >= 0.9, dt
            return
        raise AssertionError("barrier did not raise")
    time.sleep(3)


if __name__ == "__main__":
    import sys
    sys.exit(0 if run(body) else 1)
