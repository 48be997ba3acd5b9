"""One tidy table per sweep: a row per run with its parameters and headline figures, as Parquet
and CSV (``runs.parquet``, ``runs.csv`` in the sweep directory), for pandas users and
spreadsheets. Written at the end of every ``tcpdelay sweep`` and ``sweep merge``; rebuilt from
the runs' markers, so it is never the only copy of anything.

Columns: ``cell_id``, ``seed``, ``status`` (``complete``, ``failed``, ``missing``), one
``param:<key>`` column per swept key (its value; a table as JSON text), ``wall_s``, and from
each complete run's summary: ``media_flows``, ``packets_sent``, ``packets_received``,
``delay_mean_s`` (mean over the run's media flows), ``delay_p95_s`` (the largest of the flows'),
``loss_rate`` (mean over the flows), ``drops_a_to_b``, ``drops_b_to_a`` (the link's drops),
``error`` (a failed run's).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from tcpdelay.atomic_file import write_atomic
from tcpdelay.results import layout, markers

TIDY_PARQUET = "runs.parquet"
TIDY_CSV = "runs.csv"


def _mean(xs):
    xs = [x for x in xs if x is not None]
    return sum(xs) / len(xs) if xs else None


def _param(v):
    return json.dumps(v, sort_keys=True) if isinstance(v, (dict, list)) else v


def tidy_rows(out_dir: str | os.PathLike) -> list[dict]:
    """The rows of the sweep in ``out_dir`` (grid order, then seed)."""
    out = Path(out_dir)
    index = json.loads((out / layout.SWEEP_INDEX).read_text())
    keys = sorted({k for c in index["cells"] for k in c["overrides"]})
    rows = []
    for c in index["cells"]:
        for seed in index["seeds"]:
            rd = layout.run_dir(out, seed, c["id"])
            st = markers.read_status(rd)
            row = {"cell_id": c["id"], "seed": seed, "status": st.status if st.status in ("complete", "failed") else "missing"}
            for k in keys:
                row[f"param:{k}"] = _param(c["overrides"].get(k))
            s = (st.summary or {}) if st.status == "complete" else {}
            flows = s.get("flows") or []
            drops = s.get("link_drops") or {}
            row.update({
                "wall_s": st.wall_s,
                "media_flows": s.get("media_flows"), "packets_sent": s.get("packets_sent"),
                "packets_received": s.get("packets_received"),
                "delay_mean_s": _mean(f.get("delay_mean_s") for f in flows),
                "delay_p95_s": max((f["delay_p95_s"] for f in flows if f.get("delay_p95_s") is not None), default=None),
                "loss_rate": _mean(f.get("loss_rate") for f in flows),
                "drops_a_to_b": (drops.get("a_to_b") or {}).get("total"),
                "drops_b_to_a": (drops.get("b_to_a") or {}).get("total"),
                "error": st.error if st.status == "failed" else None,
            })
            rows.append(row)
    return rows


def write_tidy(out_dir: str | os.PathLike) -> tuple[Path, Path]:
    """Write ``runs.parquet`` and ``runs.csv`` of the sweep in ``out_dir``; returns their paths."""
    out = Path(out_dir)
    rows = tidy_rows(out)
    columns: dict[str, list] = {}
    for r in rows:
        for k in r:
            columns.setdefault(k, [])
    for r in rows:
        for k in columns:
            columns[k].append(r.get(k))
    # a parameter column mixing types (numbers and tables) is written as text
    arrays = {}
    for k, v in columns.items():
        try:
            arrays[k] = pa.array(v)
        except (pa.ArrowInvalid, pa.ArrowTypeError):
            arrays[k] = pa.array([None if x is None else json.dumps(x) if not isinstance(x, str) else x for x in v])
    table = pa.table(arrays)
    write_atomic(out / TIDY_PARQUET, lambda tmp: pq.write_table(table, tmp))
    write_atomic(out / TIDY_CSV, lambda tmp: pacsv.write_csv(table, tmp))
    return out / TIDY_PARQUET, out / TIDY_CSV
