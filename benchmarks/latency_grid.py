"""How fast the latency model evaluates a grid: expected latency (handshake + eq 25 of Cardwell,
Savage, Anderson, "Modeling TCP Latency") for N = 10^6 (size, loss, RTT) combinations in one
vectorised call of :func:`tcpdelay.model.latency.expected_latency_s`, defaults otherwise
(w1 = 10, b = 1, T0 = RTT + 200 ms, no window limit, Linux handshake).

The grid is 100 sizes (1 KB .. 100 MB, log-spaced) x 100 loss rates (0 and 1e-5 .. 0.3) x
100 RTTs (1 ms .. 1 s). Prints the best and median of several repetitions, and the time of the
scalar :func:`tcpdelay.model.latency.latency` (mean + percentiles) for one path. Timings are
wall-clock on this machine; on a shared machine they are noisy (say so when you quote them).

    .venv/bin/python benchmarks/latency_grid.py [--points 100] [--repeat 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np

from tcpdelay.model.latency import expected_latency_s, latency


def grid(points: int):
    sizes = np.logspace(3, 8, points)[:, None, None]
    losses = np.concatenate([[0.0], np.logspace(-5, np.log10(0.3), points - 1)])[None, :, None]
    rtts = np.logspace(-3, 0, points)[None, None, :]
    return np.broadcast_arrays(sizes, losses, rtts)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--points", type=int, default=100, help="values per axis (N = points^3)")
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()

    size, loss, rtt = (a.ravel().copy() for a in grid(args.points))
    n = size.size
    times = []
    for _ in range(args.repeat):
        t = time.perf_counter()
        out = expected_latency_s(size, rtt, loss)
        times.append(time.perf_counter() - t)
    assert out.shape == (n,) and np.isfinite(out).all()

    scalar = []
    for _ in range(max(args.repeat, 20)):
        t = time.perf_counter()
        latency(1e6, 0.1, 0.01)
        scalar.append(time.perf_counter() - t)

    load = os.getloadavg()[0]
    print(f"{'what':<44} {'N':>10} {'best_s':>9} {'median_s':>9} {'per_point_ns':>12}")
    print(f"{'expected_latency_s (handshake + eq 25)':<44} {n:>10} {min(times):>9.3f} "
          f"{statistics.median(times):>9.3f} {min(times) / n * 1e9:>12.1f}")
    print(f"{'latency() one path, mean + percentiles':<44} {1:>10} {min(scalar):>9.4f} "
          f"{statistics.median(scalar):>9.4f} {min(scalar) * 1e9:>12.0f}")
    print(f"target: N = 10^6 in < 2 s; {os.cpu_count()} CPUs, 1-min load average {load:.2f} "
          f"({'shared, timings noisy' if load > 1 else 'quiet'})")


if __name__ == "__main__":
    main()
