#!/usr/bin/env python3
"""Does the time Linux's receive window holds a loss-free transfer add to it? (issue 17)

Cardwell, Savage, Anderson, "Modeling TCP Latency", eq (15) has a fixed ``W_max``; Linux's
receiver advertises 10 segments at first and opens its window as data arrives, and TCP_INFO
reports how long the sender was held by it (``tcpi_rwnd_limited_us``). This runs ``--repeats``
pairs of d-segment transfers (default 256, RTT 100 ms, the paper-era stack's IW3) on the testbed
and prints, per transfer, the time over eq (15) beside the time held: if holding cost its full
time, the two would rise together. ``tests/experiments/test_transfers_testbed.py`` bounds the
transfer by eq (15) + one RTT + the held time; this shows why the held time is a bound, not a cost.

Run as root: .venv/bin/python benchmarks/testbed_transfer_rwnd.py [--repeats N] [--segments D] [--json]
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

from tcpdelay.experiments.run import run_scenario
from tcpdelay.experiments.scenario import parse_scenario
from tcpdelay.model.transfer import transfer_time_s

RTT_S = 0.1
MSS_BYTES = 1448


def measure(segments: int, repeats: int) -> list[dict]:
    tcp = {"preset": "newreno-2008", "no_metrics_save": True}
    model_s = float(transfer_time_s(segments, 0.0, RTT_S, w1=3, b=1))
    rows = []
    for k in range(repeats):
        cross = [{"kind": "transfers", "size_bytes": segments * MSS_BYTES, "transfers": 2, "gap_s": 0.05,
                  "tcp": tcp}]
        sc = parse_scenario({"name": "transfer-rwnd", "duration_s": 60, "tcp_state_period_s": 0,
                             "path": {"rtt_s": RTT_S}, "cross": cross})
        with tempfile.TemporaryDirectory() as tmp:
            totals = run_scenario(sc, 1, Path(tmp))
            if totals["errors"]:
                raise SystemExit(f"run {k} failed: {totals['errors']}")
            run = json.loads((Path(tmp) / "run.json").read_text())["run"]
        for r in run["cross"][0]["result"]["transfers"]:
            rows.append({"repeat": k, "class": r["class"], "transfer_s": r["transfer_s"], "eq15_s": model_s,
                         "over_eq15_s": r["transfer_s"] - model_s,
                         "window_held_s": r["rwnd_limited_s"] + r["sndbuf_limited_s"]})
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=8, help="runs of two transfers each (default 8)")
    ap.add_argument("--segments", type=int, default=256, help="transfer size in segments (default 256)")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    if a.repeats < 1 or a.segments < 1:
        raise SystemExit("--repeats and --segments must be at least 1")
    rows = measure(a.segments, a.repeats)
    over = np.array([r["over_eq15_s"] for r in rows])
    held = np.array([r["window_held_s"] for r in rows])
    held_any = held > 0
    summary = {"segments": a.segments, "rtt_s": RTT_S, "transfers": len(rows),
               "over_eq15_s_min": float(over.min()), "over_eq15_s_max": float(over.max()),
               "window_held_s_max": float(held.max()), "transfers_held": int(held_any.sum()),
               "over_eq15_s_mean_held": float(over[held_any].mean()) if held_any.any() else None,
               "over_eq15_s_mean_not_held": float(over[~held_any].mean()) if (~held_any).any() else None}
    if a.json:
        print(json.dumps({"rows": rows, "summary": summary}, indent=1))
        return
    t = Table(title=f"d = {a.segments} segments at RTT {RTT_S * 1e3:.0f} ms, IW3: time over eq (15) and time held")
    for c in ("repeat", "class", "transfer (s)", "eq 15 (s)", "over (s)", "held by window (s)"):
        t.add_column(c, justify="right")
    for r in rows:
        t.add_row(str(r["repeat"]), r["class"], f"{r['transfer_s']:.4f}", f"{r['eq15_s']:.4f}",
                  f"{r['over_eq15_s']:+.4f}", f"{r['window_held_s']:.3f}")
    Console().print(t)
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
