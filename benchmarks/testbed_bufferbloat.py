#!/usr/bin/env python3
"""Benchmark 3 (issue 4): bufferbloat: a bulk flow fills a 100-packet queue at 10 Mb/s.

left0 -> right0 at 10 Mb/s (a_to_b), drop-tail queue of 100 packets, 20 ms each way, one cubic
bulk flow for --duration-s seconds. Targets: goodput >= 9.3 Mb/s (the ceiling is
10 Mb/s x 1448/1500 = 9.65 Mb/s of payload with timestamps), and an RTT that climbs to about
base + queue/rate = 40 ms + 100 x 1500 B x 8 / 10 Mb/s = 160 ms (plus one packet's 1.2 ms
serialization). RTTs are the sender's TCP_INFO samples (every 50 ms); the steady state excludes
the first --warmup-s seconds (slow start). Also reports the emulator's peak queue and drops.

Run as root: .venv/bin/python benchmarks/testbed_bufferbloat.py [--duration-s S] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys

import numpy as np
from rich.console import Console
from rich.table import Table

from tcpdelay.testbed import DirectionSpec, LinkSpec, TcpSettings, Testbed, TestbedSpec
from tcpdelay.traffic import bulk_transfer

RATE_BPS, QUEUE_PACKETS, ONE_WAY_S, MTU = 10e6, 100, 0.020, 1500


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--duration-s", type=float, default=15.0)
    ap.add_argument("--warmup-s", type=float, default=3.0)
    ap.add_argument("--cc", default="cubic")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    link = LinkSpec(a_to_b=DirectionSpec(delay_s=ONE_WAY_S, rate_bps=RATE_BPS, queue_packets=QUEUE_PACKETS),
                    b_to_a=DirectionSpec(delay_s=ONE_WAY_S))
    spec = TestbedSpec(link=link, hosts=TestbedSpec.dumbbell(1, 1, tcp=TcpSettings(congestion_control=a.cc)).hosts)
    Console(stderr=True).print(f"[dim]{a.duration_s:g} s bulk {a.cc} flow at 10 Mb/s ...[/dim]")
    with Testbed(spec) as tb:
        left, right = tb.hosts["left0"], tb.hosts["right0"]
        rx = right.spawn(bulk_transfer.receive, 5001)
        tx = left.call(bulk_transfer.send, right.address, 5001, duration_s=a.duration_s, congestion_control=a.cc,
                       timeout_s=a.duration_s + 60)
        got = rx.result(timeout_s=60)
        c = tb.link_counters()["a_to_b"]
    samples = [s for s in tx["samples"] if s["t_s"] >= a.warmup_s]
    rtt = np.array([s["rtt_s"] for s in samples])
    acked = [(s["t_s"], s["bytes_acked"]) for s in samples]
    steady_bps = (acked[-1][1] - acked[0][1]) * 8 / (acked[-1][0] - acked[0][0])
    expected_rtt = 2 * ONE_WAY_S + QUEUE_PACKETS * MTU * 8 / RATE_BPS
    res = {
        "rate_bps": RATE_BPS, "queue_packets": QUEUE_PACKETS, "one_way_delay_s": ONE_WAY_S, "cc": a.cc,
        "goodput_bps_whole": got["goodput_bps"], "goodput_bps_steady": steady_bps,
        "rtt_s": {"min": float(rtt.min()), "p50": float(np.percentile(rtt, 50)), "p95": float(np.percentile(rtt, 95)),
                  "max": float(rtt.max())},
        "expected_max_rtt_s": expected_rtt, "min_rtt_s": tx["tcp_info"]["min_rtt_s"],
        "retransmitted_segments": tx["tcp_info"]["total_retrans"],
        "peak_queue_packets": c["peak_queue_packets"], "queue_drops": c["drops"]["queue"],
    }
    res["pass"] = steady_bps >= 9.3e6 and abs(res["rtt_s"]["max"] - expected_rtt) <= 0.15 * expected_rtt
    if a.json:
        print(json.dumps(res, indent=2))
        return 0
    t = Table(title=f"Bufferbloat: 10 Mb/s, {QUEUE_PACKETS}-packet drop-tail queue, 20 ms each way, one {a.cc} flow",
              title_justify="left")
    t.add_column("")
    t.add_column("measured", justify="right")
    t.add_column("target / expected", justify="right")
    r = res
    for row in (("goodput, steady state", f"{r['goodput_bps_steady'] / 1e6:.2f} Mb/s", ">= 9.3 Mb/s (ceiling 9.65)"),
                ("goodput, whole transfer", f"{r['goodput_bps_whole'] / 1e6:.2f} Mb/s", ""),
                ("min RTT", f"{r['min_rtt_s'] * 1e3:.1f} ms", "40 ms + 1.2 ms"),
                ("sRTT p50 / p95 / max", "{:.1f} / {:.1f} / {:.1f} ms".format(*(r["rtt_s"][k] * 1e3 for k in ("p50", "p95", "max"))),
                 f"≈ {expected_rtt * 1e3:.0f} ms"),
                ("emulator peak queue", f"{r['peak_queue_packets']} packets", f"{QUEUE_PACKETS}"),
                ("queue drops / retransmitted", f"{r['queue_drops']} / {r['retransmitted_segments']}", ""),
                ("verdict", "PASS" if r["pass"] else "FAIL", "")):
        t.add_row(*row)
    Console(width=120).print(t)
    return 0


if __name__ == "__main__":
    sys.exit(main())
