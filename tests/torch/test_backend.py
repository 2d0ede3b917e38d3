#!/usr/bin/python3
"""The "braid" torch.distributed backend, through torch's own API.

Each scenario runs as real rank processes (this file re-run with --worker),
bootstrapped by torch's init methods. Results are checked against values each
rank computes itself; a failing rank prints why and exits 1.

    test_backend.py [--only NAME]     exit 0: all passed; 77: torch or
                                      braid_torch not importable here
"""
import datetime
import os
import sys
import tempfile
import time
import traceback

try:
    import torch
    import torch.distributed as dist
    import braid_torch  # noqa: F401  (registers "braid")
except Exception as e:  # noqa: BLE001
    if "--worker" not in sys.argv:
        print(f"skipped: torch or braid_torch cannot be imported by {sys.executable}: {e}")
        sys.exit(77)
    raise

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ranks import free_ports, launch  # noqa: E402

SCENARIOS = {}


def scenario(world):
    def deco(f):
        SCENARIOS[f.__name__] = (world, f)
        return f
    return deco


def check(cond, what):
    if not cond:
        raise AssertionError(what)


def expect_error(fn, *texts):
    """fn() must raise RuntimeError whose first line holds every text."""
    try:
        fn()
    except RuntimeError as e:
        first = str(e).splitlines()[0]
        for t in texts:
            check(t in first, f"error {first!r} lacks {t!r}")
        return first
    raise AssertionError(f"expected a RuntimeError with {texts}")


def init(rank, world, method="env"):
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(world))
    dist.init_process_group("braid", timeout=datetime.timedelta(seconds=60))


# --- init methods --------------------------------------------------------------------

@scenario(2)
def init_methods(rank, world, port, tmp):
    # Ports of their own, chosen free by the driver (port + 1 is often an
    # ephemeral port some listener of the env:// run already took).
    tcp_port, store_port = (int(p) for p in os.environ["BRAID_TEST_PORTS"].split(",")[:2])
    kinds = [("env", {}), ("tcp", {"init_method": f"tcp://127.0.0.1:{tcp_port}"}),
             ("file", {"init_method": f"file://{tmp}/filestore"}), ("store", None)]
    for name, kw in kinds:
        if kw is None:
            store = dist.TCPStore("127.0.0.1", store_port, world, rank == 0, datetime.timedelta(seconds=30))
            dist.init_process_group("braid", store=store, rank=rank, world_size=world,
                                    timeout=datetime.timedelta(seconds=30))
        else:
            dist.init_process_group("braid", rank=rank, world_size=world,
                                    timeout=datetime.timedelta(seconds=30), **kw)
        check(dist.get_backend() == "braid", f"{name}: backend {dist.get_backend()}")
        check(dist.get_rank() == rank and dist.get_world_size() == world, f"{name}: rank/size")
        t = torch.tensor([rank + 1.0])
        dist.all_reduce(t)
        check(t.item() == 3.0, f"{name}: all_reduce gave {t.item()}")
        dist.destroy_process_group()


# --- every operation -------------------------------------------------------------------

DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int32, torch.int64,
          torch.int8, torch.uint8]


def val(rank, n, dtype, salt=0):
    """Rank-specific values that every dtype holds exactly."""
    v = (torch.arange(n, dtype=torch.int64) * 3 + rank * 5 + salt) % 11
    return v.to(dtype)


