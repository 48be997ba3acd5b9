"""Benchmark of model-only advice (``tcpdelay advise``; issue 16: answers in < 2 s): the time of
:func:`tcpdelay.experiments.advice_measurement.advise` on the issue's paths and of the whole
command (a fresh ``python -m tcpdelay advise --json``, imports included). Plain script; prints its figures.

    .venv/bin/python benchmarks/advise_speed.py [--repeat 3]

The machine may be shared: the load average is printed with the figures, before and after, and
the CPU time of ``advise()`` beside its wall time (the CPU time moves less with other jobs' load;
with a threaded BLAS it can exceed the wall time).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

CASES = [
    # (label, profile, rtt_s, loss, loss_model)
    ("voip  RTT 100 ms, 2 %", "voip", 0.1, 0.02, "random"),
    ("video RTT 300 ms, 0.5 %", "video", 0.3, 0.005, "random"),
    ("ivideo RTT 100 ms, 1 %", "ivideo", 0.1, 0.01, "random"),
    ("video RTT 300 ms, 0.5 %, correlated loss", "video", 0.3, 0.005, "correlated"),
]
TARGET_S = 2.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    from tcpdelay.experiments.advice_measurement import advise
    from tcpdelay.model.advice_ranking import Budget
    from tcpdelay.model.delay import get_profile

    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs; target < {TARGET_S:g} s")
    print("| case | advise() median s | advise() median CPU s | command median s (fresh process) | options | first |")
    print("|---|---|---|---|---|---|")
    for label, profile, rtt, loss, model in CASES:
        crit = get_profile(profile).criterion
        b = Budget.from_percentile(crit.percentile, crit.bound_s)
        inner, cpu, res = [], [], None
        for _ in range(a.repeat):
            t, c = time.perf_counter(), time.process_time()
            res = advise(profile, rtt_s=rtt, loss=loss, budget=b, loss_model=model)
            inner.append(time.perf_counter() - t)
            cpu.append(time.process_time() - c)
        outer = []
        for _ in range(a.repeat):
            t = time.perf_counter()
            subprocess.run([sys.executable, "-m", "tcpdelay", "advise", "--profile", profile, "--rtt-s", str(rtt),
                            "--loss", str(loss), "--loss-model", model, "--json"], check=True, capture_output=True)
            outer.append(time.perf_counter() - t)
        print(f"| {label} | {statistics.median(inner):.2f} | {statistics.median(cpu):.2f} | "
              f"{statistics.median(outer):.2f} | {len(res['options'])} | {res['options'][0]['name']} |")
    print(f"load average {os.getloadavg()[0]:.2f} after")


if __name__ == "__main__":
    main()
