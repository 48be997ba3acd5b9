#!/usr/bin/env python3
"""Benchmark 2 (issue 4): capacity of the testbed with real TCP (cubic), delay and no rate limit.

One bulk cubic flow left0 -> right0 for --duration-s seconds through the emulator with a fixed
one-way delay, no rate limit, no queue limit; large socket buffers (64 MB max) so that the window
is not the limit. Goodput is what the receiver read; the emulator's CPU share is its user+system
CPU seconds (/proc/PID/stat) over the wall-clock time of the transfer (1.0 = one core).
Target: >= 500 Mb/s (aim 1 Gb/s). Anchor: Mahimahi's reported ~300 Mb/s ceiling with a delay shell.

Run as root: .venv/bin/python benchmarks/testbed_capacity.py [--duration-s S] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from rich.console import Console
from rich.table import Table

from tcpdelay.testbed import LinkSpec, TcpSettings, Testbed, TestbedSpec
from tcpdelay.testbed.netns import process_cpu_s
from tcpdelay.traffic import bulk_transfer

BUF = (4096, 1 << 20, 64 << 20)


def measure(one_way_s: float, duration_s: float, flows: int) -> dict:
    tcp = TcpSettings(congestion_control="cubic", rmem_bytes=BUF, wmem_bytes=BUF)
    spec = TestbedSpec.dumbbell(1, 1, link=LinkSpec.symmetric(delay_s=one_way_s), tcp=tcp)
    with Testbed(spec) as tb:
        left, right = tb.hosts["left0"], tb.hosts["right0"]
        rxs = [right.spawn(bulk_transfer.receive, 5001 + i) for i in range(flows)]
        time.sleep(0.1)
        cpu0, t0 = process_cpu_s(tb.emulator_pid), time.monotonic()
        txs = [left.spawn(bulk_transfer.send, right.address, 5001 + i, duration_s=duration_s, congestion_control="cubic")
               for i in range(flows)]
        sent = [t.result(timeout_s=duration_s + 60) for t in txs]
        cpu1, t1 = process_cpu_s(tb.emulator_pid), time.monotonic()
        got = [r.result(timeout_s=30) for r in rxs]
        counters = tb.link_counters()
    span = max(g["duration_s"] for g in got)
    total = sum(g["bytes"] for g in got)
    return {
        "one_way_delay_s": one_way_s, "flows": flows, "duration_s": span, "bytes": total,
        "goodput_bps": total * 8 / span,
        "emulator_cpu_share": (cpu1 - cpu0) / (t1 - t0),
        "srtt_s": [s["tcp_info"]["rtt_s"] for s in sent],
        "min_rtt_s": [s["tcp_info"]["min_rtt_s"] for s in sent],
        "retransmitted_segments": sum(s["tcp_info"]["total_retrans"] for s in sent),
        "emulator_packets_a_to_b": counters["a_to_b"]["packets_out"],
        "emulator_drops_a_to_b": counters["a_to_b"]["drops"],
        "emulator_lateness_us_a_to_b": counters["a_to_b"]["lateness_us"],
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--duration-s", type=float, default=8.0)
    ap.add_argument("--delays-s", type=float, nargs="+", default=[0.001, 0.010, 0.050], help="one-way delays")
    ap.add_argument("--flows", type=int, default=1)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    con = Console(stderr=True)
    results = []
    for d in a.delays_s:
        con.print(f"[dim]{d * 1e3:g} ms each way, {a.duration_s:g} s ...[/dim]")
        results.append(measure(d, a.duration_s, a.flows))
    if a.json:
        print(json.dumps(results, indent=2))
        return 0
    t = Table(title=f"Capacity: {a.flows} cubic flow(s), no rate limit, {a.duration_s:g} s each", title_justify="left")
    for col in ("one-way delay", "goodput", "emulator CPU share", "sRTT at end", "retransmitted", "lateness p99", "target"):
        t.add_column(col, justify="right")
    for r in results:
        t.add_row(f"{r['one_way_delay_s'] * 1e3:g} ms", f"{r['goodput_bps'] / 1e6:.0f} Mb/s",
                  f"{r['emulator_cpu_share'] * 100:.0f} % of a core",
                  f"{r['srtt_s'][0] * 1e3:.1f} ms", str(r["retransmitted_segments"]),
                  f"{r['emulator_lateness_us_a_to_b']['p99']:g} µs", ">= 500 Mb/s")
    Console(width=140).print(t)
    Console(width=140).print("Anchor: Mahimahi's delay shell, ~300 Mb/s. Sender, receiver and emulator share the "
                             "machine's 2 cores with other jobs; the figures are a floor for an idle machine.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
