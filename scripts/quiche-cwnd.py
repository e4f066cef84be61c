#!/usr/bin/env python3
"""Summarises the quiche peer's server qlogs of bulk downloads: how its
CUBIC window (quiche 0.30.0, legacy recovery) answered the losses, and
where HyStart++ left slow start.

    PEPKIT_QLOGDIR=/tmp/qlog-quiche pepkit run \\
        scenarios/pemi/download-stacks.toml --real \\
        --only 'quiche, QUIC e2e' --trials 10
    scripts/quiche-cwnd.py /tmp/qlog-quiche

PEPKIT_QLOGDIR makes the quiche peer (peers/quiche) write
`<trace id>_<client|server>.sqlog` per connection; only the servers'
(the senders') are read. quiche's base qlog has no loss or congestion
events, only `recovery_metrics_updated` (window and ssthresh, on change)
and `congestion_state_updated`, so the events are inferred from the
window (the names without their `quic:` prefix, so that older quiche
versions' qlogs, `recovery:metrics_updated`, read the same):

  losses     packets quiche declared lost, of the packets it sent (the
             peer's `<trace id>_server.stats`)
  cuts       window reductions: the window fell and ssthresh changed
             (cubic.rs congestion_event, at most one per recovery period)
  undone     cuts followed by a jump straight back to the window before
             that cut (cubic.rs rollback(): quiche's loss-count heuristic
             in on_packet_acked, or an ACK of a packet declared lost)
  exit       the first cut, the one that ends slow start, which quiche
             never undoes ("don't go back to slow start"), in bytes
  cwnd       time-weighted mean window from the first cut on, bytes
  CSS        when HyStart++ entered conservative slow start, if it did
  replay     quiche's HyStart++ (recovery/congestion/hystart.rs) replayed
             on the qlog's packets and ACK frames up to the first cut:
             each round's start and the previous round's minimum RTT,
             which is what HyStart++ compares (RTTs from the qlog's send
             times: right for 0.30.0, which does not pace CUBIC; quiche
             up to 0.24.6 stamped paced packets with their release time)

One block per connection, in the order the files sort.
"""

import json
import math
import os
import sys

MSS_TOLERANCE = 1350  # a jump larger than a datagram is not CUBIC's growth


def events(path):
    with open(path) as f:
        for line in f:
            line = line.strip().lstrip("\x1e")
            if not line:
                continue
            try:
                e = json.loads(line)
            except ValueError:  # a file cut short at its end
                continue
            if "time" in e:
                yield e


def window(path):
    cw = ss = srtt = None
    cuts = []  # [time, from, to, undone at]
    series = []
    css = None
    for e in events(path):
        t, d = e["time"], e.get("data", {})
        if e["name"].endswith("congestion_state_updated"):
            if d.get("new") == "conservative_slow_start" and css is None:
                css = (t, cw, srtt)
            continue
        if not e["name"].endswith("metrics_updated"):
            continue
        srtt = d.get("smoothed_rtt", srtt)
        nss = d.get("ssthresh", ss)
        c = d.get("congestion_window", cw)
        if cw is not None and c != cw:
            if c < cw and (nss != ss or c <= 0.71 * cw):
                cuts.append([t, cw, c, None])
            elif c > cw + MSS_TOLERANCE and cuts and cuts[-1][3] is None and c == cuts[-1][1]:
                cuts[-1][3] = t
        cw, ss = c, nss
        series.append((t, cw))
    return cuts, series, css


def hystart_replay(path, stop):
    """quiche 0.30.0's HyStart++ rounds on the sent packets and ACK frames."""
    space = {"initial": 0, "handshake": 1}
    sent, acked = {}, set()
    window_end = None
    last_min = cur_min = math.inf
    count = 0
    rounds, css = [], None
    latest = None
    for e in events(path):
        t, d = e["time"], e.get("data", {})
        if t > stop:
            break
        if e["name"].endswith("packet_sent"):
            sp = space.get(d["header"]["packet_type"], 2)
            pn = d["header"]["packet_number"]
            frames = [f["frame_type"] for f in d.get("frames", [])]
            sent[(sp, pn)] = t
            if window_end is None and any(f != "ack" for f in frames):
                window_end = (sp, pn)
                last_min, cur_min, count = cur_min, math.inf, 0
                rounds.append((t, last_min))
        elif e["name"].endswith("packet_received"):
            sp = space.get(d["header"]["packet_type"], 2)
            for f in d.get("frames", []):
                if f["frame_type"] != "ack":
                    continue
                new = sorted(
                    p
                    for r in f["acked_ranges"]
                    for p in range(r[0], r[-1] + 1)
                    if (sp, p) in sent and (sp, p) not in acked
                )
                if not new:
                    continue
                largest = max(r[-1] for r in f["acked_ranges"])
                if (sp, largest) in sent and (sp, largest) not in acked:
                    latest = t - sent[(sp, largest)]
                for p in new:
                    acked.add((sp, p))
                    cur_min = min(cur_min, latest)
                    count += 1
                    if css is None and count >= 8 and last_min != math.inf:
                        thresh = min(max(last_min / 8, 4.0), 16.0)
                        if cur_min >= last_min + thresh:
                            css = (t, cur_min, last_min)
                    if window_end and sp == window_end[0] and p >= window_end[1]:
                        window_end = None
    return rounds, css


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    d = sys.argv[1]
    files = sorted(f for f in os.listdir(d) if f.endswith("_server.sqlog"))
    if not files:
        sys.exit(f"no *_server.sqlog in {d}")
    for name in files:
        path = os.path.join(d, name)
        cuts, series, css = window(path)
        try:
            with open(path[: -len(".sqlog")] + ".stats") as f:
                stats = json.load(f)
            lost = f"{stats['lost']} of {stats['sent']} sent"
        except (OSError, ValueError, KeyError):
            lost = "?"
        if not cuts:
            print(f"{name[:8]}: no window reduction")
            continue
        end = series[-1][0]
        undone = [c for c in cuts if c[3] is not None]
        acc, prev = 0.0, None
        for t, c in series:
            if t >= cuts[0][0]:
                if prev:
                    acc += prev[1] * (t - prev[0])
                prev = (t, c)
        mean = acc / (end - cuts[0][0]) if end > cuts[0][0] else cuts[0][2]
        delays = sorted(c[3] - c[0] for c in undone)
        print(
            f"{name[:8]}: {end / 1000:.2f} s, losses {lost}, cuts {len(cuts)}, "
            f"undone {len(undone)}, exit {cuts[0][1]} -> {cuts[0][2]} at {cuts[0][0]:.0f} ms, "
            f"cwnd {mean:.0f}"
            + (f", undone after {delays[len(delays) // 2]:.0f} ms (median)" if delays else "")
        )
        if css:
            print(f"  CSS at {css[0]:.0f} ms, window {css[1]}, srtt {css[2]:.1f} ms")
        rounds, rcss = hystart_replay(path, cuts[0][0])
        print(
            "  replay, round start (ms): previous round's min RTT (ms): "
            + ", ".join(f"{t:.0f}: {m:.1f}" for t, m in rounds[1:])
        )
        if rcss:
            print(f"  replay: CSS at {rcss[0]:.0f} ms (round min {rcss[1]:.1f} vs {rcss[2]:.1f})")


if __name__ == "__main__":
    main()