@scenario(3)
def collectives(rank, world, port, tmp):
    init(rank, world)
    for dt in DTYPES:
        n = 37
        # all_reduce: sum, max, min; async, in a non-contiguous tensor.
        t = val(rank, n, dt)
        dist.all_reduce(t)
        want = sum(val(r, n, torch.int64) for r in range(world)).to(dt)
        check(torch.equal(t, want), f"all_reduce sum {dt}")
        base = torch.stack([val(rank, n, dt), val(rank, n, dt, 1)], 1)  # n x 2
        nc = base[:, 1]
        check(not nc.is_contiguous(), "the view is not contiguous")
        w = dist.all_reduce(nc, op=dist.ReduceOp.MAX, async_op=True)
        w.wait()
        check(w.is_completed() and w.is_success(), "work completed")
        want = torch.stack([val(r, n, torch.int64, 1) for r in range(world)]).max(0).values.to(dt)
        check(torch.equal(base[:, 1], want), f"all_reduce max non-contiguous {dt}")
        check(torch.equal(base[:, 0], val(rank, n, dt)), "the other column untouched")
        # broadcast from rank 1
        b = val(rank, n, dt, 2)
        dist.broadcast(b, 1)
        check(torch.equal(b, val(1, n, dt, 2)), f"broadcast {dt}")
        # reduce to rank 2 with MIN
        r = val(rank, n, dt)
        dist.reduce(r, 2, op=dist.ReduceOp.MIN)
        if rank == 2:
            want = torch.stack([val(q, n, torch.int64) for q in range(world)]).min(0).values.to(dt)
            check(torch.equal(r, want), f"reduce {dt}")
        # all_gather, all_gather_into_tensor
        outs = [torch.zeros(n, dtype=dt) for _ in range(world)]
        dist.all_gather(outs, val(rank, n, dt))
        for q in range(world):
            check(torch.equal(outs[q], val(q, n, dt)), f"all_gather {dt} block {q}")
        flat = torch.zeros(world * n, dtype=dt)
        dist.all_gather_into_tensor(flat, val(rank, n, dt))
        check(torch.equal(flat, torch.cat([val(q, n, dt) for q in range(world)])), f"all_gather_into_tensor {dt}")
        # gather to 0, scatter from 1
        g = [torch.zeros(n, dtype=dt) for _ in range(world)] if rank == 0 else None
        dist.gather(val(rank, n, dt), g, dst=0)
        if rank == 0:
            for q in range(world):
                check(torch.equal(g[q], val(q, n, dt)), f"gather {dt}")
        s = torch.zeros(n, dtype=dt)
        dist.scatter(s, [val(q, n, dt, 3) for q in range(world)] if rank == 1 else None, src=1)
        check(torch.equal(s, val(rank, n, dt, 3)), f"scatter {dt}")
        # reduce_scatter (list and tensor forms)
        rs = torch.zeros(n, dtype=dt)
        dist.reduce_scatter(rs, [val(rank, n, dt, q) for q in range(world)])
        want = sum(val(r2, n, torch.int64, rank) for r2 in range(world)).to(dt)
        check(torch.equal(rs, want), f"reduce_scatter {dt}")
        rst = torch.zeros(n, dtype=dt)
        dist.reduce_scatter_tensor(rst, torch.cat([val(rank, n, dt, q) for q in range(world)]))
        check(torch.equal(rst, want), f"reduce_scatter_tensor {dt}")
        # all_to_all (list), all_to_all_single (even and uneven)
        ins = [val(rank, n, dt, q) for q in range(world)]
        outs = [torch.zeros(n, dtype=dt) for _ in range(world)]
        dist.all_to_all(outs, ins)
        for q in range(world):
            check(torch.equal(outs[q], val(q, n, dt, rank)), f"all_to_all {dt}")
        a2a = torch.zeros(world * n, dtype=dt)
        dist.all_to_all_single(a2a, torch.cat(ins))
        check(torch.equal(a2a, torch.cat([val(q, n, dt, rank) for q in range(world)])), f"all_to_all_single {dt}")
    # Uneven all_to_all_single, 2-d rows: rank i sends i + j + 1 rows to j.
    cols = 3
    in_splits = [rank + j + 1 for j in range(world)]
    out_splits = [i + rank + 1 for i in range(world)]
    src = torch.cat([torch.full((in_splits[j], cols), float(rank * 10 + j)) for j in range(world)])
    dst = torch.zeros(sum(out_splits), cols)
    dist.all_to_all_single(dst, src, out_splits, in_splits)
    want = torch.cat([torch.full((out_splits[i], cols), float(i * 10 + rank)) for i in range(world)])
    check(torch.equal(dst, want), "uneven all_to_all_single")
    # bool: sum is or, product is and; complex sums as pairs of reals.
    bt = torch.tensor([rank == 0, False, True])
    dist.all_reduce(bt)
    check(bt.tolist() == [True, False, True], f"bool sum {bt.tolist()}")
    bt = torch.tensor([rank == 0, True])
    dist.all_reduce(bt, op=dist.ReduceOp.PRODUCT)
    check(bt.tolist() == [False, True], f"bool product {bt.tolist()}")
    c = torch.tensor([1 + 2j, rank * 1j], dtype=torch.complex64)
    dist.all_reduce(c)
    check(torch.equal(c, torch.tensor([3 + 6j, 3j], dtype=torch.complex64)), f"complex sum {c}")
    # sparse COO tensors sum as Gloo sums them
    sp = torch.sparse_coo_tensor([[rank, 4]], [float(rank + 1), 1.0], (6,))
    dist.all_reduce(sp)
    check(sp.is_sparse and torch.equal(sp.to_dense(), torch.tensor([1.0, 2.0, 3.0, 0.0, 3.0, 0.0])),
          f"sparse sum {sp.to_dense()}")
    # bitwise ops and coalesced
    bw = torch.tensor([1 << rank, 7], dtype=torch.int32)
    dist.all_reduce(bw, op=dist.ReduceOp.BOR)
    check(bw.tolist() == [7, 7], "BOR")
    ts = [torch.full((5,), float(rank)), torch.full((2, 3), float(rank + 1))]
    dist.all_reduce_coalesced(ts)
    check(torch.equal(ts[0], torch.full((5,), 3.0)) and torch.equal(ts[1], torch.full((2, 3), 6.0)), "coalesced")
    ag_in = [torch.full((2,), float(rank)), torch.full((1,), float(rank * 2))]
    ag_out = [[torch.zeros(2), torch.zeros(1)] for _ in range(world)]  # ag_out[r][i]: rank r's input i
    dist.all_gather_coalesced(ag_out, ag_in)
    check(all(ag_out[q][0][0].item() == q and ag_out[q][1][0].item() == 2 * q for q in range(world)),
          "all_gather_coalesced")
    dist.barrier()
    # get_future: completes with the outputs, without wait()
    t = torch.full((1000,), float(rank))
    fut = dist.all_reduce(t, async_op=True).get_future()
    res = fut.wait()
    check(torch.equal(res[0], torch.full((1000,), 3.0)), "future value")
    fut2 = dist.all_reduce(torch.ones(10), async_op=True).get_future().then(lambda f: f.value()[0] * 2)
    check(torch.equal(fut2.wait(), torch.full((10,), 6.0)), "chained future")
    dist.destroy_process_group()


