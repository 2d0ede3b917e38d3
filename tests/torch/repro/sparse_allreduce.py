"""all_reduce of a sparse COO tensor (test_sparse_all_reduce_sum, run when the
backend is "gloo"): Gloo sums sparse tensors; the braid backend refuses them
("allreduce: tensor is sparse: expected a dense tensor")."""
import torch
import torch.distributed as dist

from _two import run


def body(rank, world):
    t = torch.sparse_coo_tensor([[rank]], [float(rank + 1)], (world,))
    dist.all_reduce(t)
    dense = t.coalesce().to_dense() if t.is_sparse else t
    assert torch.equal(dense, torch.arange(1, world + 1, dtype=torch.float)), dense


if __name__ == "__main__":
    import sys
    sys.exit(0 if run(body) else 1)
