"""all_gather_coalesced: torch's output_tensor_lists is one list per *rank*
(output_tensor_lists[r][i] receives rank r's input_tensor_list[i]); the braid
backend reads it as one list per *input*.

Breaks: test_all_gather_coalesced_{simple,complex,full_group,with_empty}."""
import torch
import torch.distributed as dist

from _two import run


def body(rank, world):
    inputs = [torch.full((2,), float(rank)), torch.full((3,), 10.0 + rank)]
    outputs = [[torch.empty(2), torch.empty(3)] for _ in range(world)]
    dist.all_gather_coalesced(outputs, inputs)
    for r in range(world):
        assert torch.equal(outputs[r][0], torch.full((2,), float(r))), outputs
        assert torch.equal(outputs[r][1], torch.full((3,), 10.0 + r)), outputs


if __name__ == "__main__":
    import sys
    sys.exit(0 if run(body) else 1)
