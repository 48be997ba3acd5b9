"""The tables of one or more results directories as CSV (``tcpdelay report --csv DIR``), for
people who plot elsewhere.

Three files in ``DIR`` (written under a temporary name, then renamed), every row naming where it
comes from — ``results`` (the directory's label: ``--label`` or its name), ``cell_id``, one
column per cell parameter (the cell's overrides flattened, :mod:`tcpdelay.report.cell_keys`;
empty where a cell does not set it) and, per run, ``seed``:

- ``packets.csv``: one row per media packet of every complete run, from the run's packet records
  (``sent/``/``received/`` or ``packets.parquet``, :mod:`tcpdelay.results.packets`): ``flow_id,
  flow, source, seq, size_bytes, send_time_s, delay_s, dropped, connection, frame_id,
  frame_type, frame_last``. ``source`` is ``records`` or ``delays`` (a run that kept only its
  packets' delays: the other columns empty). ``send_time_s`` is from the run's first packet;
  ``delay_s`` is empty for a packet never received.
- ``flows.csv``: one row per flow of every complete run — the run's ``flows.parquet`` (every
  flow, cross traffic too) and, for media flows, the run's metrics (loss, delay statistics,
  jitter, MOS, TCP retransmissions, and goodput as the metrics define it, the value cells.csv
  joins).
- ``cells.csv``: one row per cell and media flow, its repetitions joined as ``tcpdelay report``
  joins them (:func:`tcpdelay.results.aggregate_cell`), in the keys of the comparison's JSON.

Times in seconds, rates in bit/s, fractions 0..1, as the column names say.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv

from tcpdelay.errors import ParameterError
from tcpdelay.report.cell_keys import flat_params
from tcpdelay.report.compare import COMPARED_METRICS, Side, load_sides

__all__ = ["CELL_COLUMNS", "FLOW_COLUMNS", "PACKET_COLUMNS", "export_csv"]

#: Columns of packets.csv after the identifying ones.
PACKET_COLUMNS: tuple[tuple[str, pa.DataType], ...] = (
    ("flow_id", pa.int64()), ("flow", pa.string()), ("source", pa.string()), ("seq", pa.int64()),
    ("size_bytes", pa.int64()), ("send_time_s", pa.float64()), ("delay_s", pa.float64()),
    ("dropped", pa.bool_()), ("connection", pa.int64()), ("frame_id", pa.int64()),
    ("frame_type", pa.string()), ("frame_last", pa.bool_()))

#: Columns of flows.csv after the identifying ones: flows.parquet's, then the media flows' metrics.
FLOW_COLUMNS: tuple[tuple[str, pa.DataType], ...] = (
    ("flow_id", pa.int64()), ("flow", pa.string()), ("kind", pa.string()), ("direction", pa.string()),
    ("transport", pa.string()), ("status", pa.string()), ("start_s", pa.float64()),
    ("packets_sent", pa.int64()), ("packets_received", pa.int64()), ("bytes_received", pa.int64()),
    ("goodput_bps", pa.float64()), ("loss_rate", pa.float64()), ("delay_mean_s", pa.float64()),
    ("delay_std_s", pa.float64()), ("delay_p50_s", pa.float64()), ("delay_p95_s", pa.float64()),
    ("delay_p99_s", pa.float64()), ("delay_max_s", pa.float64()), ("jitter_rfc3550_s", pa.float64()),
    ("mos", pa.float64()), ("tcp_retransmissions", pa.int64()))

#: Columns of cells.csv after the identifying ones.
CELL_COLUMNS: tuple[tuple[str, pa.DataType], ...] = (
    ("flow_id", pa.int64()), ("flow", pa.string()), ("runs", pa.int64()), ("pooled", pa.bool_()),
    ("packets", pa.int64()), ("received", pa.int64()),
    *((c.key, pa.float64()) for c in COMPARED_METRICS))

_ID = (("results", pa.string()), ("cell_id", pa.string()))


def _param_text(v: object) -> str:
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, int | float | str):
        return str(v)
    return json.dumps(v, default=str)


class _Csv:
    """One CSV file written table by table under a temporary name, renamed when complete."""

    def __init__(self, path: Path, schema: pa.Schema):
        self.path = path
        self.schema = schema
        fd, self.tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}-", suffix=".csv")
        os.close(fd)
        self.writer = pacsv.CSVWriter(self.tmp, schema)
        self.rows = 0

    def write(self, columns: dict[str, object], n: int) -> None:
        if n:
            self.writer.write_table(pa.table({f.name: _column(columns.get(f.name), f.type, n) for f in self.schema},
                                             schema=self.schema))
            self.rows += n

    def close(self) -> dict:
        self.writer.close()
        os.chmod(self.tmp, 0o644)
        os.replace(self.tmp, self.path)
        return {"path": str(self.path), "rows": self.rows}

    def abort(self) -> None:
        try:
            self.writer.close()
        finally:
            Path(self.tmp).unlink(missing_ok=True)


def _column(v: object, dtype: pa.DataType, n: int) -> pa.Array:
    """A column of ``n`` values: None (all null), one value repeated, or an array (NaN -> null)."""
    if v is None:
        return pa.nulls(n, dtype)
    if isinstance(v, np.ndarray | list):
        a = np.asarray(v)
        if a.dtype.kind == "f" and pa.types.is_floating(dtype):
            return pa.array(a, dtype, mask=~np.isfinite(a))
        return pa.array(a.tolist() if a.dtype.kind in "OU" else a, dtype)
    if isinstance(v, float) and not np.isfinite(v):
        return pa.nulls(n, dtype)
    return pa.array([v] * n, dtype)


def _num(v: object) -> float | None:
    return None if v is None else float(v)


def export_csv(paths: Sequence[str | os.PathLike], out_dir: str | os.PathLike,
               labels: Sequence[str] | None = None,
               progress: Callable[[int, int | None], None] | None = None) -> dict:
    """Write packets.csv, flows.csv and cells.csv of ``paths`` into ``out_dir`` (created when
    its parent exists). Returns ``{csv_dir, results: [{label, results}], files: {packets, flows,
    cells: {path, rows}}}``."""
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise ParameterError(f"--csv: {str(out)!r} is a file; give a directory (created if missing)")
    if not out.absolute().parent.is_dir():
        raise ParameterError(f"--csv: {str(out.absolute().parent)!r} does not exist "
                             "(only the last folder of --csv is created)")
    sides = load_sides(paths, labels, progress)
    params: list[str] = []
    for s in sides:
        for c in s.results.cells:
            params.extend(k for k in flat_params(c.overrides) if k not in params)
    fixed = {n for n, _ in (*_ID, ("seed", None), *PACKET_COLUMNS, *FLOW_COLUMNS, *CELL_COLUMNS)}
    pcols = {k: (k if k not in fixed else f"param:{k}") for k in params}
    head = [pa.field(n, t) for n, t in _ID] + [pa.field(pcols[k], pa.string()) for k in params]
    seed = [pa.field("seed", pa.int64())]
    try:
        out.mkdir(exist_ok=True)
    except OSError as err:
        raise ParameterError(f"--csv: cannot create {str(out)!r}: {err.strerror or err}") from None
    files: dict[str, _Csv] = {}
    try:
        files["packets"] = _Csv(out / "packets.csv", pa.schema(head + seed + [pa.field(n, t) for n, t in PACKET_COLUMNS]))
        files["flows"] = _Csv(out / "flows.csv", pa.schema(head + seed + [pa.field(n, t) for n, t in FLOW_COLUMNS]))
        files["cells"] = _Csv(out / "cells.csv", pa.schema(head + [pa.field(n, t) for n, t in CELL_COLUMNS]))
        for s in sides:
            _write_side(s, files, pcols)
        written = {k: f.close() for k, f in files.items()}
    except OSError as err:
        for f in files.values():
            f.abort()
        raise ParameterError(f"--csv: cannot write into {str(out)!r}: {err.strerror or err}") from None
    except BaseException:
        for f in files.values():
            f.abort()
        raise
    return {"csv_dir": str(out.absolute()), "results": [{"label": s.label, "results": str(s.results.path)} for s in sides],
            "files": written}


def _write_side(side: Side, files: dict[str, _Csv], pcols: dict[str, str]) -> None:
    from tcpdelay.results.runs import flow_rows

    for cell in side.results.cells:
        ident = {"results": side.label, "cell_id": cell.id,
                 **{pcols[k]: _param_text(v) for k, v in flat_params(cell.overrides).items()}}
        jain = side.jain.get(cell.id)
        for a in side.aggs.get(cell.id, []):
            files["cells"].write({**ident, "flow_id": a["flow_id"], "flow": a["name"], "runs": a["runs"],
                                  "pooled": a["pooled"], "packets": a["packets"], "received": a["received"],
                                  **{c.key: _num(c.value(a, jain)) for c in COMPARED_METRICS}}, 1)
        for run in cell.runs:
            if run.status != "complete":
                continue
            rid = {**ident, "seed": run.seed}
            _write_packets(run.run_dir, {f.flow_id: f.name for f in run.flows}, rid, files["packets"])
            media = {f.flow_id: f for f in run.flows}
            try:
                rows = flow_rows(run.run_dir) if (run.run_dir / "flows.parquet").is_file() else []
            except (OSError, ValueError, pa.ArrowException):
                rows = []  # a damaged flows.parquet: the media flows from the packets only
            seen = set()
            for r in rows:
                fid = int(r["flow_id"])
                seen.add(fid)
                files["flows"].write({**rid, **_flow_metrics(media.get(fid)), "flow_id": fid, "flow": r.get("name"),
                                      **{k: r.get(k) for k in ("kind", "direction", "transport", "status", "start_s",
                                                               "packets_sent", "packets_received", "bytes_received")},
                                      "goodput_bps": _goodput(media.get(fid), r.get("goodput_bps"))}, 1)
            for fid, f in media.items():
                if fid not in seen:
                    files["flows"].write({**rid, **_flow_metrics(f), "flow_id": fid, "flow": f.name, "kind": "media",
                                          "goodput_bps": f.metrics.get("goodput_bps")}, 1)


def _goodput(media_flow, recorded: float | None) -> float | None:
    """flows.csv's goodput: a media flow's as its metrics (and cells.csv, report, metrics) have
    it — original data, without RTP headers, over the connection time (Papadimitriou &
    Tsaoussidis §3.2); flows.parquet's (every byte received over the sender's elapsed time) only
    for another flow, or a media flow without it."""
    g = media_flow.metrics.get("goodput_bps") if media_flow is not None else None
    return g if g is not None else recorded


def _flow_metrics(f) -> dict:
    """A media flow's per-run metrics in flows.csv's columns ({} for any other flow)."""
    if f is None:
        return {}
    m = f.metrics
    d = m.get("delay") or {}
    retr = m.get("tcp_retransmissions")
    return {"loss_rate": _num((m.get("packets") or {}).get("loss_rate")),
            **{f"delay_{k}": _num(d.get(k)) for k in ("mean_s", "std_s", "p50_s", "p95_s", "p99_s", "max_s")},
            "jitter_rfc3550_s": _num(m.get("jitter_rfc3550_s")),
            "mos": _num(((m.get("emodel") or {}).get("best") or {}).get("mos")),
            "tcp_retransmissions": None if retr is None else int(retr)}


def _write_packets(run_dir: Path, names: dict[int, str], rid: dict, out: _Csv) -> None:
    """The run's media packets from its records (or packets.parquet), as the report reads them."""
    from tcpdelay.results.layout import has_records
    from tcpdelay.results.packets import load_flows, read_run_packets

    stored = None if has_records(run_dir) else read_run_packets(run_dir)
    if stored is None and not has_records(run_dir):
        return  # measured before runs kept their packets: metrics.json only
    if stored is not None and stored.kind == "delays":
        for f in stored.flows:
            n = int(f.delay_s.size)
            out.write({**rid, "flow_id": f.flow_id, "flow": names.get(f.flow_id, f"flow{f.flow_id}"),
                       "source": "delays", "seq": f.seq, "send_time_s": f.send_time_s, "delay_s": f.delay_s}, n)
        return
    flows = stored.flows if stored is not None else load_flows(run_dir)[0]
    sends = [np.nanmin(f.send_time_s) for f in flows if np.isfinite(f.send_time_s).any()]
    t0 = float(min(sends)) if sends else 0.0
    for f in flows:
        out.write({**rid, "flow_id": f.flow_id, "flow": names.get(f.flow_id, f"flow{f.flow_id}"), "source": "records",
                   "seq": f.seq, "size_bytes": f.size_bytes, "send_time_s": f.send_time_s - t0, "delay_s": f.delay_s,
                   "dropped": f.dropped, "connection": f.connection, "frame_id": f.frame_id,
                   "frame_type": f.frame_type, "frame_last": f.frame_last}, int(f.seq.size))
