#!/usr/bin/env python3
"""How often Linux TCP's smoothed RTT deviation exceeds a threshold (BBR-S's
trigger, Proteus §7.1), from the kernel's own RTT samples on a real path.

The kernel's mdev is not exported per ACK, but the tcp:tcp_probe tracepoint
gives the sender's srtt (srtt_us >> 3, in µs) on every segment it receives,
and srtt moves by (m - srtt)/8 for each RTT sample m, so every change of
srtt gives the sample back (to within 8 µs). Those samples are replayed
through tcp_rtt_estimator's mdev update (net/ipv4/tcp_input.c: gain 1/4, and
1/32 for samples below srtt) and through RFC 6298's rttvar (gain 1/4 both
ways; what cc::Bbr's BBR-S uses). A repeated srtt is taken as no sample.

Needs bpftrace (`apt-get install bpftrace`; not installed by scripts/setup:
this is a one-off measurement, not part of the tests). Run as root beside a
real-mode scenario whose TCP flows go to port 4433
(pepkit's Linux TCP sinks), e.g. scenarios/method/proteus-bbr-s-real.toml:

    bpftrace -e 'tracepoint:tcp:tcp_probe /args->dport == 4433/ {
        printf("%llu %u %u\\n", nsecs, args->sport, args->srtt); }' > probe.log &
    pepkit run scenarios/method/proteus-bbr-s-real.toml --real
    kill %1; scripts/kernel-rttvar.py probe.log [THRESHOLD_MS]

Prints one line per TCP connection (by source port, in order of appearance):
its span, the samples' RTT percentiles, and for both estimators the largest
deviation and how many times it rose above the threshold (default 20 ms),
counted from 5 s after the connection's first sample (past slow start).
"""

import sys
from collections import OrderedDict

WARMUP_S = 5.0


def samples_by_port(path):
    """{sport: [(t_s, rtt_us)]} reconstructed from srtt's changes."""
    srtts = OrderedDict()
    with open(path) as f:
        for line in f:
            fields = line.split()
            if len(fields) < 3 or not fields[0].isdigit():
                continue  # bpftrace's "Attaching 1 probe..." and the like
            t, sport, srtt = int(fields[0]) / 1e9, int(fields[1]), int(fields[2])
            srtts.setdefault(sport, []).append((t, srtt))
    out = OrderedDict()
    for sport, seq in srtts.items():
        rtts = []
        for (_, before), (t, after) in zip(seq, seq[1:]):
            if after != before:
                m = before + 8 * (after - before)
                if m > 0:
                    rtts.append((t, m))
        out[sport] = (seq[0][0], seq[-1][0], rtts)
    return out


class Crossings:
    """The largest value seen and how many times it rose above a threshold."""

    def __init__(self, threshold_ms):
        self.threshold, self.max, self.count, self.above = threshold_ms, 0.0, 0, False

    def see(self, value_ms):
        self.max = max(self.max, value_ms)
        above = value_ms > self.threshold
        self.count += above and not self.above
        self.above = above


def deviations(rtts, since, threshold_ms):
    """Replays the samples through the kernel's mdev and RFC 6298's rttvar."""
    kernel, rfc = Crossings(threshold_ms), Crossings(threshold_ms)
    srtt8 = mdev4 = None  # the kernel's srtt_us (x8) and mdev_us (x4)
    srtt = rttvar = None  # RFC 6298, µs
    for t, m in rtts:
        if srtt8 is None:
            srtt8, mdev4, srtt, rttvar = m << 3, m << 1, m, m / 2
            continue
        err = m - (srtt8 >> 3)
        srtt8 += err
        if err < 0:
            err = -err - (mdev4 >> 2)
            if err > 0:
                err >>= 3
        else:
            err -= mdev4 >> 2
        mdev4 += err
        rttvar = (3 * rttvar + abs(srtt - m)) / 4
        srtt = (7 * srtt + m) / 8
        if t >= since:
            kernel.see((mdev4 >> 2) / 1000)
            rfc.see(rttvar / 1000)
    return kernel, rfc


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    threshold = float(sys.argv[2]) if len(sys.argv) == 3 else 20.0
    ports = samples_by_port(sys.argv[1])
    if not ports:
        sys.exit(f"{sys.argv[1]}: no tcp_probe lines")
    t0 = min(start for start, _, _ in ports.values())
    for sport, (start, end, rtts) in ports.items():
        if len(rtts) < 2:
            continue
        ms = sorted(m / 1000 for _, m in rtts)
        pct = lambda p: ms[round(p * (len(ms) - 1))]
        kernel, rfc = deviations(rtts, start + WARMUP_S, threshold)
        print(
            f"port {sport}: {start - t0:.1f}-{end - t0:.1f} s, {len(rtts)} RTT samples, "
            f"RTT p1/p50/p99 {pct(0.01):.1f}/{pct(0.5):.1f}/{pct(0.99):.1f} ms; "
            f"kernel mdev max {kernel.max:.1f} ms, above {threshold:g} ms {kernel.count} times; "
            f"RFC 6298 rttvar max {rfc.max:.1f} ms, above {rfc.count} times"
        )


if __name__ == "__main__":
    main()
