"""Bring the ground truth of experiments/model-fidelity-linux.sh (and -classic-guest.sh) from the
clone that measures it into this one, complete runs only, and compare it with the model (no
measuring).

    .venv/bin/python experiments/model-fidelity-collect.py /path/to/measuring-clone [SWEEP ...]

With SWEEP names (e.g. ``fidelity-linux-1pct``) only those are brought (a sweep still being
measured stays behind). Paths in ``validation.json`` are relative to the clone's root, as
``tcpdelay validate`` run from the root writes them.

For each ``results/fidelity-*`` there: the sweep's files, each cell's, and of every run
with ``complete.json`` the files a report and the comparison read (the raw ``sent/``,
``received/`` and queue records stay behind: they are ten times the size). Then
``validation.json``, ``validation.html`` and ``validation-delays.parquet`` are written here as
``tcpdelay validate`` writes them. A run the measuring clone has not finished is not copied, so
the sweep resumes there (or from a fresh clone of this one) without touching what landed.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

KEEP = ("complete.json", "environment.json", "flows.parquet", "metrics.json", "packets.parquet", "run.json",
        "scenario.toml")


def collect(src_root: Path, dst_root: Path, only: list[str] | None = None) -> list[Path]:
    done = []
    for src in sorted((src_root / "results").glob("fidelity-*")):
        if only and src.name not in only:
            continue
        dst = dst_root / "results" / src.name
        dst.mkdir(parents=True, exist_ok=True)
        for name in ("sweep.json", "scenario.toml", "runs.csv", "runs.parquet"):
            if (src / name).is_file():
                shutil.copy2(src / name, dst / name)
        for cell in sorted((src / "cells").glob("*")):
            runs = [r for r in sorted(cell.glob("seed-*")) if (r / "complete.json").is_file()]
            if not runs:
                continue
            out = dst / "cells" / cell.name
            out.mkdir(parents=True, exist_ok=True)
            for name in ("cell.json", "scenario.toml"):
                if (cell / name).is_file():
                    shutil.copy2(cell / name, out / name)
            for run in runs:
                (out / run.name).mkdir(exist_ok=True)
                for name in KEEP:
                    if (run / name).is_file():
                        shutil.copy2(run / name, out / run.name / name)
        done.append(dst)
    return done


def main(argv: list[str]) -> int:
    if not argv or not Path(argv[0]).is_dir():
        print("usage: model-fidelity-collect.py MEASURING_CLONE (a directory) [SWEEP ...]", file=sys.stderr)
        return 2
    src_root, only = Path(argv[0]).resolve(), argv[1:]
    missing = [n for n in only if not (src_root / "results" / n).is_dir()]
    if missing:
        print(f"no such sweep in {src_root / 'results'}: {', '.join(missing)}", file=sys.stderr)
        return 2
    from tcpdelay.cli.validate import evaluate_validation
    from tcpdelay.experiments.validation.writers import write_validation_json

    os.chdir(Path(__file__).resolve().parents[1])   # results/… paths, relative to the root
    for dst in collect(src_root, Path("."), only):
        doc = evaluate_validation(dst, size=f"model fidelity ground truth ({dst.name}, complete runs so far)")
        script = "model-fidelity-classic-guest.sh" if dst.name.startswith("fidelity-classic-guest") \
            else "model-fidelity-linux.sh"
        doc["sweep"] = {"collected_from": f"a measuring clone (experiments/{script})"}
        write_validation_json(dst / "validation.json", doc)
        print(f"{dst}: {len(doc['points'])} points")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
