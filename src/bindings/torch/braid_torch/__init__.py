"""braid_torch: Braid as a torch.distributed backend.

    import braid_torch                      # registers the backend "braid"
    import torch.distributed as dist
    dist.init_process_group("braid", init_method="env://")   # or tcp://, file://, store=

Every process group torch makes with backend "braid" (the default group,
and each new_group) is one Braid Communicator, bootstrapped over the store
torch built from the init method. Environment:

    BRAID_BACKEND   Braid's transport choice: auto (default), tcp, shm, verbs
    BRAID_TORCH_SHAREABLE
                    1: use_shareable_memory() at import (every rank must
                    set it for its groups to use it)

use_shareable_memory(min_bytes=1 << 20) makes torch allocate CPU tensors of
at least min_bytes in memory that the host's other ranks map (Braid's
mem_alloc), so one-host collectives copy and reduce straight between the
ranks' tensors instead of through the kernel. It replaces torch's CPU
allocator for the whole process, from the call on (make the tensors after
it), and each such tensor holds a file descriptor while it lives. A group
uses it only if every rank had it on when the group was made
(ProcessGroupBraid.shareable says whether it does).
"""
import os

import torch
import torch.distributed as dist

from ._C import ProcessGroupBraid, braid_version, shareable_memory_on, use_shareable_memory  # noqa: F401

__all__ = ["ProcessGroupBraid", "braid_version", "create_process_group", "use_shareable_memory",
           "shareable_memory_on"]
__version__ = braid_version


def _store_host(store):
    """The host of the TCP store under torch's prefix stores, else MASTER_ADDR.

    Each rank advertises the address by which it reaches that host, so ranks
    on other hosts can connect back to it."""
    s = store
    for _ in range(8):
        host = getattr(s, "host", None)
        if isinstance(host, str) and host:
            return host
        s = getattr(s, "underlying_store", None)
        if s is None:
            break
    return os.environ.get("MASTER_ADDR", "")


def create_process_group(store, rank, world_size, timeout):
    """The creator torch calls for each "braid" process group."""
    backend = os.environ.get("BRAID_BACKEND", "auto")
    return ProcessGroupBraid(store, rank, world_size, timeout, backend, _store_host(store))


if "BRAID" not in dist.Backend._plugins:
    dist.Backend.register_backend("braid", create_process_group)

if os.environ.get("BRAID_TORCH_SHAREABLE", "0") not in ("", "0"):
    use_shareable_memory()
