#!/usr/bin/env python3
"""Queue disciplines at the testbed's bottleneck (docs/emulator.md "Queue disciplines and ECN",
issue 29): one bulk Reno flow, left0 -> right0, through 10 Mb/s with a 1000-packet limit and
10 ms each way, under drop-tail, CoDel (RFC 8289), FQ-CoDel (RFC 8290) and PIE (RFC 8033), each
without and with ECN (the discipline's ``ecn`` and ``tcp_ecn = 1`` in both hosts).

Prints per discipline: the bottleneck queue's sojourn time (p50 / p90 / p99 / max, ms, from the
emulator's counters), its drops (overflow of the limit, the AQM's own), the CE marks, the
sender's retransmissions (TCP_INFO) and the receiver's goodput over the transfer.

Run as root: .venv/bin/python benchmarks/testbed_aqm_bulk.py [--duration-s S] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys

from rich.console import Console
from rich.table import Table

from tcpdelay.link import CoDel, FqCoDel, Pie
from tcpdelay.testbed import DirectionSpec, LinkSpec, TcpSettings, Testbed, TestbedSpec
from tcpdelay.traffic import bulk_transfer

RATE_BPS, QUEUE_PACKETS, ONE_WAY_S = 10e6, 1000, 0.010
CASES = [("drop_tail", None, 0), ("codel", CoDel(), 0), ("codel", CoDel(ecn=True), 1),
         ("fq_codel", FqCoDel(), 0), ("fq_codel", FqCoDel(ecn=True), 1), ("pie", Pie(), 0), ("pie", Pie(ecn=True), 1)]


def one(aqm, tcp_ecn: int, duration_s: float) -> dict:
    forward = DirectionSpec(delay_s=ONE_WAY_S, rate_bps=RATE_BPS, queue_packets=QUEUE_PACKETS, aqm=aqm)
    spec = TestbedSpec.dumbbell(link=LinkSpec(a_to_b=forward, b_to_a=DirectionSpec(delay_s=ONE_WAY_S)),
                                tcp=TcpSettings(congestion_control="reno", ecn=tcp_ecn))
    with Testbed(spec) as tb:
        left, right = tb.hosts["left0"], tb.hosts["right0"]
        rx = right.spawn(bulk_transfer.receive, 5001)
        tx = left.call(bulk_transfer.send, right.address, 5001, duration_s=duration_s, congestion_control="reno",
                       timeout_s=duration_s + 60)
        got = rx.result(timeout_s=60)
        c = tb.link_counters()["a_to_b"]
    return {"discipline": c["queue_discipline"], "ecn": bool(tcp_ecn), "sojourn_ms": c["sojourn_ms"],
            "overflow_drops": c["drops"]["queue"], "aqm_drops": c["drops"]["aqm"], "ce_marks": c["ce_marks"],
            "retransmitted_segments": tx["tcp_info"]["total_retrans"], "goodput_bps": got["goodput_bps"]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--duration-s", type=float, default=10.0)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    err = Console(stderr=True)
    rows = []
    for name, aqm, ecn in CASES:
        err.print(f"[dim]{name}{' + ECN' if ecn else ''}: {a.duration_s:g} s bulk Reno at 10 Mb/s ...[/dim]")
        rows.append(one(aqm, ecn, a.duration_s))
    if a.json:
        print(json.dumps(rows, indent=2))
        return 0
    t = Table(title=f"One bulk Reno flow, 10 Mb/s, {QUEUE_PACKETS}-packet limit, 10 ms each way, {a.duration_s:g} s",
              title_justify="left")
    for col in ("discipline", "ECN", "sojourn p50 / p90 / p99 / max (ms)", "overflow / AQM drops", "CE marks",
                "retransmitted", "goodput (Mb/s)"):
        t.add_column(col, justify="left" if col in ("discipline", "ECN") else "right")
    for r in rows:
        s = r["sojourn_ms"]
        t.add_row(r["discipline"], "on" if r["ecn"] else "off", f"{s['p50']:g} / {s['p90']:g} / {s['p99']:g} / {s['max']:g}",
                  f"{r['overflow_drops']} / {r['aqm_drops']}", str(r["ce_marks"]), str(r["retransmitted_segments"]),
                  f"{r['goodput_bps'] / 1e6:.2f}")
    Console(width=140).print(t)
    return 0


if __name__ == "__main__":
    sys.exit(main())
