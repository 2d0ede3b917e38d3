#!/usr/bin/python3
"""Sums up a bench/compare_hosts.sh log (GRID=1 or one configuration) against
issue 17's item 6, per configuration: rows where Braid's median is below
Open MPI's, or Open MPI is within 5% of the ceiling and Braid within 3% of
it (target 1); rows where braid-sim is within 25% of the measured time
(target 3); shaped rows from 512 KiB with Braid's busbw within 5% of the
ceiling (target 2); and the rows that miss target 1.

  bench/summarize_hosts.py LOG
"""
import sys

import hosts_log


def main():
    by_config = {}
    for row in hosts_log.read(sys.argv[1]):
        by_config.setdefault(row.config.label, []).append(row)
    print("| hosts x ranks, link | rows | target 1 | braid-sim within 25% | within 5% of ceiling from 512 KiB | rows that miss target 1 (Braid / Open MPI) |")
    print("|---|---:|---:|---:|---:|---|")
    tot = [0, 0, 0, 0, 0]
    for label, rows in by_config.items():
        t1 = sim = ceil_ok = ceil_rows = 0
        misses = []
        for r in rows:
            braid, mpi, ceil = r.braid_us, r.mpi_us, r.braid_over_ceiling
            mpi_ceil = ceil * braid / mpi if ceil is not None else None
            ok = braid < mpi or (ceil is not None and mpi_ceil >= 0.95 and ceil >= 0.97)
            t1 += ok
            if not ok:
                misses.append((braid / mpi, f"{r.coll} {r.size} {braid / mpi:.2f}"))
            # Braid / sim within 25% of the measured time: |sim - t| <= 0.25 t.
            sim += 0.8 <= r.braid_over_sim <= 1 / 0.75
            if ceil is not None and hosts_log.bytes_of(r.size) >= 512 << 10:
                ceil_rows += 1
                ceil_ok += ceil >= 0.95
        misses.sort(reverse=True)
        tot = [tot[0] + len(rows), tot[1] + t1, tot[2] + sim, tot[3] + ceil_ok, tot[4] + ceil_rows]
        ceil_text = f"{ceil_ok} of {ceil_rows}" if ceil_rows else "-"
        print(f"| {label} | {len(rows)} | {t1} | {sim} | {ceil_text} | {'; '.join(m for _, m in misses)} |")
    print(f"| all | {tot[0]} | **{tot[1]}** | **{tot[2]}** | **{tot[3]} of {tot[4]}** | |")


if __name__ == "__main__":
    sys.exit(main())
