"""Sweeps on Ray (``--engine ray``): what a unit costs in scheduling, and how a sweep of ns-3
units speeds up with workers (docs/scale-out.md, "Measured").

    .venv/bin/python benchmarks/ray_engine.py [--units N] [--ns3-units M]

Each case runs in a process of its own with a fresh local Ray instance (started before the clock
starts: joining a cluster is a one-time cost, printed apart):

- **scheduling overhead per unit**: a sweep of N units whose run does almost nothing (writes one
  small file) on Ray with one CPU, so the units run one after another and the wall time per unit
  is what Ray and the engine add: submitting the task, the worker's call, packing the run
  directory, shipping it back, unpacking it into the sweep and writing the markers; beside it the
  same sweep with ``--engine local`` (one process, no shipping);
- **speed-up**: a sweep of M ns-3 units (VoIP + 3 bulk TCP flows at 10 Mb/s for 60 s, M seeds) on
  Ray with one CPU and with two CPUs (each Ray worker imports ns-3 once, ~7 s), and with the local
  engine in one process for reference.

Wall times are this machine's and vary with its load: rerun to compare. Run it on an otherwise
idle machine (a testbed sweep beside it would lose real time, and slow the figures).
"""

from __future__ import annotations

import argparse
import functools
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TRIVIAL = {
    "name": "ray-overhead", "duration_s": 1, "repetitions": 1,
    "path": {"rtt_s": 0.1},
    "flows": [{"name": "voip", "profile": "voip"}],
    "sweep": {"path.rtt_s": []},
}


def ns3_scenario(units: int) -> dict:
    return {"name": "ray-ns3", "duration_s": 60, "seeds": list(range(1, units + 1)),
            "path": {"rtt_s": 0.1, "rate_bps": 10e6, "queue_packets": 100},
            "flows": [{"name": "voip", "profile": "voip", "transport": "tcp"}],
            "cross": [{"kind": "bulk", "count": 3}]}


def trivial_runner(scenario, seed, run_dir):
    """A unit that measures nothing: one small file."""
    (Path(run_dir) / "note.json").write_text(json.dumps({"rtt_s": scenario.path.rtt_s, "seed": seed}))
    return {}


def one(case: str, units: int, cpus: int, engine: str) -> dict:
    from tcpdelay.experiments.run import run_scenario
    from tcpdelay.experiments.scenario import parse_scenario
    from tcpdelay.experiments.sweep import run_sweep

    if case == "overhead":
        data = {**TRIVIAL, "sweep": {"path.rtt_s": [0.01 + 0.001 * k for k in range(units)]}}
        runner = trivial_runner
    else:
        data = ns3_scenario(units)
        runner = functools.partial(run_scenario, backend="ns3")
    join_s = 0.0
    if engine == "ray":
        import ray

        t = time.monotonic()
        ray.init(num_cpus=cpus, include_dashboard=False, log_to_driver=False, configure_logging=False)
        ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
        join_s = time.monotonic() - t
    with tempfile.TemporaryDirectory() as tmp:
        t = time.monotonic()
        res = run_sweep(parse_scenario(data), Path(tmp) / "out", runner, engine=engine, testbed=False,
                        progress=False)
        wall_s = time.monotonic() - t
    assert res.ran == units and not res.failed, res.to_dict()
    return {"case": case, "engine": engine, "cpus": cpus, "units": units, "join_s": join_s, "wall_s": wall_s}


def run_case(case: str, units: int, cpus: int, engine: str) -> dict:
    out = subprocess.run([sys.executable, __file__, "--one", case, str(units), str(cpus), engine],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--units", type=int, default=40, help="units of the overhead sweep")
    ap.add_argument("--ns3-units", type=int, default=24, help="units of the ns-3 speed-up sweep")
    ap.add_argument("--one", nargs=4, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        case, units, cpus, engine = args.one
        print(json.dumps(one(case, int(units), int(cpus), engine)))
        return 0
    rows = [run_case("overhead", args.units, 1, "local"), run_case("overhead", args.units, 1, "ray"),
            run_case("ns3", args.ns3_units, 1, "local"), run_case("ns3", args.ns3_units, 1, "ray"),
            run_case("ns3", args.ns3_units, 2, "ray")]
    print(f"{'case':10} {'engine':7} {'cpus':>4} {'units':>5} {'join Ray s':>10} {'sweep wall s':>12} {'per unit s':>10}")
    for r in rows:
        print(f"{r['case']:10} {r['engine']:7} {r['cpus']:>4} {r['units']:>5} {r['join_s']:>10.2f} "
              f"{r['wall_s']:>12.2f} {r['wall_s'] / r['units']:>10.3f}")
    local, ray1 = rows[0], rows[1]
    print(f"scheduling overhead per unit on Ray: {(ray1['wall_s'] - local['wall_s']) / ray1['units']:.3f} s "
          f"(Ray's wall per unit {ray1['wall_s'] / ray1['units']:.3f} s, the local engine's "
          f"{local['wall_s'] / local['units']:.3f} s)")
    print(f"ns-3 sweep speed-up, 2 Ray workers over 1: {rows[3]['wall_s'] / rows[4]['wall_s']:.2f}x "
          f"({rows[3]['wall_s']:.1f} s -> {rows[4]['wall_s']:.1f} s; local engine, one process: "
          f"{rows[2]['wall_s']:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
