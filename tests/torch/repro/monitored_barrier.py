"""monitored_barrier on a braid default group (test_monitored_barrier_gloo*,
run in the as-Gloo mode). Two layers refuse it: torch 1.13's Python
dist.monitored_barrier raises unless get_backend(group) == "gloo"
(distributed_c10d.py), and ProcessGroupBraid does not override
ProcessGroup::monitoredBarrier, so calling it on the group directly raises
c10d's "ProcessGroup braid does not support monitoredBarrier"."""
from datetime import timedelta

import torch.distributed as dist
import torch.distributed.distributed_c10d as c10d

from _two import run


def body(rank, world):
    errors = []
    for call in (lambda: dist.monitored_barrier(timeout=timedelta(seconds=5)),
                 lambda: c10d._get_default_group().monitored_barrier(timedelta(seconds=5))):
        try:
            call()
        except RuntimeError as e:  # noqa: PERF203
            errors.append(str(e).splitlines()[0])
    if errors:
        raise AssertionError(f"rank {rank}: " + " | ".join(errors))


if __name__ == "__main__":
    import sys
    sys.exit(0 if run(body) else 1)
