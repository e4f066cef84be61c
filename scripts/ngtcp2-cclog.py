#!/usr/bin/env python3
"""Summarises the ngtcp2 RTC peer's loss and congestion-window log
(PEPKIT_NGTCP2_CCLOG, peers/ngtcp2/rtc.c): per sending connection, the
packets ngtcp2 declared lost, its window reductions, the reductions it
undid because the "lost" packets were acknowledged after all (CUBIC's
on_spurious_congestion), and its congestion window.

    PEPKIT_NGTCP2_CCLOG=/tmp/ng-pemi.cclog pepkit run scenarios/pemi/rtc-stacks.toml \\
        --real --trials 3 --only 'ngtcp2, QUIC + PEMI' --out /tmp/ng-pemi
    scripts/ngtcp2-cclog.py /tmp/ng-pemi.cclog

Columns: lost (1-RTT packets declared lost), cuts (window reductions),
restored (reductions undone as spurious), cwnd_kB (median of the window
after each acknowledged packet from 1 s on), limited (times ngtcp2 found
its window full when it had something to send). One line per server
connection (the one that declared losses or acknowledged most), in the
order they started, then the medians.
"""

import re
import statistics
import sys
from collections import defaultdict

LINE = re.compile(r"^(\d+) \S+ (0x[0-9a-f]+) \S+ (.*)$")


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    conns = defaultdict(lambda: {"start": None, "lost": 0, "cuts": 0, "restored": 0,
                                 "cwnd": [], "limited": 0, "acked": 0})
    for line in open(sys.argv[1], errors="replace"):
        m = LINE.match(line.strip())
        if not m:
            continue
        ns, scid, text = int(m.group(1)), m.group(2), m.group(3)
        c = conns[scid]
        if c["start"] is None:
            c["start"] = ns
        late = ns - c["start"] >= 1_000_000_000
        if " lost type=1RTT" in text:
            c["lost"] += 1
        elif text.startswith("reduce cwnd"):
            c["cuts"] += 1
        elif "restored cwnd=" in text:
            c["restored"] += 1
        elif text.startswith("cwnd limited"):
            c["limited"] += 1
        elif " acked, " in text:
            c["acked"] += 1
            w = re.search(r" cwnd=(\d+)", text)
            if w and late:
                c["cwnd"].append(int(w.group(1)))
    # The senders: more than 1000 acknowledged packets (an RTC server).
    senders = sorted((c for c in conns.values() if c["acked"] > 1000), key=lambda c: c["start"])
    print("lost  cuts restored cwnd_kB limited")
    for c in senders:
        c["cwnd_kB"] = statistics.median(c["cwnd"]) / 1e3 if c["cwnd"] else float("nan")
        print(f"{c['lost']:4} {c['cuts']:5} {c['restored']:8} {c['cwnd_kB']:7.1f} {c['limited']:7}")
    if senders:
        med = {k: statistics.median(c[k] for c in senders)
               for k in ("lost", "cuts", "restored", "cwnd_kB", "limited")}
        print(f"{med['lost']:4.0f} {med['cuts']:5.0f} {med['restored']:8.0f} {med['cwnd_kB']:7.1f}"
              f" {med['limited']:7.0f}  (median)")


if __name__ == "__main__":
    main()
