"""What ns-3 3.44's TcpVegas carries alone on an idle path: one unlimited bulk flow over 10 Mb/s
with RTT 90 ms (papers/004's wired access link and round trip), Vegas beside Reno, 20 s. Plain
script; prints the goodputs. (docs/experiments/mpeg4-transport.md: why Vegas trails in ns-3.)

    .venv/bin/python benchmarks/ns3_vegas_idle_path.py
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pyarrow.parquet as pq

from tcpdelay.experiments.run import run_scenario
from tcpdelay.experiments.scenario import parse_scenario


def main() -> None:
    print("| variant | goodput Mb/s (10 Mb/s link, RTT 90 ms, alone, 20 s) |")
    print("|---|---|")
    for cc in ("vegas", "reno"):
        data = {"duration_s": 20, "tcp_state_period_s": 0,
                "path": {"rate_bps": 10e6, "delay_s": 0.045, "queue_packets": 150},
                "cross": [{"kind": "bulk", "count": 1, "tcp": {"congestion_control": cc}}]}
        with tempfile.TemporaryDirectory() as tmp:
            run_scenario(parse_scenario(data), 1, Path(tmp), backend="ns3")
            (flow,) = pq.read_table(Path(tmp) / "flows.parquet").to_pylist()
        print(f"| {cc} | {flow['goodput_bps'] / 1e6:.2f} |")


if __name__ == "__main__":
    main()
