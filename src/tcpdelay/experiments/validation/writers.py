"""The validation's files beside its sweep: ``validation.json`` (the whole comparison) and
``validation-delays.parquet`` (every measured packet's delay, enough to redraw the CDFs)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from tcpdelay.atomic_file import write_atomic
from tcpdelay.jsonio import jsonable, write_json

#: The comparison as JSON (docs/cli.md lists its keys).
VALIDATION_FILE = "validation.json"
#: Every measured packet's delay, one small file (the run directories' records are the source).
DELAYS_FILE = "validation-delays.parquet"


def write_validation_json(path: str | os.PathLike, doc: dict) -> Path:
    """``doc`` as plain JSON (NumPy values unwrapped, non-finite floats as null), written whole
    or not at all."""
    write_json(path, jsonable(doc))
    return Path(path)


def write_delays(path: Path, points: list[dict]) -> Path:
    """One row per media packet of every point: ``profile, stack, rtt_s, loss, seed, delay_s``
    (NaN: never received) — enough to redraw the CDFs and recompute the statistics without the
    per-run record sets."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    labels: dict[str, dict[str, int]] = {"profile": {}, "stack": {}}  # label -> its index
    codes: dict[str, list] = {"profile": [], "stack": []}
    cols: dict[str, list] = {k: [] for k in ("rtt_s", "loss", "seed", "delay_s")}
    for p in points:
        d = p.get("_delays")
        if d is None:
            continue
        n = d.size
        for k in codes:
            codes[k].append(np.full(n, labels[k].setdefault(p[k], len(labels[k])), dtype=np.int32))
        cols["rtt_s"].append(np.full(n, p["rtt_s"], dtype=float))
        cols["loss"].append(np.full(n, p["loss"], dtype=float))
        cols["seed"].append(np.asarray(p["_seeds"], dtype=np.int64))
        cols["delay_s"].append(np.asarray(d, dtype=float))
    types = {"rtt_s": pa.float64(), "loss": pa.float64(), "seed": pa.int64(), "delay_s": pa.float64()}
    # the label columns as plain strings, expanded from their few distinct values in Arrow
    # (a NumPy array of Python strings per packet took most of this function's time)
    table = pa.table({
        **{k: pa.array(list(labels[k]), type=pa.string()).take(
            pa.array(np.concatenate(codes[k]) if codes[k] else np.zeros(0, np.int32))) for k in codes},
        **{k: pa.array(np.concatenate(v) if v else [], type=types[k]) for k, v in cols.items()}})
    return write_atomic(path, lambda tmp: pq.write_table(table, tmp, compression="zstd"))  # whole or not at all
