#!/usr/bin/python3
"""Prices the rows of a bench/compare_hosts.sh log again with this build's
braid-sim, and counts the rows whose prediction is within 25% of the time
measured (issue 17, item 6). The algorithm priced is the one the log's run
chose: braid-sim's choice with the model of that run (--then-args, default
none beyond the link), so that a change to the model is judged on what ran,
not on what it would choose now.

  bench/reprice_hosts.py LOG [--build build-dev] [--then-build DIR] [--now-args "--machine-cpus 2"] [--loop]
                         [--gap-ns NS] [--stream-mbps M]

--then-build: the build whose braid-sim reproduces the run's choice, where
the model has changed since (default: --build).

--loop prices the new figures as the benchmark times them: --calls with
the number of timed calls compare_hosts.sh gives that size (iters_for).
"""
import argparse
import subprocess
import sys

import hosts_log


def sim_table(build, coll, ranks, hosts, lat_ns, mbps, size, extra):
    cmd = [f"{build}/tools/braid-sim", coll, "--ranks", str(ranks), "--hosts", str(hosts), "--backend", "auto",
           "-b", str(size), "-e", str(size)] + extra
    if lat_ns:
        cmd += ["--link-latency-ns", str(lat_ns), "--link-mbps", str(mbps)]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.splitlines()
    head = next(l for l in out if l.strip().startswith("bytes")).split()
    row = next(l for l in out if l.strip() and l.split()[0].isdigit()).split()
    times, chosen = {}, None
    for name, v in zip(head[2:], row[2:]):
        if v == "-":
            continue
        if v.endswith("*"):
            chosen, v = name, v[:-1]
        times[name] = float(v)
    return times, chosen


def bench_iters(size):
    """compare_hosts.sh's iters_for: the timed calls per size."""
    return 200 if size <= 32768 else 20 if size <= 2097152 else 5


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("log")
    ap.add_argument("--build", default="build-dev")
    ap.add_argument("--now-args", default="", help="braid-sim options for the new prices")
    ap.add_argument("--then-args", default="", help="braid-sim options that reproduce the run's choice")
    ap.add_argument("--then-build", default=None, help="the build that reproduces the run's choice (default: --build)")
    ap.add_argument("--loop", action="store_true", help="new prices per call of the benchmark's loop (--calls)")
    ap.add_argument("--gap-ns", type=int, default=0,
                    help="the new prices' --link-gap-ns where the log has no gap from the probe (before session 33)")
    ap.add_argument("--stream-mbps", type=int, default=0,
                    help="the new prices' --machine-stream-mbps where the log has no stream (before session 33)")
    a = ap.parse_args()
    now, then = a.now_args.split(), a.then_args.split()
    total = {"old": 0, "new": 0, "rows": 0}
    per = {}
    config = coll = None
    for row in hosts_log.read(a.log):
        cfg = row.config
        if cfg is not config:
            config, coll = cfg, None
            print(f"\n## {cfg.hosts} hosts x {cfg.per_host} ranks per host, {cfg.links} "
                  f"(probe {cfg.probe_us:.1f} us, {cfg.probe_gbit:.2f} Gbit/s)")
        if row.coll != coll:
            coll = row.coll
            print(f"\n{coll}: | size | measured (us) | algorithm run | sim then | measured / then | sim now | measured / now |")
        size = hosts_log.bytes_of(row.size)
        measured = row.braid_us
        lat, mbps = int(cfg.probe_us * 1000), int(cfg.probe_gbit * 1000)
        # What the run measured besides the link, for the new prices: the
        # probe's gap and the machine's stream, where the log has them (since
        # session 33), or --gap-ns and --stream-mbps.
        measured_args = []
        gap_ns = int(cfg.probe_gap_us * 1000) or a.gap_ns
        if gap_ns:
            measured_args += ["--link-gap-ns", str(gap_ns)]
        stream_mbps = int(cfg.stream_gbit * 1000) or a.stream_mbps
        if stream_mbps and "--machine-cpus" in now:
            measured_args += ["--machine-stream-mbps", str(stream_mbps)]
        t_then, algo = sim_table(a.then_build or a.build, coll, cfg.ranks, cfg.hosts, lat, mbps, size, then)
        loop = ["--calls", str(bench_iters(size))] if a.loop else []
        t_now, _ = sim_table(a.build, coll, cfg.ranks, cfg.hosts, lat, mbps, size, now + loop + measured_args)
        old, new = t_then[algo], t_now[algo]
        ok_old, ok_new = abs(old - measured) <= 0.25 * measured, abs(new - measured) <= 0.25 * measured
        total["rows"] += 1
        total["old"] += ok_old
        total["new"] += ok_new
        p = per.setdefault((cfg.hosts, cfg.ranks, cfg.links), [0, 0, 0])
        p[0] += 1
        p[1] += ok_old
        p[2] += ok_new
        print(f"| {row.size} | {measured:.1f} | {algo} | {old:.1f} | {measured / old:.2f} | {new:.1f} | {measured / new:.2f} |")
    print("\n| hosts | ranks | links | rows | within 25% then | within 25% now |")
    for (h, n, s), (r, o, w) in per.items():
        print(f"| {h} | {n} | {s} | {r} | {o} | {w} |")
    print(f"\nall rows: {total['rows']}; within 25% of the measured time: then {total['old']}, now {total['new']}")


if __name__ == "__main__":
    sys.exit(main())
