#!/usr/bin/env python3
"""Reads the results of scenarios/method/proteus-fig8-settling.toml and says whether
Figure 8's primary throughput ratio has settled within a run length.

    pepkit run scenarios/method/proteus-fig8-settling.toml --out results/fig8-settling
    scripts/fig8-settling.py results/fig8-settling

Each configuration's ratio is measured in three windows of one long run:
`sweep` (fig8-sweep.toml's window), `short` (a candidate shorter run) and
`late` (the second half of the long run). Prints, per RTT class, how far
`sweep` and `short` are from `late`, and per primary/scavenger pair the
median over configurations in each window (what Figure 8's checks use).
"""

import csv
import re
import statistics
import sys
from collections import defaultdict
from pathlib import Path

WINDOWS = ("sweep", "short", "late")


def load(results: Path):
    """{variant: {window: ratio}} from summary.csv (one trial each)."""
    ratios = defaultdict(dict)
    with open(results / "summary.csv", newline="") as f:
        for row in csv.DictReader(f):
            m = re.fullmatch(r"throughput_ratio_(\w+?)_primary", row["metric"])
            if m and m.group(1) in WINDOWS:
                ratios[row["variant"]][m.group(1)] = float(row["median"])
    return ratios


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    ratios = load(Path(sys.argv[1]))
    if not ratios:
        print(f"no throughput_ratio_<window>_primary in {sys.argv[1]}/summary.csv", file=sys.stderr)
        return 2
    by_rtt = defaultdict(lambda: defaultdict(list))
    by_pair = defaultdict(lambda: defaultdict(list))
    for variant, r in sorted(ratios.items()):
        if not all(w in r for w in WINDOWS):
            continue
        pair = variant.split(",")[0]
        delay = float(re.search(r"delay = ([\d.]+)ms", variant).group(1))
        rtt = 2 * delay
        for w in ("sweep", "short"):
            by_rtt[rtt][w].append(abs(r[w] - r["late"]))
        for w in WINDOWS:
            by_pair[pair][w].append(r[w])
    print("| RTT | configurations | sweep vs late, abs. difference: median / max | short vs late: median / max |")
    print("|---|---|---|---|")
    for rtt in sorted(by_rtt):
        d = by_rtt[rtt]
        cells = [f"{statistics.median(d[w]):.3f} / {max(d[w]):.3f}" for w in ("sweep", "short")]
        print(f"| {rtt:g} ms | {len(d['sweep'])} | {cells[0]} | {cells[1]} |")
    print()
    print("| pair | median ratio: sweep | short | late |")
    print("|---|---|---|---|")
    for pair in sorted(by_pair):
        d = by_pair[pair]
        print(f"| {pair} | " + " | ".join(f"{statistics.median(d[w]):.3f}" for w in WINDOWS) + " |")
    print()
    print("| primary | Proteus-S over LEDBAT-100, median ratios: sweep | short | late |")
    print("|---|---|---|---|")
    for primary in sorted({p.split(" + ")[0] for p in by_pair}):
        s, l = by_pair.get(f"{primary} + Proteus-S"), by_pair.get(f"{primary} + LEDBAT-100")
        if s and l:
            cells = [f"{statistics.median(s[w]) / statistics.median(l[w]):.3f}" for w in WINDOWS]
            print(f"| {primary} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
