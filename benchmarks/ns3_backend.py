"""The ns-3 backend's speed: what a simulation costs, against real time and against the same
network in plain C++ (docs/ns3.md, "Measured").

    .venv/bin/python benchmarks/ns3_backend.py [--no-plain] [--grid DIR]

Prints one table, a row per case (each 300 s simulated, RTT 100 ms, Reno, a 100-packet queue, but for
the papers/004 case):

- the worker's one-time start: importing ns-3, compiling tcpdelay's C++ parts, and the warm-up
  simulation that makes cppyy compile every binding before the worker forks;
- one VoIP flow over TCP at 2 % random loss; VoIP + 5 bulk TCP flows at 3 Mb/s; VoIP + 25 bulk
  at 30 Mb/s; VoIP + 80 bulk at 10 Mb/s (its peak memory is the simulation child's maximum
  resident size, which includes the worker's, since the child is forked from it);
- papers/004's wired dumbbell with its per-host access links: 80 MPEG-4 (TES) flows over TCP on
  their own 10-Mb/s links into a 100-Mb/s bottleneck, 60 s (its peak memory answers "the 80-flow
  papers/004 dumbbell");
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


def _papers004(n_flows: int) -> dict:
    """papers/004's wired dumbbell (Fig 1): every source and sink on its own 10-Mb/s 10-ms access
    link, a 100-Mb/s 25-ms bottleneck with a 150-packet buffer; n MPEG-4 (TES) flows over TCP
    Reno at their fair share of the bottleneck; 60 s, as the paper's runs."""
    return {"name": "ns3-bench-004", "duration_s": 60, "seed": 1,
            "path": {"rate_bps": 100e6, "delay_s": 0.025, "queue_packets": 150},
            "access": {"rate_bps": 10e6, "delay_s": 0.01},
            "flows": [{"name": "mpeg4", "profile": "mpeg4-tes", "rate_bps": 100e6 / n_flows, "count": n_flows,
                       "tcp": {"congestion_control": "reno"}}]}


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
             ("VoIP + 25 bulk, 30 Mb/s", 25, 30e6, 0.0), ("VoIP + 80 bulk, 10 Mb/s", 80, 10e6, 0.0),
             ("papers/004: 80 MPEG-4, access", 80, "004", 0.0)]
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        exe = None if args.no_plain else _plain_binary(work)
        print(f"{'case':30} {'wall s':>8} {'x real time':>12} {'events':>11} {'events/s':>11} "
              f"{'plain C++ events/s':>19} {'backend/plain':>14} {'peak RSS MB':>12}")
        for name, n_bulk, rate, loss in cases:
            data = _papers004(n_bulk) if rate == "004" else _scenario(n_bulk, rate, loss)
            b = _backend(data, work)
            eps = b["events"] / b["sim_wall_s"]
            plain = _plain(exe, n_bulk, rate) if exe is not None and n_bulk and rate != "004" else None
            p_eps = plain["events"] / plain["wall_s"] if plain else None
            print(f"{name:30} {b['sim_wall_s']:8.2f} {data['duration_s'] / b['sim_wall_s']:12.0f} "
                  f"{b['events']:11d} {eps:11.0f} "
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
