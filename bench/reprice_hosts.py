#!/usr/bin/python3
"""Prices the rows of a bench/compare_hosts.sh log again with this build's
braid-sim, and counts the rows whose prediction is within 25% of the time
measured (issue 17, item 6). The algorithm priced is the one the log's run
chose: braid-sim's choice with the model of that run (--then-args, default
none beyond the link), so that a change to the model is judged on what ran,
not on what it would choose now.

  bench/reprice_hosts.py LOG [--build build-dev] [--now-args "--machine-cpus 2"]
"""
import argparse
import re
import subprocess
import sys


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


def bytes_of(s):
    m = re.fullmatch(r"(\d+)([KMG]?)", s)
    return int(m.group(1)) * {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}[m.group(2)]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("log")
    ap.add_argument("--build", default="build-dev")
    ap.add_argument("--now-args", default="", help="braid-sim options for the new prices")
    ap.add_argument("--then-args", default="", help="braid-sim options that reproduce the run's choice")
    a = ap.parse_args()
    now, then = a.now_args.split(), a.then_args.split()
    cfg = coll = None
    total = {"old": 0, "new": 0, "rows": 0}
    per = {}
    for line in open(a.log):
        m = re.match(r"## (\d+) hosts x (\d+) ranks per host, (\S+) links;.*probe: ([\d.]+) us one way, ([\d.]+) Gbit/s", line)
        if m:
            hosts, per_host = int(m.group(1)), int(m.group(2))
            cfg = (hosts, hosts * per_host, m.group(3), int(float(m.group(4)) * 1000), int(float(m.group(5)) * 1000))
            print(f"\n## {hosts} hosts x {per_host} ranks per host, {cfg[2]} (probe {m.group(4)} us, {m.group(5)} Gbit/s)")
            continue
        m = re.match(r"### (\w+),", line)
        if m:
            coll = m.group(1)
            print(f"\n{coll}: | size | measured (us) | algorithm run | sim then | measured / then | sim now | measured / now |")
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if not cfg or not coll or len(cells) < 8 or not re.fullmatch(r"\d+[KMG]?", cells[0]):
            continue
        size = bytes_of(cells[0])
        measured = float(cells[1].split()[0])
        hosts, ranks, shape, lat, mbps = cfg
        t_then, algo = sim_table(a.build, coll, ranks, hosts, lat, mbps, size, then)
        t_now, _ = sim_table(a.build, coll, ranks, hosts, lat, mbps, size, now)
        old, new = t_then[algo], t_now[algo]
        ok_old, ok_new = abs(old - measured) <= 0.25 * measured, abs(new - measured) <= 0.25 * measured
        total["rows"] += 1
        total["old"] += ok_old
        total["new"] += ok_new
        k = (hosts, ranks, shape)
        p = per.setdefault(k, [0, 0, 0])
        p[0] += 1
        p[1] += ok_old
        p[2] += ok_new
        print(f"| {cells[0]} | {measured:.1f} | {algo} | {old:.1f} | {measured / old:.2f} | {new:.1f} | {measured / new:.2f} |")
    print("\n| hosts | ranks | links | rows | within 25% then | within 25% now |")
    for (h, n, s), (r, o, w) in per.items():
        print(f"| {h} | {n} | {s} | {r} | {o} | {w} |")
    print(f"\nall rows: {total['rows']}; within 25% of the measured time: then {total['old']}, now {total['new']}")


if __name__ == "__main__":
    sys.exit(main())