@scenario(3)
def point_to_point(rank, world, port, tmp):
    init(rank, world)
    nxt, prv = (rank + 1) % world, (rank - 1) % world
    for n in (1, 1000, 1 << 20):  # eager and rendezvous
        out = torch.arange(n, dtype=torch.float64) + rank
        got = torch.zeros(n, dtype=torch.float64)
        s = dist.isend(out, nxt, tag=n % 7)
        r = dist.irecv(got, prv, tag=n % 7)
        s.wait()
        r.wait()
        check(torch.equal(got, torch.arange(n, dtype=torch.float64) + prv), f"ring exchange {n}")
    # recv from any source reports the sender
    if rank == 0:
        seen = set()
        for _ in range(world - 1):
            t = torch.zeros(1, dtype=torch.int64)
            src = dist.recv(t)
            check(t.item() == src * 100, f"payload from {src}")
            seen.add(src)
        check(seen == set(range(1, world)), f"sources {seen}")
    else:
        dist.send(torch.tensor([rank * 100]), 0)
    dist.barrier()
    dist.destroy_process_group()


@scenario(4)
def groups(rank, world, port, tmp):
    init(rank, world)
    evens = dist.new_group([0, 2])
    odds = dist.new_group([3, 1])
    mine = evens if rank % 2 == 0 else odds
    t = torch.tensor([float(rank)])
    dist.all_reduce(t, group=mine)
    check(t.item() == (2.0 if rank % 2 == 0 else 4.0), f"subgroup all_reduce {t.item()}")
    # broadcast from a global rank inside a group
    b = torch.tensor([float(rank)])
    dist.broadcast(b, 3 if rank % 2 else 2, group=mine)
    check(b.item() == (3.0 if rank % 2 else 2.0), "subgroup broadcast root")
    # a Gloo group in the same process, beside braid's
    gl = dist.new_group(backend="gloo")
    x = torch.tensor([1.0])
    dist.all_reduce(x, group=gl)
    check(x.item() == 4.0, "gloo group beside braid")
    # groups in flight together
    w1 = dist.all_reduce(torch.ones(100), group=mine, async_op=True)
    w2 = dist.all_reduce(torch.ones(100), async_op=True)
    w2.wait()
    w1.wait()
    # send/recv inside a group use global ranks
    if rank in (1, 3):
        if rank == 1:
            dist.send(torch.tensor([42]), 3, group=odds)
        else:
            r = torch.zeros(1, dtype=torch.int64)
            dist.recv(r, 1, group=odds)
            check(r.item() == 42, "group p2p")
    dist.barrier()
    dist.destroy_process_group()


