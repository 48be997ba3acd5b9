"""One-way delay measured across a reference-kernel guest's boundary, against the same run without it.

A VoIP flow (50 packets/s) over a clean path, 20 ms each way, run three ways on the testbed:
both ends in namespaces (this machine's kernel: the reference), the sender on a Debian 6.1 guest
(``[host_kernel] side = "left"``), the receiver on it (``side = "right"``). Prints per way the
delay's mean, median, p95 and standard deviation, the guest clock's stated error and drift, and
how late the first packet left after the run's start. What a guest costs a delay measurement:
the emulated CPU's send or receive latency, on top of the clock offset's error.

    sudo .venv/bin/python benchmarks/guest_run_delay.py [--duration-s 20] [--repeat 2] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import numpy as np

ONE_WAY_S = 0.02


def one_run(side: str | None, duration_s: float, seed: int) -> dict:
    from tcpdelay.experiments.run import run_scenario
    from tcpdelay.experiments.scenario import parse_scenario
    from tcpdelay.records import read_records
    from tcpdelay.results.packets import load_flows

    data = {"name": "guest-delay", "duration_s": duration_s, "path": {"rtt_s": 2 * ONE_WAY_S},
            "flows": [{"profile": "voip"}]}
    if side:
        data["host_kernel"] = {"kernel": "debian-6.1", "side": side}
    with tempfile.TemporaryDirectory() as d:
        out = Path(d)
        totals = run_scenario(parse_scenario(data), seed, out)
        if totals["errors"]:
            raise SystemExit(f"run failed: {totals['errors']}")
        run = json.loads((out / "run.json").read_text())
        flows, _ = load_flows(out)
        delay = flows[0].recv_time_s - flows[0].send_time_s
        delay = delay[~np.isnan(delay)]
        sent = read_records(out, "sent")["send_time_s"].to_numpy()
        guests = (run.get("clock_offset") or {}).get("guests", {})
        g = next(iter(guests.values()), None)
        return {"ends": {None: "namespaces", "left": "sender on the guest", "right": "receiver on the guest"}[side],
                "clock": run["clock"], "packets": int(delay.size),
                "delay_mean_ms": float(delay.mean() * 1e3), "delay_p50_ms": float(np.median(delay) * 1e3),
                "delay_p95_ms": float(np.percentile(delay, 95) * 1e3), "delay_std_ms": float(delay.std() * 1e3),
                "clock_error_us": g["error_s"] * 1e6 if g else None, "drift_ppm": g["drift_ppm"] if g else None,
                "first_packet_late_ms": float((sent.min() - run["run"]["t0_monotonic_s"]) * 1e3)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--duration-s", type=float, default=20.0)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    rows = [one_run(side, a.duration_s, seed) for seed in range(1, a.repeat + 1) for side in (None, "left", "right")]
    if a.json:
        print(json.dumps(rows, indent=1))
        return 0
    print(f"VoIP, {ONE_WAY_S * 1e3:g} ms each way, {a.duration_s:g} s per run")
    print(f"{'ends':24s} {'clock':17s} {'mean':>7s} {'p50':>7s} {'p95':>7s} {'std':>6s} {'clock err':>10s} {'drift':>8s} {'1st late':>9s}")
    for r in rows:
        err = f"{r['clock_error_us']:.0f} us" if r["clock_error_us"] is not None else "-"
        drift = f"{r['drift_ppm']:+.1f} ppm" if r["drift_ppm"] is not None else "-"
        print(f"{r['ends']:24s} {r['clock']:17s} {r['delay_mean_ms']:6.2f}m {r['delay_p50_ms']:6.2f}m "
              f"{r['delay_p95_ms']:6.2f}m {r['delay_std_ms']:5.2f}m {err:>10s} {drift:>8s} {r['first_packet_late_ms']:7.1f}ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
