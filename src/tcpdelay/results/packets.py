"""A run's packets on disk: its records joined per flow, in one small file, and the one form of
a file of packet delays.

A run writes its records as hundreds of small Parquet parts (``sent/``, ``received/``,
:mod:`tcpdelay.records`); they stay out of git. :func:`load_flows` joins them into one
:class:`~tcpdelay.metrics.packets.FlowPackets` per flow (the one join of sent and received
records, :func:`tcpdelay.metrics.packets.flows_from_tables`; everything that needs the packets
of a run comes here). :func:`write_run_packets` stores the flows compactly in the run's
``packets.parquet`` (times as integer microseconds, delta-encoded, zstd: about 6 bytes a packet,
a twentieth of the parts; a delay is exact to 1 µs, far below anything the testbed resolves),
and :func:`read_run_packets` gives them back, so a committed run can be reopened, filtered,
re-plotted and its metrics recomputed on a fresh clone.

Two kinds of ``packets.parquet`` (the file's metadata key ``tcpdelay.packets`` says which):

- ``records``: every column of :class:`FlowPackets` (``flow_id, seq, size_bytes, send_time_us,
  recv_time_us`` (null: never received), ``connection, frame_id, frame_type, frame_last,
  dropped``), written by the sweep after every run (:func:`tcpdelay.experiments.unit.run_unit`);
- ``delays``: what survives of runs measured before this file existed, whose records were never
  committed. The metrics of such a run come from its ``metrics.json``; the delays give the pooled
  statistics and the plots.

**The delays form** (:func:`write_delays`, :func:`read_delays`) is the one way packet delays are
kept, for one run (``packets.parquet`` of kind ``delays``) or for a whole sweep (the reproduction
scripts' ``delays.parquet``, whose rows also carry ``cell_id`` and ``seed``): ``flow_id``,
``seq`` (null where unknown), ``send_time_us`` (from the run's first packet; null where unknown)
and ``delay_us`` (null: never received). A sweep's ``delays.parquet`` of results format 1
(:mod:`tcpdelay.results.version`) had ``send_time_ms`` and ``delay_us`` with ``-1`` for never
received; it reads into the same columns.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from tcpdelay.atomic_file import write_atomic
from tcpdelay.errors import ParameterError
from tcpdelay.metrics.packets import FlowPackets, flows_from_tables
from tcpdelay.records import read_records, read_run_metadata
from tcpdelay.results.layout import PACKETS_FILE, has_records
from tcpdelay.results.version import FORMAT_VERSION, VERSION_KEY, version_of

__all__ = ["DelayFlow", "PACKETS_FILE", "RunPackets", "load_flows", "read_delays", "read_run_packets",
           "run_delays", "write_delay_packets", "write_delays", "write_run_packets"]

_META_KEY = b"tcpdelay.packets"
#: Columns that identify a run in a delays file that holds several (a sweep's).
DELAY_KEYS = ("cell_id", "seed")


def load_flows(run_dir: str | os.PathLike, sent_dir: str | os.PathLike | None = None
               ) -> tuple[list[FlowPackets], dict]:
    """The flows of a recorded run and its ``run.json``.

    ``sent_dir`` is the sender's directory when it differs from ``run_dir`` (runs across real
    hosts); its ``run.json`` fills keys the receiver's lacks. Raises ParameterError when a
    directory is missing or there are no records at all. Without record parts, the run's
    ``packets.parquet`` (kind ``records``: what a committed run keeps) gives the flows.
    """
    run = Path(run_dir)
    if not run.is_dir():
        raise ParameterError(f"results directory {str(run)!r} does not exist")
    meta = read_run_metadata(run)
    sent_from = run
    if sent_dir is not None:
        sent_from = Path(sent_dir)
        if not sent_from.is_dir():
            raise ParameterError(f"sender's results directory {str(sent_from)!r} does not exist")
        meta = {**read_run_metadata(sent_from), **meta}
    sent = read_records(sent_from, "sent")
    received = read_records(run, "received")
    if sent.num_rows == 0 and received.num_rows == 0 and sent_dir is None:
        stored = read_run_packets(run)  # a committed run: its records joined in packets.parquet
        if stored is not None and stored.kind == "records":
            return stored.flows, meta
    if sent.num_rows == 0 and received.num_rows == 0:
        raise ParameterError(f"{str(run)!r} has no packet records (expected sent/ and received/ "
                             "Parquet parts written by tcpdelay send/recv)")
    # anything but "unsynchronized" (e.g. "shared", "shared-monotonic") is one clock
    clock = meta.get("clock", "shared")
    return flows_from_tables(sent, received, unsynchronized=clock == "unsynchronized"), meta


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
    ints = [n for n in ("seq", "send_time_us", "recv_time_us", "delay_us", "frame_id") if n in table.column_names]
    # whole or not at all; a rerun rewrites the file, never adds one
    return write_atomic(path, lambda tmp: pq.write_table(
        table, tmp, compression="zstd", compression_level=9,
        use_dictionary=[n for n in ("frame_type", "cell_id") if n in table.column_names],
        column_encoding={n: "DELTA_BINARY_PACKED" for n in ints}))


def write_run_packets(run_dir: str | os.PathLike, flows=None) -> Path | None:
    """Write ``run_dir/packets.parquet`` (kind ``records``) from the run's records (or from
    ``flows``, a list of :class:`FlowPackets`); None when the run has no records."""
    rd = Path(run_dir)
    if flows is None:
        if not has_records(rd):
            return None               # no media packets (e.g. a run of pulled streams only)
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


def write_delays(path: str | os.PathLike, flow_id: np.ndarray, delay_s: np.ndarray, *,
                 seq: np.ndarray | None = None, send_time_s: np.ndarray | None = None,
                 keys: dict[str, np.ndarray] | None = None, source: str) -> Path:
    """Write a file of packet delays in the one delays form (see the module doc): one row per
    packet, ``delay_s`` NaN where never received, ``seq``/``send_time_s`` (s from the run's first
    packet) None or NaN where unknown; ``keys`` the ``cell_id``/``seed`` of each row when the file
    holds several runs; ``source`` says where the values come from."""
    n = len(delay_s)
    cols: dict[str, pa.Array] = {}
    for k, v in (keys or {}).items():
        if k not in DELAY_KEYS:
            raise ValueError(f"delays file key {k!r} is not one of {DELAY_KEYS}")
        cols[k] = pa.array(np.asarray(v, np.int32)) if k == "seed" else pa.array(np.asarray(v).astype(str),
                                                                                  type=pa.string())
    cols["flow_id"] = pa.array(np.asarray(flow_id, np.int32))
    cols["seq"] = pa.array(np.asarray(seq, np.int64)) if seq is not None else pa.nulls(n, pa.int64())
    cols["send_time_us"] = _us(send_time_s) if send_time_s is not None else pa.nulls(n, pa.int64())
    cols["delay_us"] = _us(delay_s)
    return _write(Path(path), pa.table(cols), {"kind": "delays", "source": source, VERSION_KEY: FORMAT_VERSION})


def write_delay_packets(run_dir: str | os.PathLike, flow_id: np.ndarray, delay_s: np.ndarray, *,
                        seq: np.ndarray | None = None, send_time_s: np.ndarray | None = None,
                        source: str) -> Path:
    """Write the run's ``packets.parquet`` of kind ``delays`` (:func:`write_delays`)."""
    return write_delays(Path(run_dir) / PACKETS_FILE, flow_id, delay_s, seq=seq, send_time_s=send_time_s,
                        source=source)


