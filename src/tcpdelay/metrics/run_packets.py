"""One run's per-packet records in one small file: ``packets.parquet`` in the run directory.

A run writes its records as hundreds of small Parquet parts (``sent/``, ``received/``,
:mod:`tcpdelay.records`); they stay out of git. What the report and the metrics need of them is
one row per packet the media source produced, with the sent and received records already
joined (:class:`tcpdelay.metrics.packets.FlowPackets`). :func:`write_run_packets` stores that
compactly (times as integer microseconds, delta-encoded, zstd: about 6 bytes a packet, a
twentieth of the parts; a delay is exact to 1 µs, far below anything the testbed resolves), and
:func:`read_run_packets` gives the flows back, so a committed run can be reopened, filtered,
re-plotted and its metrics recomputed on a fresh clone.

Two kinds of file (the file's metadata key ``tcpdelay.packets`` says which):

- ``records``: every column of :class:`FlowPackets` (``flow_id, seq, size_bytes, send_time_us,
  recv_time_us`` (null: never received), ``connection, frame_id, frame_type, frame_last,
  dropped``), written by the sweep after every run (:func:`tcpdelay.experiments.sweep.run_unit`);
- ``delays``: what survives of runs measured before this file existed, whose records were never
  committed: ``flow_id``, ``seq`` (null where unknown), ``send_time_us`` (from the run's first
  packet; null where unknown) and ``delay_us`` (null: never received). The metrics of such a run
  come from its ``metrics.json``; the delays give the pooled statistics and the plots.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

PACKETS_FILE = "packets.parquet"
_META_KEY = b"tcpdelay.packets"


@dataclass
class DelayFlow:
    """One media flow of a ``delays`` file: its packets' delays (NaN: never received)."""

    flow_id: int
    seq: np.ndarray | None
    send_time_s: np.ndarray
    """From the run's first packet; NaN where unknown."""
    delay_s: np.ndarray


@dataclass
class RunPackets:
    kind: str
    """records | delays"""
    info: dict
    """The file's metadata (kind, source, per-flow counters)."""
    flows: list
    """``records``: :class:`FlowPackets`; ``delays``: :class:`DelayFlow`."""


def _us(x: np.ndarray) -> pa.Array:
    x = np.asarray(x, dtype=float)
    ok = np.isfinite(x)
    return pa.array(np.where(ok, np.round(np.where(ok, x, 0.0) * 1e6), 0).astype(np.int64),
                    type=pa.int64(), mask=~ok)


def _write(path: Path, table: pa.Table, info: dict) -> Path:
    table = table.replace_schema_metadata({_META_KEY: json.dumps(info, sort_keys=True).encode()})
    tmp = path.with_name(f".{path.name}.tmp")
    ints = [n for n in ("seq", "send_time_us", "recv_time_us", "delay_us", "frame_id") if n in table.column_names]
    pq.write_table(table, tmp, compression="zstd", compression_level=9, use_dictionary=["frame_type"],
                   column_encoding={n: "DELTA_BINARY_PACKED" for n in ints})
    os.replace(tmp, path)  # a rerun rewrites the file, never adds one
    return path


def write_run_packets(run_dir: str | os.PathLike, flows=None) -> Path | None:
    """Write ``run_dir/packets.parquet`` (kind ``records``) from the run's records (or from
    ``flows``, a list of :class:`FlowPackets`); None when the run has no records."""
    from tcpdelay.metrics.packets import load_flows

    rd = Path(run_dir)
    if flows is None:
        if not any((rd / k).is_dir() for k in ("sent", "received")):
            return None
        flows, _ = load_flows(rd)
    cols = {"flow_id": [], "seq": [], "size_bytes": [], "send_time_s": [], "recv_time_s": [],
            "connection": [], "frame_id": [], "frame_type": [], "frame_last": [], "dropped": []}
    per_flow = {}
    for f in flows:
        cols["flow_id"].append(np.full(len(f), f.flow_id, np.int32))
        for name in ("seq", "size_bytes", "send_time_s", "recv_time_s", "connection", "frame_id",
                     "frame_type", "frame_last", "dropped"):
            cols[name].append(np.asarray(getattr(f, name)))
        per_flow[str(f.flow_id)] = {"duplicates": int(f.duplicates), "unmatched_received": int(f.unmatched_received),
                                    "inferred": bool(f.inferred), "clock_offset_s": float(f.clock_offset_s)}
    cat = {k: (np.concatenate(v) if v else np.zeros(0)) for k, v in cols.items()}
    table = pa.table({
        "flow_id": pa.array(cat["flow_id"].astype(np.int32)),
        "seq": pa.array(cat["seq"].astype(np.int64)),
        "size_bytes": pa.array(cat["size_bytes"].astype(np.int32)),
        "send_time_us": _us(cat["send_time_s"]),
        "recv_time_us": _us(cat["recv_time_s"]),
        "connection": pa.array(cat["connection"].astype(np.int32)),
        "frame_id": pa.array(cat["frame_id"].astype(np.int64)),
        "frame_type": pa.array(cat["frame_type"].astype(str), type=pa.string()),
        "frame_last": pa.array(cat["frame_last"].astype(bool)),
        "dropped": pa.array(cat["dropped"].astype(bool)),
    })
    return _write(rd / PACKETS_FILE, table, {"kind": "records", "flows": per_flow})