# --- mistakes --------------------------------------------------------------------------

@scenario(2)
def mistakes(rank, world, port, tmp):
    init(rank, world)
    # The seed document's send/recv: int64 sent, float32 received.
    if rank == 0:
        dist.send(torch.arange(4, dtype=torch.int64), 1)
        dist.send(torch.arange(4, dtype=torch.int64), 1)
    else:
        expect_error(lambda: dist.recv(torch.zeros(4, dtype=torch.float32), 0), "int64[4]", "float32[4]")
        expect_error(lambda: dist.recv(torch.zeros(8, dtype=torch.float32), 0), "int64[4]", "float32[8]")
    # Mismatched sizes and dtypes in a collective: both ranks fail, naming
    # both. A collective that fails part-way leaves its group unusable for
    # collectives (README): each mismatch gets a group of its own.
    g1, g2 = dist.new_group([0, 1]), dist.new_group([0, 1])
    expect_error(lambda: dist.all_reduce(torch.ones(4 if rank == 0 else 6), group=g1), "all_reduce", "float32")
    dt, other = (torch.float32, "int32") if rank == 0 else (torch.int32, "float32")
    expect_error(lambda: dist.all_reduce(torch.ones(4, dtype=dt), group=g2), "all_reduce", other)
    # What Braid cannot do is refused clearly, on the calling rank only.
    expect_error(lambda: dist.all_reduce(torch.ones(2, dtype=torch.bool), op=dist.ReduceOp.AVG), "AVG", "Bool")
    # A wait with a timeout gives up; the op is still usable afterwards.
    r = torch.zeros(1)
    w = dist.irecv(r, 1 - rank, tag=99)
    expect_error(lambda: w.wait(datetime.timedelta(milliseconds=200)), "Timed out waiting 200 ms")
    check(not w.is_completed(), "still running after the timed-out wait")
    dist.barrier()
    dist.send(torch.tensor([5.0]), 1 - rank, tag=99)
    w.wait()
    check(r.item() == 5.0, "the receive completed after all")
    # Still healthy.
    t = torch.ones(3)
    dist.all_reduce(t)
    check(torch.equal(t, torch.full((3,), 2.0)), "healthy after errors")
    dist.destroy_process_group()


@scenario(2)
def dead_peer(rank, world, port, tmp):
    """A rank that dies mid-job: the survivor's collective fails naming it."""
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(world))
    dist.init_process_group("braid", timeout=datetime.timedelta(seconds=10))
    dist.barrier()
    if rank == 1:
        os._exit(0)
    t0 = time.monotonic()
    expect_error(lambda: [dist.all_reduce(torch.ones(10)) for _ in range(100)], "rank 1")
    check(time.monotonic() - t0 < 15, "failed within the timeout")


