#!/usr/bin/env python3
"""The congestion controls on real kernel TCP through the emulator (issue 11's benchmarks).

1. *Alone on the path*: each variant alone on a 10 Mb/s path, RTT 40 ms, a 100-packet drop-tail
   queue, one bulk flow of --duration-s seconds: goodput, median smoothed RTT over the second
   half, retransmitted segments.
2. *What BPF costs*: the same, through the emulator with no rate limit and no queue limit (RTT
   2 ms): each variant's goodput over the best of the kernel's reno and cubic measured in the
   same testbed. The NewReno clone against kernel reno is the cost of running window rules as
   BPF (the same rules); a delay-based variant (Vegas) also backs off from the queueing the
   emulator's own forwarding adds at that rate, which is its behaviour, not BPF's cost.

Each variant runs on its own host of one dumbbell (its congestion control set for that host by
name, loaded for the testbed's life), one transfer after the other.

Run as root: .venv/bin/python benchmarks/cc_variants.py [--duration-s S] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys

from rich.console import Console
from rich.table import Table

from tcpdelay.testbed import LinkSpec, Testbed
from tcpdelay.testbed.congestion import VARIANTS
from tcpdelay.testbed.spec import parse_spec
from tcpdelay.traffic import bulk_transfer

NAMES = [n for n in VARIANTS if n != "bbr"] + ["bbr"]
BUF = (4096, 1 << 20, 16 << 20)


def _host(name: str) -> str:
    return f"h{NAMES.index(name)}"


def measure(link: LinkSpec, duration_s: float) -> dict[str, dict]:
    hosts = [{"name": _host(n), "side": "left",
              "tcp": {"congestion_control": n, "rmem_bytes": BUF, "wmem_bytes": BUF}} for n in NAMES]
    hosts.append({"name": "sink", "side": "right", "tcp": {"rmem_bytes": BUF, "wmem_bytes": BUF}})
    out = {}
    with Testbed(parse_spec({"hosts": hosts, "link": link.model_dump()})) as tb:
        for i, n in enumerate(NAMES):
            h = tb.hosts[_host(n)]
            rx = tb.hosts["sink"].spawn(bulk_transfer.receive, 5001 + i)
            tx = h.call(bulk_transfer.send, tb.hosts["sink"].address, 5001 + i, duration_s=duration_s,
                        timeout_s=duration_s + 60)
            got = rx.result(timeout_s=60)
            late = sorted(s["rtt_s"] for s in tx["samples"] if s["t_s"] >= duration_s / 2) or [float("nan")]
            out[n] = {"kernel_name": h.tcp_applied["congestion_control"],
                      "goodput_bps": got["goodput_bps"],  # what the receiver read, over its own span
                      "rtt_median_s": late[len(late) // 2],
                      "retransmits": tx["tcp_info"]["total_retrans"]}
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--duration-s", type=float, default=10.0)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    alone = measure(LinkSpec.symmetric(delay_s=0.020, rate_bps=10e6, queue_packets=100), args.duration_s)
    fast = measure(LinkSpec.symmetric(delay_s=0.001), args.duration_s)
    best_kernel = max(fast["reno"]["goodput_bps"], fast["cubic"]["goodput_bps"])
    for n, r in fast.items():
        r["ratio_to_best_kernel"] = r["goodput_bps"] / best_kernel
    doc = {"duration_s": args.duration_s, "alone_10mbps_40ms": alone, "unlimited_2ms": fast}
    if args.json:
        print(json.dumps(doc, indent=2))
        return 0
    c = Console()
    t = Table(title=f"Alone on 10 Mb/s, RTT 40 ms, 100-packet queue ({args.duration_s:g} s each)")
    for col in ("variant", "TCP_CONGESTION", "goodput Mb/s", "median RTT ms (2nd half)", "retransmits"):
        t.add_column(col)
    for n, r in alone.items():
        t.add_row(n, r["kernel_name"], f"{r['goodput_bps'] / 1e6:.2f}", f"{r['rtt_median_s'] * 1e3:.1f}", str(r["retransmits"]))
    c.print(t)
    t = Table(title="No rate limit, RTT 2 ms: goodput against the best of kernel reno/cubic")
    for col in ("variant", "goodput Mb/s", "ratio"):
        t.add_column(col)
    for n, r in fast.items():
        t.add_row(n, f"{r['goodput_bps'] / 1e6:.0f}", f"{r['ratio_to_best_kernel']:.2f}")
    c.print(t)
    return 0


if __name__ == "__main__":
    sys.exit(main())
