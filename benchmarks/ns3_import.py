"""How long an ns-3 worker takes to start: the whole PyPI package imported (``from ns import ns``,
every module's headers parsed by cppyy) against the modules a simulation uses
(:mod:`tcpdelay.sim.ns3_import`), each followed by tcpdelay's C++ parts and the worker's warm-up
simulation (:func:`tcpdelay.sim.ns3_runtime.warm_up`). Each arm runs in fresh processes, in an
empty directory (as the worker does); prints wall and CPU seconds (user + system) per arm.

    .venv/bin/python benchmarks/ns3_import.py [--repeat N] [--json]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time

ARMS = {
    "whole package": """
import cppyy
from ns import ns
import tcpdelay.sim.ns3_runtime as R
cppyy.cppdef(R._HEADER.read_text())
R._loaded = (ns, cppyy.gbl.tcpdelay_sim)
""",
    "modules used": """
import tcpdelay.sim.ns3_runtime as R
R.load()
""",
}
TAIL = """
import time
t = time.monotonic()
R.warm_up()
print("warm_up_s", time.monotonic() - t)
"""


def _one(code: str) -> tuple[float, float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.monotonic()
    with tempfile.TemporaryDirectory() as empty:
        subprocess.run([sys.executable, "-c", code + TAIL], cwd=empty, check=True, capture_output=True, text=True)
    wall = time.monotonic() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    out = {}
    for arm, code in ARMS.items():
        runs = [_one(code) for _ in range(args.repeat)]
        out[arm] = {"wall_s": [round(w, 2) for w, _ in runs], "cpu_s": [round(c, 2) for _, c in runs]}
    if args.json:
        print(json.dumps(out, indent=1))
    else:
        for arm, r in out.items():
            print(f"{arm:14s}  wall {' / '.join(f'{w:.1f}' for w in r['wall_s'])} s   "
                  f"CPU {' / '.join(f'{c:.1f}' for c in r['cpu_s'])} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