def _col(table: pa.Table, name: str, dtype=float) -> np.ndarray:
    c = table.column(name)
    if dtype is float:
        return np.asarray(c.to_numpy(zero_copy_only=False), dtype=float)  # nulls -> NaN
    if c.null_count:
        c = c.fill_null(False if dtype is bool else 0)
    a = np.asarray(c.to_numpy(zero_copy_only=False), dtype=dtype)
    return a if a.flags.writeable else a.copy()  # not a read-only view of Arrow's buffer


def _str_col(table: pa.Table, name: str) -> np.ndarray:
    """A string column as a NumPy ``str`` array (a null as ``"None"``, as ``np.asarray(
    column.to_pylist(), dtype=str)`` gives it), made from its few distinct values (a video
    flow's frame types; "" for voice) rather than one Python string per packet."""
    c = table.column(name)
    if c.null_count:
        return np.asarray(c.to_pylist(), dtype=str)
    codes = c.combine_chunks().dictionary_encode()
    return np.asarray(codes.dictionary.to_pylist(), dtype=str)[codes.indices.to_numpy(zero_copy_only=False)]


def _open(path: Path) -> tuple[pa.Table, dict | None]:
    """The table and its ``tcpdelay.packets`` metadata (None: the file has none)."""
    try:
        with pq.ParquetFile(path) as f:  # one file: none of read_table's dataset machinery, no thread pool
            table = f.read(use_threads=False)
        raw = (table.schema.metadata or {}).get(_META_KEY)
        info = json.loads(raw) if raw is not None else None
    except (OSError, ValueError, pa.ArrowException) as err:
        raise ParameterError(f"{str(path)!r} is not a packets file ({err})") from None
    if info is not None:
        version_of(info, str(path))
    return table, info