@scenario(3)
def shareable_tensors(rank, world, port, tmp):
    """use_shareable_memory(): large tensors in memory the host's ranks map,
    the groups' ops told so only where every rank has it on."""
    check(not braid_torch.shareable_memory_on(), "off until asked for")
    braid_torch.use_shareable_memory(64 << 10)
    init(rank, world)
    check(dist.distributed_c10d._get_default_group().shareable, "every rank had it on: the group uses it")
    for n in (1000, 300_000, 4 << 20):  # under the threshold, over it, several MiB (floats)
        t = val(rank, n, torch.float32)
        dist.broadcast(t, 1)
        check(torch.equal(t, val(1, n, torch.float32)), f"broadcast of {n} floats")
        a = val(rank, n, torch.float32)
        dist.all_reduce(a)
        want = sum(val(r, n, torch.int64) for r in range(world)).to(torch.float32)
        check(torch.equal(a, want), f"all_reduce of {n} floats")
        outs = [torch.zeros(n) for _ in range(world)]
        dist.all_gather(outs, val(rank, n, torch.float32))
        check(all(torch.equal(outs[r], val(r, n, torch.float32)) for r in range(world)), f"all_gather of {n}")
        del t, a, outs  # freed through the same allocator: small and large alike
    # Out of file descriptors (each shareable tensor holds one): tensors are
    # still made, in private memory, and still work.
    import resource
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (len(os.listdir("/proc/self/fd")) + 4, hard))
    try:
        many = [torch.full((1 << 16,), float(i)) for i in range(16)]
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    check(all(float(m.sum()) == i * (1 << 16) for i, m in enumerate(many)), "tensors past the descriptors' limit")
    del many
    t = val(rank, 300_000, torch.float32)
    dist.broadcast(t, 0)
    check(torch.equal(t, val(0, 300_000, torch.float32)), "broadcast after the limit was lifted")
    dist.barrier()


@scenario(2)
def shareable_one_rank(rank, world, port, tmp):
    """Only rank 0 asked for shareable tensors: the group must not use them."""
    if rank == 0:
        braid_torch.use_shareable_memory(64 << 10)
    init(rank, world)
    check(not dist.distributed_c10d._get_default_group().shareable, "a rank without it: the group does not use it")
    t = val(rank, 1 << 20, torch.float32)
    dist.broadcast(t, 0)
    check(torch.equal(t, val(0, 1 << 20, torch.float32)), "broadcast")
    a = val(rank, 1 << 20, torch.float32)
    dist.all_reduce(a)
    check(torch.equal(a, sum(val(r, 1 << 20, torch.int64) for r in range(world)).to(torch.float32)), "all_reduce")


# --- driver ----------------------------------------------------------------------------

def worker(name, rank, world, port, tmp):
    import faulthandler
    faulthandler.dump_traceback_later(int(os.environ.get("HANG_S", "150")), exit=True)  # a hang shows where
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    try:
        SCENARIOS[name][1](rank, world, port, tmp)
    except BaseException:  # noqa: BLE001
        print(f"[{name} rank {rank}] FAILED:\n{traceback.format_exc()}", flush=True)
        os._exit(1)
    os._exit(0)


def main():
    if "--worker" in sys.argv:
        i = sys.argv.index("--worker")
        name, tmp = sys.argv[i + 1:i + 3]
        worker(name, int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), int(os.environ["MASTER_PORT"]), tmp)
    only = sys.argv[sys.argv.index("--only") + 1] if "--only" in sys.argv else None
    failed = 0
    for name, (world, _) in SCENARIOS.items():
        if only and name != only:
            continue
        port, *extra = free_ports(3)
        os.environ["BRAID_TEST_PORTS"] = ",".join(map(str, extra))
        t0 = time.monotonic()
        with tempfile.TemporaryDirectory() as tmp:
            codes = [c for c, _ in launch([sys.executable, __file__, "--worker", name, tmp], world, port, 180)]
        ok = all(c == 0 for c in codes)
        failed += not ok
        print(f"{'ok  ' if ok else 'FAIL'} {name} ({world} ranks, {time.monotonic() - t0:.1f} s) {codes if not ok else ''}",
              flush=True)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
