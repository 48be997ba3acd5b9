#!/usr/bin/env python3
"""Queue disciplines at the ns-3 bottleneck (docs/ns3.md "Queue disciplines and ECN", issue 29
item 3): the cases of benchmarks/testbed_aqm_bulk.py simulated — one bulk Reno flow through
10 Mb/s with a 1000-packet limit and 10 ms each way, under drop-tail, CoDel (ns-3's
CoDelQueueDisc), FQ-CoDel (FqCoDelQueueDisc) and PIE (PieQueueDisc), each without and with ECN
(the discipline's ``ecn`` and the sender's ``tcp.ecn = 1``; the receiver keeps Linux's default
``tcp_ecn = 2``, which accepts it). The bulk flow is a scenario's TCP media flow of 1400-byte
packets every millisecond (11.2 Mb/s, more than the link carries), so its sender opens the
connection as the testbed benchmark's does.

Prints per case: the queue disc's sojourn time (p50 / p90 / p99 / max, ms), its drops (overflow
of the limit, the AQM's own), CE marks, the sender's retransmitted segments and the goodput
(media bytes over the time they took to arrive);
then, with ECN off, a VoIP flow over UDP beside a bulk Reno flow (a scenario's bulk cross
traffic): the VoIP packets' one-way delay p50 / p99 (ms).

Run: .venv/bin/python benchmarks/ns3_aqm_bulk.py [--duration-s S] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

from tcpdelay.experiments.run import run_scenario
from tcpdelay.experiments.scenario import parse_scenario
from tcpdelay.records import read_records

RATE_BPS, QUEUE_PACKETS, RTT_S = 10e6, 1000, 0.02
CASES = [("drop_tail", False), ("codel", False), ("codel", True), ("fq_codel", False), ("fq_codel", True),
         ("pie", False), ("pie", True)]


def _path(name: str, ecn: bool) -> dict:
    forward = {"rate_bps": RATE_BPS, "queue_packets": QUEUE_PACKETS}
    if name != "drop_tail":
        forward["aqm"] = {"discipline": name, "ecn": ecn}
    return {"rtt_s": RTT_S, "forward": forward}


def _run(data: dict, out: Path) -> dict:
    totals = run_scenario(parse_scenario(data), 1, out, backend="ns3")
    if totals["errors"]:
        raise SystemExit(f"{data['name']}: {totals['errors']}")
    return json.loads((out / "run.json").read_text())


def bulk(name: str, ecn: bool, duration_s: float, work: Path) -> dict:
    data = {"name": f"bulk-{name}-{int(ecn)}", "duration_s": duration_s, "seed": 1, "path": _path(name, ecn),
            "flows": [{"name": "bulk", "packet_size_bytes": 1400, "interval_s": 0.001, "transport": "tcp",
                       "tcp": {"congestion_control": "reno", "ecn": 1 if ecn else 0}}]}
    out = work / data["name"]
    run = _run(data, out)
    c = run["run"]["link_counters"]["a_to_b"]
    received = read_records(out, "received")
    return {"discipline": c["queue_discipline"], "ecn": ecn, "sojourn_ms": c.get("sojourn_ms"),
            "overflow_drops": c["drops"]["queue"], "aqm_drops": c["drops"]["aqm"], "ce_marks": c["ce_marks"],
            "peak_queue_packets": c["peak_queue_packets"],
            "retransmitted_segments": run["tcp_stats"][0]["total_retrans"],
            "goodput_bps": _goodput_bps(received)}


def _goodput_bps(received) -> float:
    """Media bytes received over the time they took to arrive (first to last packet; the
    application sends faster than the link, so the last arrive after the run's duration)."""
    t = np.asarray(received["recv_time_s"])
    return float(np.sum(received["size_bytes"])) * 8 / float(t.max() - t.min())


def voip_beside_bulk(name: str, duration_s: float, work: Path) -> dict:
    data = {"name": f"voip-{name}", "duration_s": duration_s, "seed": 1, "path": _path(name, False),
            "flows": [{"name": "voip", "profile": "voip", "transport": "udp"}],
            "cross": [{"kind": "bulk", "start_s": 0.0, "tcp": {"congestion_control": "reno"}}]}
    out = work / data["name"]
    _run(data, out)
    r = read_records(out, "received")
    d = (np.asarray(r["recv_time_s"]) - np.asarray(r["send_time_s"])) * 1e3
    p50, p99 = np.quantile(d, [0.5, 0.99])
    return {"discipline": name, "voip_delay_p50_ms": float(p50), "voip_delay_p99_ms": float(p99)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--duration-s", type=float, default=10.0)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    err = Console(stderr=True)
    with tempfile.TemporaryDirectory(prefix="tcpdelay-ns3-aqm-") as tmp:
        work = Path(tmp)
        rows = []
        for name, ecn in CASES:
            err.print(f"[dim]{name}{' + ECN' if ecn else ''}: {a.duration_s:g} s bulk Reno at 10 Mb/s ...[/dim]")
            rows.append(bulk(name, ecn, a.duration_s, work))
        voip = []
        for name in ("drop_tail", "codel", "fq_codel", "pie"):
            err.print(f"[dim]{name}: VoIP beside a bulk flow, {a.duration_s:g} s ...[/dim]")
            voip.append(voip_beside_bulk(name, a.duration_s, work))
    if a.json:
        print(json.dumps({"bulk": rows, "voip_beside_bulk": voip}, indent=2))
        return 0
    t = Table(title=f"ns-3: one bulk Reno flow, 10 Mb/s, {QUEUE_PACKETS}-packet limit, 10 ms each way, "
              f"{a.duration_s:g} s", title_justify="left")
    for col in ("discipline", "ECN", "sojourn p50 / p90 / p99 / max (ms)", "overflow / AQM drops", "CE marks",
                "retransmitted", "goodput (Mb/s)"):
        t.add_column(col, justify="left" if col in ("discipline", "ECN") else "right")
    for r in rows:
        s = r["sojourn_ms"]
        soj = f"{s['p50']:.1f} / {s['p90']:.1f} / {s['p99']:.1f} / {s['max']:.1f}" if s else \
            f"(drop-tail: peak {r['peak_queue_packets']} packets)"
        t.add_row(r["discipline"], "on" if r["ecn"] else "off", soj, f"{r['overflow_drops']} / {r['aqm_drops']}",
                  str(r["ce_marks"]), str(r["retransmitted_segments"]), f"{r['goodput_bps'] / 1e6:.2f}")
    v = Table(title="ns-3: VoIP (UDP) beside one bulk Reno flow, one-way delay (ms)", title_justify="left")
    for col in ("discipline", "p50", "p99"):
        v.add_column(col, justify="left" if col == "discipline" else "right")
    for r in voip:
        v.add_row(r["discipline"], f"{r['voip_delay_p50_ms']:.1f}", f"{r['voip_delay_p99_ms']:.1f}")
    Console(width=140).print(t)
    Console(width=140).print(v)
    return 0


if __name__ == "__main__":
    sys.exit(main())
