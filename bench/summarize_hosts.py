#!/usr/bin/python3
"""Sums up a bench/compare_hosts.sh log (GRID=1 or one configuration) against
issue 17's item 6, per configuration: rows where Braid's median is below
Open MPI's, or Open MPI is within 5% of the ceiling and Braid within 3% of
it (target 1); rows where braid-sim is within 25% of the measured time
(target 3); shaped rows from 512 KiB with Braid's busbw within 5% of the
ceiling (target 2); and the rows that miss target 1.

  bench/summarize_hosts.py LOG
"""
import re
import sys

SIZE = re.compile(r"\d+[KMG]?")


def bytes_of(s):
    m = re.fullmatch(r"(\d+)([KMG]?)", s)
    return int(m.group(1)) * {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}[m.group(2)]


def main():
    rows = {}
    order = []
    cfg = coll = None
    for line in open(sys.argv[1]):
        m = re.match(r"## (\d+) hosts x (\d+) ranks per host, (\S+) links", line)
        if m:
            cfg = f"{m.group(1)}x{m.group(2)} {m.group(3)}"
            order.append(cfg)
            rows[cfg] = []
            continue
        m = re.match(r"### (\w+),", line)
        if m:
            coll = m.group(1)
            continue
        c = [x.strip() for x in line.strip().strip("|").split("|")]
        if cfg and len(c) >= 8 and SIZE.fullmatch(c[0]):
            braid, mpi = float(c[1].split()[0]), float(c[3].split()[0])
            ratio_sim = float(c[7])
            ceil = float(c[9]) if len(c) >= 10 else None
            rows[cfg].append((coll, c[0], braid, mpi, ratio_sim, ceil))
    print("| hosts x ranks, link | rows | target 1 | braid-sim within 25% | within 5% of ceiling from 512 KiB | rows that miss target 1 (Braid / Open MPI) |")
    print("|---|---:|---:|---:|---:|---|")
    tot = [0, 0, 0, 0, 0]
    for cfg in order:
        t1 = sim = ceil_ok = ceil_rows = 0
        misses = []
        for coll, size, braid, mpi, rs, ceil in rows[cfg]:
            mpi_ceil = ceil * braid / mpi if ceil is not None else None
            ok = braid < mpi or (ceil is not None and mpi_ceil >= 0.95 and ceil >= 0.97)
            t1 += ok
            if not ok:
                misses.append((braid / mpi, f"{coll} {size} {braid / mpi:.2f}"))
            # Braid / sim within 25% of the measured time: |sim - t| <= 0.25 t.
            sim += 0.8 <= rs <= 1 / 0.75
            if ceil is not None and bytes_of(size) >= 512 << 10:
                ceil_rows += 1
                ceil_ok += ceil >= 0.95
        misses.sort(reverse=True)
        n = len(rows[cfg])
        tot = [tot[0] + n, tot[1] + t1, tot[2] + sim, tot[3] + ceil_ok, tot[4] + ceil_rows]
        ceil_text = f"{ceil_ok} of {ceil_rows}" if ceil_rows else "-"
        print(f"| {cfg} | {n} | {t1} | {sim} | {ceil_text} | {'; '.join(m for _, m in misses)} |")
    print(f"| all | {tot[0]} | **{tot[1]}** | **{tot[2]}** | **{tot[3]} of {tot[4]}** | |")


if __name__ == "__main__":
    sys.exit(main())
