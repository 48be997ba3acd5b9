"""The ns-3 backend's speed: what a simulation costs, against real time and against the same
network in plain C++ (docs/ns3.md, "Measured").

    .venv/bin/python benchmarks/ns3_backend.py [--no-plain] [--grid DIR]

Prints one table, a row per case (each 300 s simulated; RTT 100 ms; Reno; 100-packet queue):

- the worker's one-time start: importing ns-3, compiling tcpdelay's C++ parts, and the warm-up
  simulation that makes cppyy compile every binding before the worker forks;
- one VoIP flow over TCP at 2 % random loss; VoIP + 5 bulk TCP flows at 3 Mb/s; VoIP + 25 bulk
  at 30 Mb/s; VoIP + 80 bulk at 10 Mb/s (its peak memory is the simulation child's maximum
  resident size, which includes the worker's, since the child is forked from it);
- for the bulk cases, the same network built in plain C++ (benchmarks/ns3_plain/dumbbell.cc,
  compiled here with g++ against the installed ns-3): its events per second, and the backend's
  as a fraction of them (what the Python layer costs: setting up, reading the results, writing
  the records);
- with ``--grid DIR``, the wall time a committed ``validate --backend ns3`` directory recorded.

Wall times are this machine's, and vary with its load: rerun to compare.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _scenario(n_bulk: int, rate_bps: float | None, loss: float) -> dict:
    path = {"rtt_s": 0.1, "queue_packets": 100,
            "loss": {"model": "bernoulli", "p": loss} if loss else {"model": "none"}}
    if rate_bps:
        path["rate_bps"] = rate_bps
    data = {"name": "ns3-bench", "duration_s": 300, "seed": 1, "path": path,
            "flows": [{"name": "voip", "profile": "voip", "tcp": {"congestion_control": "reno"}}]}
    if n_bulk:
        data["cross"] = [{"kind": "bulk", "count": n_bulk, "tcp": {"congestion_control": "reno"}}]
    return data


def _backend(data: dict, work: Path) -> dict:
    from tcpdelay.experiments.run import run_scenario
    from tcpdelay.experiments.scenario import parse_scenario

    out = work / f"run-{time.monotonic_ns()}"
    t = time.monotonic()
    run_scenario(parse_scenario(data), 1, out, backend="ns3")
    whole = time.monotonic() - t
    res = json.loads((out / "result.json").read_text())
    shutil.rmtree(out, ignore_errors=True)
    return {"events": res["events"], "sim_wall_s": res["wall_s"], "run_wall_s": whole,
            "peak_rss_bytes": res.get("peak_rss_bytes"), "simulated_s": res["simulated_s"]}


def _plain_binary(work: Path) -> Path | None:
    import importlib.util

    ns_dir = Path(list(importlib.util.find_spec("ns3").submodule_search_locations)[0])
    libs = sorted(p.name for p in (ns_dir / "lib64").glob("libns3.44-*.so"))
    exe = work / "dumbbell"
    cmd = ["g++", "-std=c++20", "-O2", f"-I{ns_dir / 'include'}", f"-I{ROOT / 'src/tcpdelay/sim/cpp'}",
           str(ROOT / "benchmarks/ns3_plain/dumbbell.cc"), "-o", str(exe), f"-L{ns_dir / 'lib64'}",
           *[f"-l{n[3:-3]}" for n in libs], f"-Wl,-rpath,{ns_dir / 'lib64'}"]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        print(f"(plain C++ not built: {proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else 'g++ failed'})")
        return None
    return exe


def _plain(exe: Path, n_bulk: int, rate_bps: float) -> dict:
    out = subprocess.run([str(exe), str(n_bulk), str(rate_bps), "300"], capture_output=True, text=True, check=True).stdout
    words = out.split()
    return {"events": int(words[words.index("events") + 1]), "wall_s": float(words[words.index("wall_s") + 1])}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--no-plain", action="store_true", help="skip the plain C++ comparison")
    ap.add_argument("--grid", type=Path, help="a validate --backend ns3 directory: print its wall time")
    args = ap.parse_args(argv)
    from tcpdelay.sim.worker import shared_worker

    t = time.monotonic()
    worker = shared_worker()
    print(f"worker start: {time.monotonic() - t:.1f} s (import ns-3 and compile the C++ parts "
          f"{worker.import_s:.1f} s, warm-up simulation {worker.warm_up_s:.1f} s; once per process)")
    cases = [("VoIP, 2 % loss", 0, None, 0.02), ("VoIP + 5 bulk, 3 Mb/s", 5, 3e6, 0.0),
             ("VoIP + 25 bulk, 30 Mb/s", 25, 30e6, 0.0), ("VoIP + 80 bulk, 10 Mb/s", 80, 10e6, 0.0)]
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        exe = None if args.no_plain else _plain_binary(work)
        print(f"{'case':26} {'wall s':>8} {'x real time':>12} {'events':>11} {'events/s':>11} "
              f"{'plain C++ events/s':>19} {'backend/plain':>14} {'peak RSS MB':>12}")
        for name, n_bulk, rate, loss in cases:
            b = _backend(_scenario(n_bulk, rate, loss), work)
            eps = b["events"] / b["sim_wall_s"]
            plain = _plain(exe, n_bulk, rate) if exe is not None and n_bulk else None
            p_eps = plain["events"] / plain["wall_s"] if plain else None
            print(f"{name:26} {b['sim_wall_s']:8.2f} {300 / b['sim_wall_s']:12.0f} {b['events']:11d} {eps:11.0f} "
                  f"{(f'{p_eps:19.0f}' if p_eps else '                  -')} "
                  f"{(f'{eps / p_eps:14.2f}' if p_eps else '             -')} "
                  f"{(b['peak_rss_bytes'] or 0) / 2**20:12.0f}")
    if args.grid:
        doc = json.loads((args.grid / "validation.json").read_text())
        sweep = doc.get("sweep") or {}
        print(f"{args.grid}: {sweep.get('ran')} runs measured in {sweep.get('wall_s', 0) / 60:.1f} min "
              f"({doc.get('size')})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