def write_delay_packets(run_dir: str | os.PathLike, flow_id: np.ndarray, delay_s: np.ndarray, *,
                        seq: np.ndarray | None = None, send_time_s: np.ndarray | None = None,
                        source: str) -> Path:
    """Write a ``delays`` file (see the module doc): ``source`` says where the values come from."""
    n = len(delay_s)
    table = pa.table({
        "flow_id": pa.array(np.asarray(flow_id, np.int32)),
        "seq": pa.array(np.asarray(seq, np.int64)) if seq is not None else pa.nulls(n, pa.int64()),
        "send_time_us": _us(send_time_s) if send_time_s is not None else pa.nulls(n, pa.int64()),
        "delay_us": _us(delay_s),
    })
    return _write(Path(run_dir) / PACKETS_FILE, table, {"kind": "delays", "source": source})


def _col(table: pa.Table, name: str, dtype=float) -> np.ndarray:
    c = table.column(name)
    if dtype is float:
        return np.asarray(c.to_numpy(zero_copy_only=False), dtype=float)  # nulls -> NaN
    if c.null_count:
        c = c.fill_null(False if dtype is bool else 0)
    return np.asarray(c.to_numpy(zero_copy_only=False), dtype=dtype)


def read_run_packets(run_dir: str | os.PathLike) -> RunPackets | None:
    """The run's ``packets.parquet``, or None when it has none."""
    from tcpdelay.errors import ParameterError
    from tcpdelay.metrics.packets import FlowPackets

    path = Path(run_dir) / PACKETS_FILE
    if not path.is_file():
        return None
    try:
        table = pq.read_table(path)
        info = json.loads((table.schema.metadata or {}).get(_META_KEY, b"{}"))
    except (OSError, ValueError, pa.ArrowException) as err:
        raise ParameterError(f"{str(path)!r} is not a packets file ({err})") from None
    kind = info.get("kind")
    fid = _col(table, "flow_id", np.int64)
    flows: list = []
    for f in np.unique(fid):
        t = table.filter(pa.array(fid == f))
        if kind == "records":
            meta = (info.get("flows") or {}).get(str(int(f)), {})
            flows.append(FlowPackets(
                int(f), _col(t, "seq", np.int64), _col(t, "size_bytes", np.int64),
                _col(t, "send_time_us") / 1e6, _col(t, "recv_time_us") / 1e6,
                _col(t, "connection", np.int64), _col(t, "frame_id", np.int64),
                np.asarray(t.column("frame_type").to_pylist(), dtype=str), _col(t, "frame_last", bool),
                _col(t, "dropped", bool), duplicates=int(meta.get("duplicates", 0)),
                unmatched_received=int(meta.get("unmatched_received", 0)),
                inferred=bool(meta.get("inferred", False)),
                clock_offset_s=float(meta.get("clock_offset_s", 0.0))))
        elif kind == "delays":
            seq = t.column("seq")
            flows.append(DelayFlow(int(f), None if seq.null_count == len(seq) else _col(t, "seq", np.int64),
                                   _col(t, "send_time_us") / 1e6, _col(t, "delay_us") / 1e6))
        else:
            raise ParameterError(f"{str(path)!r}: unknown kind {kind!r} (records or delays)")
    return RunPackets(kind, info, flows)
