"""ns-3 against the testbed (and both against the model) on the §5.1 grid of Brosh et al., *The
Delay-Friendliness of TCP for Real-Time Traffic*: every point both validated, side by side —
mean, p95 and std of the delay, TCP retransmissions and timeouts — from two committed
``tcpdelay validate`` directories (the testbed's ``results/validate-grid``, ns-3's
``results/validate-grid-ns3``: the same grid, size and seeds).

    .venv/bin/python benchmarks/ns3_vs_testbed.py [TESTBED_DIR NS3_DIR] [--markdown]

Prints the table (``--markdown``: the table docs/experiments/ns3-vs-testbed.md holds, between its
``<!-- table -->`` markers) and, per RTT, the median of |ns-3 − testbed| / testbed of the mean.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _key(p: dict) -> tuple:
    return (p["profile"], p["stack"], p["rtt_s"], p["loss"])


def pairs(testbed_dir: Path, ns3_dir: Path) -> list[tuple[dict, dict]]:
    """(testbed point, ns-3 point) for every point both directories hold, in grid order."""
    tb = {_key(p): p for p in json.loads((testbed_dir / "validation.json").read_text())["points"]}
    ns = json.loads((ns3_dir / "validation.json").read_text())["points"]
    return [(tb[_key(p)], p) for p in sorted(ns, key=_key) if _key(p) in tb]


def _ms(x) -> str:
    return "—" if x is None else f"{x * 1e3:.1f}"


def _model(p: dict, k: str):
    m = p["model"]
    return None if m.get("unstable") else m.get(k)


def table(rows: list[tuple[dict, dict]]) -> str:
    out = ["| point | mean ms: testbed / ns-3 / model | p95 ms | std ms | retransmissions: testbed / ns-3 | timeouts |",
           "|---|---|---|---|---|---|"]
    for t, n in rows:
        tm, nm = t["measured"], n["measured"]
        cells = [f"{n['profile']} {n['rtt_s'] * 1e3:g} ms {n['loss'] * 100:g} %"]
        for k in ("mean_s", "p95_s", "std_s"):
            cells.append(f"{_ms(tm[k])} / {_ms(nm[k])} / {_ms(_model(n, k))}")
        cells.append(f"{tm['tcp_retransmissions']} / {nm['tcp_retransmissions']}")
        cells.append(f"{tm['tcp_rtos']} / {nm['tcp_rtos']}")
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out)


def summary(rows: list[tuple[dict, dict]]) -> dict:
    """Per RTT: median |ns-3 − testbed| / testbed of the mean delay, and of the retransmissions."""
    by: dict[float, list] = {}
    for t, n in rows:
        by.setdefault(n["rtt_s"], []).append((t["measured"], n["measured"]))
    out = {}
    for rtt, ms in sorted(by.items()):
        out[rtt] = {
            "points": len(ms),
            "median_rel_diff_mean": statistics.median(abs(n["mean_s"] - t["mean_s"]) / t["mean_s"] for t, n in ms),
            "retransmissions_testbed": sum(t["tcp_retransmissions"] for t, _ in ms),
            "retransmissions_ns3": sum(n["tcp_retransmissions"] for _, n in ms),
            "timeouts_testbed": sum(t["tcp_rtos"] for t, _ in ms),
            "timeouts_ns3": sum(n["tcp_rtos"] for _, n in ms),
        }
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dirs", nargs="*", type=Path,
                    default=[ROOT / "results" / "validate-grid", ROOT / "results" / "validate-grid-ns3"])
    ap.add_argument("--markdown", action="store_true", help="print only the markdown table")
    args = ap.parse_args(argv)
    if len(args.dirs) != 2:
        print("ns3_vs_testbed.py: give two directories (the testbed's and ns-3's) or none", file=sys.stderr)
        return 2
    rows = pairs(*args.dirs)
    print(table(rows))
    if not args.markdown:
        for rtt, s in summary(rows).items():
            print(f"RTT {rtt * 1e3:g} ms: {s['points']} points; median |ns-3 - testbed| / testbed of the mean "
                  f"{s['median_rel_diff_mean'] * 100:.0f} %; retransmissions {s['retransmissions_testbed']} / "
                  f"{s['retransmissions_ns3']}; timeouts {s['timeouts_testbed']} / {s['timeouts_ns3']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
