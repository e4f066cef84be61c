#!/usr/bin/env python3
"""Summarises quic-go qlogs of RTC runs: the sender's losses, how many of
them were spurious, its congestion window, whether it was window-limited,
and, from the client's qlog, how late the packets the client got out of
order arrived.

    PEPKIT_QLOGDIR=/tmp/qlog-pemi pepkit run scenarios/pemi/rtc-stacks.toml \\
        --real --trials 3 --only 'quic-go, QUIC + PEMI' --out /tmp/qg-pemi
    scripts/qlog-losses.py /tmp/qlog-pemi

PEPKIT_QLOGDIR makes the quic-go peer (peers/quic-go/main.go) write one
`<odcid>_<client|server>.sqlog` per connection; the two of a connection
share the odcid. One line per connection (in the order they started), then
the medians over connections.

Per connection, from the server (the sender):
  sent      1-RTT packets with stream data the server sent
  lost      packets quic-go declared lost (recovery:packet_lost), split by
            trigger: reordering (packet threshold, 3) / time (9/8 RTT)
  spurious  declared-lost packets whose own number an ACK later covered
            (recovery:spurious_loss): the loss was not real
  cuts      congestion events (recovery:congestion_state_updated to
            "recovery"); quic-go v0.60 never undoes one
  cwnd      time-weighted median congestion window from 1 s on, kB
  limited   share of the time from 1 s on with fewer than 1280 bytes of
            window left (bytes in flight + 1280 > cwnd)
  wait      median and p90 of how long a frame's first byte waited in the
            sender after its nominal generation (first frame's first send
            + k / 30 s), ms
and from the client (the receiver):
  late      packets that arrived after a higher-numbered one (in this
            testbed: PEMI's copies, or reordering), and the median of
            how much after the first higher-numbered one, ms
  miss      packets the server sent that never arrived under their own
            number (lost on the client's link and not repaired; the
            server resends their data in new packets)
  dups      packets the client dropped as duplicates (PEMI's copies of
            packets that had arrived)
  short     median over the spurious losses of how much too late the
            client's answer to the packet (PEMI's copy) came: its arrival at
            the client + the 26 ms one way to the server, minus when the
            server declared it lost (wall clocks of one host), ms
"""

import json
import statistics
import sys
from datetime import datetime
from pathlib import Path

FPS = 30
MTU = 1280
ONE_WAY_MS = 26.0  # PEMI's router to the server and back is 2 x 25 ms + serialisation


def events(path):
    """(reference wall time in ms since the epoch, [events]) of one .sqlog."""
    lines = path.read_text().split("\n")
    head = json.loads(lines[0].lstrip("\x1e"))
    wall = head["trace"]["common_fields"]["reference_time"]["wall_clock_time"]
    wall = wall.rstrip("Z")
    frac = ""
    if "." in wall:
        wall, frac = wall.split(".")
    t0 = datetime.fromisoformat(wall + "+00:00").timestamp() * 1e3 + float("0." + (frac or "0")) * 1e3
    out = []
    for line in lines[1:]:
        line = line.lstrip("\x1e").strip()
        if line:
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                pass  # a line cut short when the process was stopped
    return t0, out


def pct(values, q):
    values = sorted(values)
    if not values:
        return float("nan")
    return values[min(len(values) - 1, int(q * len(values)))]


def server_summary(t0, evs):
    sent, first_send = 0, {}
    numbers = set()
    lost = {"reordering_threshold": 0, "time_threshold": 0}
    lost_at = {}
    spurious = []
    cuts = 0
    cwnd = bif = 0
    timeline = []  # (time ms, cwnd, bytes in flight)
    for e in evs:
        name, data, t = e.get("name"), e.get("data", {}), e.get("time", 0.0)
        if name == "transport:packet_sent" and data["header"].get("packet_type") == "1RTT":
            streams = [f for f in data.get("frames", []) if f.get("frame_type") == "stream"]
            numbers.add(data["header"]["packet_number"])
            if streams:
                sent += 1
            for f in streams:
                if f["stream_id"] % 4 == 3:  # server-initiated unidirectional: a frame
                    first_send.setdefault(f["stream_id"], t)
        elif name == "recovery:packet_lost" and data["header"].get("packet_type") == "1RTT":
            lost[data.get("trigger", "?")] = lost.get(data.get("trigger", "?"), 0) + 1
            lost_at[data["header"]["packet_number"]] = t
        elif name == "recovery:spurious_loss":
            spurious.append(data["packet_number"])
        elif name == "recovery:congestion_state_updated" and data.get("new") == "recovery":
            cuts += 1
        elif name == "recovery:metrics_updated":
            cwnd = data.get("congestion_window", cwnd)
            bif = data.get("bytes_in_flight", bif)
            # metrics_updated leaves out fields that are zero or unchanged;
            # a packet's sending or acknowledgement always reports bif.
            if "bytes_in_flight" not in data and "packets_in_flight" in data:
                pass
            timeline.append((t, cwnd, bif))
    # Time-weighted cwnd and window-limited share, from 1 s on.
    start = 1000.0
    weights, limited, total = [], 0.0, 0.0
    for (t, c, b), (t2, _, _) in zip(timeline, timeline[1:]):
        if t2 <= start or c == 0:
            continue
        span = t2 - max(t, start)
        weights.append((c, span))
        total += span
        if b + MTU > c:
            limited += span
    weights.sort()
    acc, cwnd_med = 0.0, float("nan")
    for c, span in weights:
        acc += span
        if acc >= total / 2:
            cwnd_med = c / 1e3
            break
    frames = sorted(first_send.items())
    waits = []
    if frames:
        base = frames[0][1]
        for k, (_, t) in enumerate(frames):
            waits.append(t - (base + k * 1e3 / FPS))
    return {
        "sent": sent,
        "numbers": numbers,
        "lost": lost,
        "lost_at": {pn: t0 + t for pn, t in lost_at.items()},
        "spurious": spurious,
        "cuts": cuts,
        "cwnd_kB": cwnd_med,
        "limited": limited / total if total else float("nan"),
        "wait_p50": pct(waits, 0.5),
        "wait_p90": pct(waits, 0.9),
    }


