#!/usr/bin/env python3
"""Is one of ns-3 CUBIC's parts why it is slow at p = 0.05? (issue 17, papers/001 §IV-A)

ns-3 3.44's ``TcpCubic`` took 19.1 s for 1 MB at p = 0.05, RTT 100 ms (IW10, SACK; the cell of
``experiments/latency-cardwell-loss-iw10.toml``) where its Reno took 10.9 s. This reruns that
cell (``--transfers`` transfers, default 50) with one of CUBIC's parts changed at a time —
HyStart off, fast convergence off, the TCP-friendly region off, β = 0.5 — and with Reno, and
prints each one's mean transfer time and timeouts. ns-3's CUBIC attributes are not scenario
settings (Linux's are module-wide), so the script sets them as ns-3 defaults in the simulation
worker through a ``sitecustomize`` module of its own (a temporary directory on the worker's
``PYTHONPATH`` that wraps ``tcpdelay.sim.ns3_runtime._congestion_attrs``).

Run: .venv/bin/python benchmarks/ns3_cubic_knobs.py [--transfers N] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parents[1]
SCENARIO = ROOT / "experiments" / "latency-cardwell-loss-iw10.toml"
HOOK = '''import os
spec = os.environ.get("TCPDELAY_BENCH_NS3_DEFAULTS")
if spec:
    import tcpdelay.sim.ns3_runtime as rt
    _orig = rt._congestion_attrs
    def _with_defaults(ns, job):
        _orig(ns, job)
        for item in spec.split(","):
            key, value = item.split("=")
            ns.Config.SetDefault(key, ns.BooleanValue(value == "true") if value in ("true", "false")
                                 else ns.DoubleValue(float(value)))
    rt._congestion_attrs = _with_defaults
'''
VARIANTS = (("CUBIC (ns-3's defaults)", "", None),
            ("CUBIC, HyStart off", "ns3::TcpCubic::HyStart=false", None),
            ("CUBIC, fast convergence off", "ns3::TcpCubic::FastConvergence=false", None),
            ("CUBIC, TCP-friendly region off", "ns3::TcpCubic::TcpFriendliness=false", None),
            ("CUBIC, beta 0.5", "ns3::TcpCubic::Beta=0.5", None),
            ("Reno", "", "reno"))


def scenario_text(transfers: int, congestion_control: str | None) -> str:
    text = SCENARIO.read_text()
    text = text.replace('"cross[0].size_bytes" = [65536, 1048576]', '"cross[0].size_bytes" = [1048576]')
    text = text.replace('"path.forward.loss.p" = [0.001, 0.01, 0.05]', '"path.forward.loss.p" = [0.05]')
    text = text.replace("transfers = 100", f"transfers = {transfers}")
    if congestion_control:
        text = text.replace("no_metrics_save = true }", f'no_metrics_save = true, congestion_control = "{congestion_control}" }}')
    return text


def run(name: str, defaults: str, cc: str | None, transfers: int, tmp: Path) -> dict:
    work = tmp / name.replace(" ", "_").replace(",", "").replace("'", "").replace("(", "").replace(")", "")
    work.mkdir()
    toml = work / "scenario.toml"
    toml.write_text(scenario_text(transfers, cc))
    env = {**os.environ, "PYTHONPATH": str(tmp / "hook"), "TCPDELAY_BENCH_NS3_DEFAULTS": defaults}
    out = work / "out"
    subprocess.run([str(Path(sys.executable).with_name("tcpdelay")), "sweep", str(toml), "--backend", "ns3",
                    "--jobs", "1", "--out", str(out)], env=env, check=True, capture_output=True)
    rows = [t for f in out.glob("cells/*/seed-*/run.json")
            for t in json.loads(f.read_text())["run"]["cross"][0]["result"]["transfers"] if t["transfer_s"] is not None]
    times = [t["transfer_s"] for t in rows]
    return {"variant": name, "ns3_defaults": defaults or None, "congestion_control": cc or "cubic",
            "transfers": len(rows), "mean_s": statistics.mean(times),
            "ci95_s": 1.96 * statistics.stdev(times) / len(times) ** 0.5 if len(times) > 1 else None,
            "timeouts_per_transfer": statistics.mean(t["rtos"] for t in rows),
            "retransmits_per_transfer": statistics.mean(t["retransmits"] for t in rows)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--transfers", type=int, default=50)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    if a.transfers < 2:
        raise SystemExit("--transfers must be at least 2")
    con = Console(stderr=True)
    with tempfile.TemporaryDirectory(prefix="tcpdelay-cubic-knobs-") as t:
        tmp = Path(t)
        (tmp / "hook").mkdir()
        (tmp / "hook" / "sitecustomize.py").write_text(HOOK)
        rows = []
        for name, defaults, cc in VARIANTS:
            con.print(f"[dim]{name} ...[/dim]")
            rows.append(run(name, defaults, cc, a.transfers, tmp))
    if a.json:
        print(json.dumps(rows, indent=2))
        return 0
    tab = Table(title=f"ns-3 3.44: 1 MB at p = 0.05, RTT 100 ms, IW10, SACK ({a.transfers} transfers each)",
                title_justify="left")
    for c in ("variant", "mean (s)", "± 95 % (s)", "timeouts / transfer", "retransmits / transfer"):
        tab.add_column(c, justify="right")
    for r in rows:
        tab.add_row(r["variant"], f"{r['mean_s']:.2f}", f"{r['ci95_s']:.2f}", f"{r['timeouts_per_transfer']:.2f}",
                    f"{r['retransmits_per_transfer']:.1f}")
    Console(width=120).print(tab)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
