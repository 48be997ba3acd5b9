"""Merge sweep directories of one scenario — the shards of ``tcpdelay sweep --shard I/N`` run on
different machines — into one, laid out exactly as a sweep run in one place (``tcpdelay sweep
merge DIR... --out OUT``).

Every source must be a sweep directory of the same scenario: the same cells (ids) and seeds in
its ``sweep.json``. A complete run is copied unless ``OUT`` already holds that run complete; a
failed or unfinished one is not (rerunning the sweep into ``OUT`` runs it). The copy of a run
goes to a temporary name first and is renamed into place, so an interrupted merge leaves no half
run; ``OUT`` can then be resumed, reported and validated like any sweep directory.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from tcpdelay.atomic_file import copy_atomic
from tcpdelay.errors import ParameterError
from tcpdelay.results import layout, markers


@dataclass
class MergeResult:
    out_dir: Path
    sources: list[str]
    copied: int = 0
    already: int = 0
    not_complete: int = 0
    runs: int = 0
    conflicts: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"out_dir": str(self.out_dir), "sources": self.sources, "runs": self.runs, "copied": self.copied,
                "already_complete": self.already, "not_complete": self.not_complete, "conflicts": self.conflicts}


def _index(d: Path) -> dict:
    path = d / layout.SWEEP_INDEX
    if not path.is_file():
        raise ParameterError(f"sweep merge: {d} is not a sweep directory (no {layout.SWEEP_INDEX})")
    try:
        doc = json.loads(path.read_text())
    except ValueError as err:
        raise ParameterError(f"sweep merge: {path}: not readable ({err})") from None
    return doc


def _signature(doc: dict) -> tuple:
    return (tuple(sorted(c["id"] for c in doc.get("cells", []))), tuple(doc.get("seeds", [])))


def merge(sources: list[str | os.PathLike], out_dir: str | os.PathLike) -> MergeResult:
    """Merge the sweep directories ``sources`` into ``out_dir`` (see the module doc)."""
    if not sources:
        raise ParameterError("sweep merge: give at least one sweep directory")
    srcs = [Path(s) for s in sources]
    out = Path(out_dir)
    docs = [_index(s) for s in srcs]
    first = _signature(docs[0])
    for s, doc in zip(srcs[1:], docs[1:]):
        if _signature(doc) != first:
            raise ParameterError(f"sweep merge: {s} holds another sweep than {srcs[0]} (other cells or seeds): "
                                 "merge only the shards of one scenario")
    if (out / layout.SWEEP_INDEX).is_file() and _signature(_index(out)) != first:
        raise ParameterError(f"sweep merge: --out {out} holds another sweep than {srcs[0]}")
    res = MergeResult(out_dir=out, sources=[str(s) for s in srcs])
    out.mkdir(parents=True, exist_ok=True)
    # the sweep's own files, from the first source (every source has the same)
    for name in (layout.SWEEP_INDEX, layout.SCENARIO_FILE):
        if not (out / name).exists() and (srcs[0] / name).exists():
            copy_atomic(srcs[0] / name, out / name)
    for c in docs[0]["cells"]:
        src_cell = layout.cell_dir(srcs[0], c["id"])
        dst_cell = layout.cell_dir(out, c["id"])
        dst_cell.mkdir(parents=True, exist_ok=True)
        for name in (layout.CELL_INDEX, layout.SCENARIO_FILE):
            if not (dst_cell / name).exists() and (src_cell / name).exists():
                copy_atomic(src_cell / name, dst_cell / name)
        for seed in docs[0]["seeds"]:
            res.runs += 1
            dst = layout.run_dir(out, seed, c["id"])
            if markers.is_complete(dst):
                res.already += 1
                continue
            done = [layout.run_dir(s, seed, c["id"]) for s in srcs if markers.is_complete(layout.run_dir(s, seed, c["id"]))]
            if not done:
                res.not_complete += 1
                continue
            if len(done) > 1:
                res.conflicts.append(f"{c['id']}/seed-{seed}: complete in {len(done)} sources; kept {done[0]}")
            tmp = dst.with_name(f".{dst.name}.merging")
            if tmp.exists():
                shutil.rmtree(tmp)
            shutil.copytree(done[0], tmp, ignore=shutil.ignore_patterns(".*"))
            if dst.exists():
                shutil.rmtree(dst)      # an unfinished or failed attempt in OUT: the complete run replaces it
            os.replace(tmp, dst)
            res.copied += 1
    from tcpdelay.results.tidy import write_tidy

    write_tidy(out)
    return res
