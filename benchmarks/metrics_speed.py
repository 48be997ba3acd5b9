"""How fast `tcpdelay metrics` digests a run: packets per second of summarize_run (read the
Parquet records, join, every metric) on synthetic CBR runs of growing size, 1 % random loss,
delays 50 ms + exponential(10 ms). Prints one row per size. Timings are wall-clock on this
machine; on a shared machine they are noisy (say so when you quote them).

    .venv/bin/python benchmarks/metrics_speed.py [--sizes 10000 100000 500000]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from tcpdelay.results.runs import summarize_run
from tcpdelay.records import RECEIVED_SCHEMA, SENT_SCHEMA, write_run_metadata


def make_run(run_dir: Path, n: int, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    seq = np.arange(n)
    t = seq * 0.02
    (run_dir / "sent").mkdir(parents=True)
    (run_dir / "received").mkdir()
    sent = pa.table({
        "flow_id": np.zeros(n, np.int32), "connection": np.zeros(n, np.int16), "seq": seq,
        "size_bytes": np.full(n, 172, np.int32), "send_time_s": t, "frame_id": np.full(n, -1),
        "frame_type": pa.array([""] * n), "frame_last": np.ones(n, bool),
        "dropped": np.zeros(n, bool)}, schema=SENT_SCHEMA)
    keep = rng.random(n) > 0.01
    m = int(keep.sum())
    recv = pa.table({
        "flow_id": np.zeros(m, np.int32), "connection": np.zeros(m, np.int16), "seq": seq[keep],
        "size_bytes": np.full(m, 172, np.int32), "send_time_s": t[keep],
        "recv_time_s": t[keep] + 0.05 + rng.exponential(0.01, m)}, schema=RECEIVED_SCHEMA)
    pq.write_table(sent, run_dir / "sent" / "part-bench-000000.parquet")
    pq.write_table(recv, run_dir / "received" / "part-bench-000000.parquet")
    write_run_metadata(run_dir, {"clock": "shared", "duration_s": n * 0.02})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 500_000])
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    print(f"{'packets':>10} {'best s':>8} {'packets/s':>12}")
    for n in args.sizes:
        with tempfile.TemporaryDirectory() as tmp:
            run = Path(tmp) / "run"
            make_run(run, n)
            best = float("inf")
            for _ in range(args.repeat):
                t0 = time.perf_counter()
                summarize_run(run)
                best = min(best, time.perf_counter() - t0)
        print(f"{n:>10} {best:>8.3f} {n / best:>12.0f}")


if __name__ == "__main__":
    main()
