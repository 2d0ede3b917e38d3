"""all_gather / all_gather_coalesced with zero-element tensors (the case of
test_all_gather_coalesced_with_empty, once allgather_coalesced's layout is
fixed): each rank's empty input must gather into empty outputs."""
import torch
import torch.distributed as dist

from _two import run


def body(rank, world):
    outs = [torch.empty(0) for _ in range(world)]
    dist.all_gather(outs, torch.empty(0))
    inputs = [torch.full((2,), float(rank)), torch.empty(0), torch.full((1,), 5.0 + rank)]
    outputs = [[torch.empty(2), torch.empty(0), torch.empty(1)] for _ in range(world)]
    dist.all_gather_coalesced(outputs, inputs)
    for r in range(world):
        assert torch.equal(outputs[r][0], torch.full((2,), float(r))), outputs
        assert outputs[r][1].numel() == 0
        assert torch.equal(outputs[r][2], torch.full((1,), 5.0 + r)), outputs


if __name__ == "__main__":
    import sys
    sys.exit(0 if run(body) else 1)
