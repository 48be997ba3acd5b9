"""CPU seconds of a validation rerun on committed results: the ``tcpdelay validate`` command
results/README.md gives for a committed result directory, on a copy of it (its raw
``sent``/``received``/``flows`` records left out, as tests/results/test_results_walk.py copies
it), so every run is re-read from its kept packets rather than measured again. Prints the
arguments, CPU seconds of this process (and of any children) and wall-clock seconds. CPU time is less noisy than wall-clock on a shared machine, but still varies
by a few per cent from run to run.

    .venv/bin/python benchmarks/validate_rerun_speed.py [results/validate-full-ns3] [--repeat 1]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import re
import resource
import shlex
import shutil
import tempfile
import time
from pathlib import Path


def validate_args(result_dir: Path) -> list[str]:
    """The ``tcpdelay validate`` arguments (without ``--out``) of ``result_dir``'s row in the
    README.md beside it (results/README.md)."""
    readme = (result_dir.resolve().parent / "README.md").read_text()
    row = next(line for line in readme.splitlines() if line.startswith(f"| `{result_dir.name}/` |"))
    cmd = re.search(r"`(?:sudo )?\S*tcpdelay validate ([^`]*)`", row)
    args = shlex.split(cmd.group(1))
    i = args.index("--out")
    return args[:i] + args[i + 2:]


def cpu_s() -> float:
    """CPU seconds (user + system) of this process and its waited-for children so far."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def rerun_once(result_dir: Path, args: list[str]) -> tuple[float, float]:
    """``(cpu_s, wall_s)`` of one validate rerun on a fresh copy of ``result_dir``."""
    from tcpdelay.cli import main

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / result_dir.name
        shutil.copytree(result_dir, out, ignore=shutil.ignore_patterns("sent", "received", "flows"))
        argv = ["validate", *args, "--out", str(out), "--json"]
        c0, w0 = cpu_s(), time.perf_counter()
        try:
            with contextlib.redirect_stdout(io.StringIO()):  # the --json document
                main(argv)
        except SystemExit as e:  # click's standalone mode exits
            if e.code not in (0, None):
                raise
        return cpu_s() - c0, time.perf_counter() - w0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("result_dir", nargs="?", default="results/validate-full-ns3", type=Path)
    ap.add_argument("--repeat", type=int, default=1)
    args = ap.parse_args()
    vargs = validate_args(args.result_dir)
    print(f"tcpdelay validate {shlex.join(vargs)} --out <copy of {args.result_dir}> --json")
    rows = [rerun_once(args.result_dir, vargs) for _ in range(args.repeat)]
    for i, (c, w) in enumerate(rows, start=1):
        print(f"run {i}: {c:.2f} s CPU, {w:.2f} s wall")
    if len(rows) > 1:
        print(f"best: {min(c for c, _ in rows):.2f} s CPU")


if __name__ == "__main__":
    main()
