#!/usr/bin/env python3
"""How well a reference-kernel guest's clock is known: the offset of its CLOCK_MONOTONIC to this
machine's, its error, and its drift over time (tcpdelay.testbed.guest_clock).

Boots a Debian 6.1 guest (TCG) as the left host of a dumbbell, measures the offset when it
answers and then every ``--every-s`` seconds for ``--seconds``, optionally while a bulk iperf3
flow from the guest loads it (``--load``). Prints each measurement's error (half the best of 64
exchanges' delay) and the drift since the first, in ppm, and a summary: the largest error and
the drift's range. Figures: docs/testbed.md, "Reference-kernel hosts".

Run as root: .venv/bin/python benchmarks/guest_clock.py [--seconds 60] [--every-s 10] [--load] [--json]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import time

from rich.console import Console
from rich.table import Table

from tcpdelay.testbed import LinkSpec, Testbed, TestbedSpec
from tcpdelay.testbed.guest import attach_guest
from tcpdelay.testbed.guest_clock import drift_ppm


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--every-s", type=float, default=10.0)
    ap.add_argument("--load", action="store_true", help="a bulk iperf3 flow from the guest meanwhile (10 Mb/s link)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    spec = TestbedSpec.dumbbell(link=LinkSpec.symmetric(delay_s=0.01, rate_bps=10e6))
    rows = []
    with Testbed(spec) as tb:
        guest = attach_guest(tb, "left0")
        first = guest.clock
        rows.append({"t_s": 0.0, **first.to_dict(), "drift_ppm": None})
        server = None
        if args.load:
            right = tb.hosts["right0"]
            server = right.popen(["iperf3", "-s", "-p", "5302"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(0.5)
            guest.exec(f"iperf3 -c {right.address} -p 5302 -t {int(args.seconds) + 5} >/dev/null 2>&1 &")
        try:
            end = time.monotonic() + args.seconds
            while time.monotonic() + args.every_s <= end + 1e-6:
                time.sleep(args.every_s)
                c = guest.measure_clock()
                rows.append({"t_s": round(c.measured_at_s - first.measured_at_s, 3), **c.to_dict(),
                             "drift_ppm": drift_ppm(first, c)})
        finally:
            if server is not None:
                server.kill()
    drifts = [r["drift_ppm"] for r in rows if r["drift_ppm"] is not None]
    summary = {"boot_s": guest.boot_s, "accelerator": guest.accel, "load": args.load,
               "max_error_s": max(r["error_s"] for r in rows),
               "drift_ppm_min": min(drifts) if drifts else None, "drift_ppm_max": max(drifts) if drifts else None}
    if args.json:
        print(json.dumps({"measurements": rows, "summary": summary}, indent=1))
        return
    table = Table(title=f"guest clock ({guest.accel}{', loaded' if args.load else ''}; boot {guest.boot_s} s)")
    for h in ("t (s)", "offset (s)", "error (µs)", "delay (µs)", "answered", "drift (ppm)"):
        table.add_column(h, justify="right")
    for r in rows:
        table.add_row(f"{r['t_s']:.1f}", f"{r['offset_s']:.6f}", f"{r['error_s'] * 1e6:.0f}", f"{r['delay_s'] * 1e6:.0f}",
                      f"{r['answered']}/{r['probes']}", "—" if r["drift_ppm"] is None else f"{r['drift_ppm']:.1f}")
    Console().print(table)
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
