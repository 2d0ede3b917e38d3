"""braid_torch: Braid as a torch.distributed backend.

    import braid_torch                      # registers the backend "braid"
    import torch.distributed as dist
    dist.init_process_group("braid", init_method="env://")   # or tcp://, file://, store=

Every process group torch makes with backend "braid" (the default group,
and each new_group) is one Braid Communicator, bootstrapped over the store
torch built from the init method. Environment:

    BRAID_BACKEND   Braid's transport choice: auto (default), tcp, shm, verbs
"""
import os

import torch
import torch.distributed as dist

from ._C import ProcessGroupBraid, braid_version  # noqa: F401

__all__ = ["ProcessGroupBraid", "braid_version", "create_process_group"]
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