def read_run_packets(run_dir: str | os.PathLike) -> RunPackets | None:
    """The run's ``packets.parquet``, or None when it has none."""
    path = Path(run_dir) / PACKETS_FILE
    if not path.is_file():
        return None
    table, info = _open(path)
    info = info or {}
    kind = info.get("kind")
    fid = _col(table, "flow_id", np.int64)
    ids = np.unique(fid)
    flows: list = []
    for f in ids:
        t = table if ids.size == 1 else table.filter(pa.array(fid == f))
        if kind == "records":
            meta = (info.get("flows") or {}).get(str(int(f)), {})
            flows.append(FlowPackets(
                int(f), _col(t, "seq", np.int64), _col(t, "size_bytes", np.int64),
                _col(t, "send_time_us") / 1e6, _col(t, "recv_time_us") / 1e6,
                _col(t, "connection", np.int64), _col(t, "frame_id", np.int64),
                _str_col(t, "frame_type"), _col(t, "frame_last", bool),
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


def read_delays(path: str | os.PathLike) -> pa.Table:
    """A delays file as ``[cell_id, seed,] flow_id, seq, send_time_s, delay_s`` (seq null where
    unknown; times NaN where unknown or never received), whatever results format wrote it."""
    path = Path(path)
    table, info = _open(path)
    keys = {k: table.column(k) for k in DELAY_KEYS if k in table.column_names}
    if info is None and "send_time_ms" in table.column_names:  # format 1: a sweep's cache
        d = table["delay_us"].to_numpy().astype(float)
        return pa.table({**keys, "flow_id": table["flow_id"], "seq": pa.nulls(table.num_rows, pa.int64()),
                         "send_time_s": table["send_time_ms"].to_numpy() / 1e3,
                         "delay_s": np.where(d < 0, np.nan, d / 1e6)})
    if info is None or info.get("kind") != "delays":
        raise ParameterError(f"{str(path)!r} is not a delays file (kind {(info or {}).get('kind')!r})")
    return pa.table({**keys, "flow_id": table["flow_id"], "seq": table["seq"],
                     "send_time_s": _col(table, "send_time_us") / 1e6, "delay_s": _col(table, "delay_us") / 1e6})


def run_delays(run_dir: str | os.PathLike) -> pa.Table:
    """``flow_id, seq, send_time_s, delay_s`` of every media packet of a run (send times from the
    run's first packet; delay NaN: never received), from its records when they are there, else
    from its ``packets.parquet`` (either kind; a ``delays`` file without sequence numbers numbers
    each flow's packets from 0). Raises ParameterError when the run has neither."""
    rd = Path(run_dir)
    if has_records(rd):
        flows, _ = load_flows(rd)
        parts = [(f.flow_id, f.seq, f.send_time_s, f.delay_s) for f in flows]
    else:
        stored = read_run_packets(rd)
        if stored is None:
            raise ParameterError(f"{str(rd)!r} has neither its per-packet records nor {PACKETS_FILE}")
        if stored.kind == "records":
            parts = [(f.flow_id, f.seq, f.send_time_s, f.delay_s) for f in stored.flows]
        else:
            parts = [(f.flow_id, f.seq if f.seq is not None else np.arange(f.delay_s.size), f.send_time_s,
                      f.delay_s) for f in stored.flows]
    if not parts:
        return pa.table({"flow_id": pa.array([], pa.int32()), "seq": pa.array([], pa.int64()),
                         "send_time_s": pa.array([], pa.float64()), "delay_s": pa.array([], pa.float64())})
    t0 = min(float(np.nanmin(s)) for _, _, s, _ in parts)
    return pa.table({"flow_id": np.concatenate([np.full(len(d), fid, np.int32) for fid, _, _, d in parts]),
                     "seq": np.concatenate([np.asarray(q, np.int64) for _, q, _, _ in parts]),
                     "send_time_s": np.concatenate([s for _, _, s, _ in parts]) - t0,
                     "delay_s": np.concatenate([d for _, _, _, d in parts])})