def client_summary(t0, evs):
    arrived = {}
    highest, highest_at = -1, {}
    late = []
    order = []
    dups = 0
    for e in evs:
        data = e.get("data", {})
        if e.get("name") == "transport:packet_dropped" and data.get("trigger") == "duplicate":
            dups += 1
        if e.get("name") != "transport:packet_received":
            continue
        header = data.get("header", {})
        if header.get("packet_type") != "1RTT":
            continue
        pn, t = header["packet_number"], e["time"]
        if pn in arrived:
            continue
        arrived[pn] = t0 + t
        order.append((t, pn))
        if pn < highest:
            # how long after the first packet numbered above it
            after = min(tt for p, tt in highest_at.items() if p > pn)
            late.append(t - after)
        else:
            highest = pn
            highest_at[pn] = t
            if len(highest_at) > 4096:  # keep it small: drop the oldest
                for p in sorted(highest_at)[:2048]:
                    del highest_at[p]
    return {"arrived": arrived, "late": late, "dups": dups}


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    root = Path(sys.argv[1])
    conns = []
    for server in root.glob("*_server.sqlog"):
        client = server.with_name(server.name.replace("_server", "_client"))
        t0, evs = events(server)
        s = server_summary(t0, evs)
        if s["sent"] < 1000:
            continue  # not an RTC run (a handshake, a loopback test)
        c = client_summary(*events(client)) if client.exists() else {"arrived": {}, "late": [], "dups": 0}
        before = pct(
            [
                c["arrived"][pn] + ONE_WAY_MS - s["lost_at"][pn]
                for pn in s["spurious"]
                if pn in c["arrived"] and pn in s["lost_at"]
            ],
            0.5,
        )
        last = max(c["arrived"], default=-1)
        miss = sum(1 for pn in s["numbers"] if pn < last and pn not in c["arrived"])
        conns.append((t0, server.name.split("_")[0][:8], s, c, before, miss))
    conns.sort()
    cols = "conn      sent  lost(reord/time) spurious cuts cwnd_kB limited wait_p50 wait_p90  late late_ms short_ms miss dups"
    print(cols)
    rows = []
    for _, name, s, c, before, miss in conns:
        lost = sum(s["lost"].values())
        row = {
            "sent": s["sent"],
            "lost": lost,
            "spurious": len(s["spurious"]),
            "cuts": s["cuts"],
            "cwnd_kB": s["cwnd_kB"],
            "limited": s["limited"],
            "wait_p50": s["wait_p50"],
            "wait_p90": s["wait_p90"],
            "late": len(c["late"]),
            "late_ms": pct(c["late"], 0.5),
            "short_ms": before,
            "miss": miss,
            "dups": c["dups"],
        }
        rows.append(row)
        print(
            f"{name:8} {s['sent']:5} {lost:5} ({s['lost']['reordering_threshold']}/{s['lost']['time_threshold']})"
            f"{len(s['spurious']):9} {s['cuts']:4} {s['cwnd_kB']:7.1f} {s['limited']:7.2f}"
            f" {s['wait_p50']:8.1f} {s['wait_p90']:8.1f} {len(c['late']):5} {row['late_ms']:7.1f} {before:8.1f} {miss:4} {c['dups']:4}"
        )
    if rows:
        med = {k: statistics.median(r[k] for r in rows) for k in rows[0]}
        print(
            f"median   {med['sent']:5.0f} {med['lost']:5.0f}{'':13}{med['spurious']:5.0f} {med['cuts']:4.0f}"
            f" {med['cwnd_kB']:7.1f} {med['limited']:7.2f} {med['wait_p50']:8.1f} {med['wait_p90']:8.1f}"
            f" {med['late']:5.0f} {med['late_ms']:7.1f} {med['short_ms']:8.1f} {med['miss']:4.0f} {med['dups']:4.0f}"
        )


if __name__ == "__main__":
    main()
