"""Prints torch.utils.data.DistributedSampler's indices for a grid of
parameters, one case per line, for tests/train/sampler_torch.cpp to compare
with braid::DistributedSampler:

    case N NUM_REPLICAS RANK SHUFFLE DROP_LAST SEED EPOCH LEN : I0 I1 ...

then `cases COUNT` and `torch VERSION`. Exits 77 (meson: skipped), saying
why, where torch cannot be imported.
"""
import sys

try:
    import torch
    from torch.utils.data import DistributedSampler
except Exception as e:  # ImportError, or a broken install
    print(f"torch cannot be imported by {sys.executable}: {e!r}", file=sys.stderr)
    sys.exit(77)


def cases():
    # Every combination for small datasets (padding, cuts, ranks > size).
    for n in [0, 1, 2, 3, 5, 7, 10, 16, 100, 1000]:
        for replicas in [1, 2, 3, 4, 8]:
            for shuffle in [False, True]:
                for drop_last in [False, True]:
                    for seed in [0, 42]:
                        for epoch in [0, 3]:
                            for rank in range(replicas):
                                yield n, replicas, rank, shuffle, drop_last, seed, epoch
    # Larger datasets (more MT19937 state refills), seeds past 32 bits and
    # a negative seed + epoch.
    for n in [10007, 100000]:
        for replicas, rank in [(3, 0), (3, 2), (8, 5)]:
            for drop_last in [False, True]:
                for seed, epoch in [(0, 0), (123456789, 1), (2**32 + 5, 2), (0, -1), (2**63, 7)]:
                    yield n, replicas, rank, True, drop_last, seed, epoch


count = 0
out = sys.stdout
for n, replicas, rank, shuffle, drop_last, seed, epoch in cases():
    s = DistributedSampler(range(n), num_replicas=replicas, rank=rank, shuffle=shuffle,
                           seed=seed, drop_last=drop_last)
    s.set_epoch(epoch)
    idx = list(s)
    out.write(f"case {n} {replicas} {rank} {int(shuffle)} {int(drop_last)} {seed} {epoch} {len(s)} : "
              + " ".join(map(str, idx)) + "\n")
    count += 1
out.write(f"cases {count}\n")
out.write(f"torch {torch.__version__}\n")
