"""Per-packet records: the one data format between a run and its metrics.

A run directory holds a Parquet *dataset* per record kind, written as the run goes, in
self-contained part files (``<kind>/part-<writer>-<n>.parquet``): a run that is interrupted
keeps every part already flushed, and a reader simply reads whatever parts exist.

Kinds and their columns (units in the names; times are seconds on the clock named by the run's
``run.json`` ``clock`` entry):

``sent`` — one row per media packet the source produced (written by the sender)
    flow_id, connection (-1 if never sent), seq, size_bytes, send_time_s, frame_id (-1 if the
    source has no frames), frame_type ("I", "P", "B" or ""), frame_last (last packet of its
    frame), dropped (skipped by the sender, e.g. proactive drop; never on the wire)

``received`` — one row per media packet the application read (written by the receiver)
    flow_id, connection, seq, size_bytes, send_time_s (from the packet header), recv_time_s

Loss is what is in ``sent`` (not dropped) but not in ``received``; delay is
``recv_time_s - send_time_s``.
"""

from __future__ import annotations

import json
import os
import time
import zlib
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from tcpdelay.jsonio import write_json

SENT_SCHEMA = pa.schema([
    ("flow_id", pa.int32()),
    ("connection", pa.int16()),
    ("seq", pa.int64()),
    ("size_bytes", pa.int32()),
    ("send_time_s", pa.float64()),
    ("frame_id", pa.int64()),
    ("frame_type", pa.string()),
    ("frame_last", pa.bool_()),
    ("dropped", pa.bool_()),
])

RECEIVED_SCHEMA = pa.schema([
    ("flow_id", pa.int32()),
    ("connection", pa.int16()),
    ("seq", pa.int64()),
    ("size_bytes", pa.int32()),
    ("send_time_s", pa.float64()),
    ("recv_time_s", pa.float64()),
])

#: The kernel's TCP state of one connection, sampled every ``tcp_state_period_s`` by the
#: sending loop (docs/metrics.md, "TCP state over time"): ``time_s`` on the run's monotonic clock
#: like ``send_time_s``; cwnd/ssthresh in segments (ssthresh NULL while "infinite"), srtt/rttvar
#: in s, rates in bit/s (NULL when the kernel has none), ``retransmits_total`` segments
#: retransmitted so far, ``ca_state`` the kernel's (0 open, 1 disorder, 2 cwr, 3 recovery,
#: 4 loss), ``cc_state_0..3`` the four values a tcpdelay BPF congestion control publishes
#: (bpf/cc/tdcc.h; NULL for any other).
TCP_STATE_SCHEMA = pa.schema([
    ("flow_id", pa.int32()),
    ("connection", pa.int16()),
    ("time_s", pa.float64()),
    ("cwnd_segments", pa.int64()),
    ("ssthresh_segments", pa.int64()),
    ("srtt_s", pa.float64()),
    ("rttvar_s", pa.float64()),
    ("delivery_rate_bps", pa.float64()),
    ("retransmits_total", pa.int64()),
    ("ca_state", pa.int8()),
    ("bytes_acked", pa.int64()),
    ("mss_bytes", pa.int32()),
    ("pacing_rate_bps", pa.float64()),
    ("cc_state_0", pa.uint64()),
    ("cc_state_1", pa.uint64()),
    ("cc_state_2", pa.uint64()),
    ("cc_state_3", pa.uint64()),
])

#: QUIC's state of one media connection (RFC 9002), sampled every ``tcp_state_period_s`` by the
#: QUIC sending loop (transport/quic_state.py; docs/transports-quic.md): ``time_s`` on the run's
#: clock; congestion window, ssthresh (NULL until the first congestion event) and bytes in
#: flight in bytes; RTT estimates in s (NULL before the first sample); ``lost_packets_total``
#: packets declared lost so far, ``ptos_total`` probe timeouts so far, ``pto_count`` the
#: consecutive PTOs now (RFC 9002 §6.2.1).
QUIC_STATE_SCHEMA = pa.schema([
    ("flow_id", pa.int32()),
    ("connection", pa.int16()),
    ("time_s", pa.float64()),
    ("cwnd_bytes", pa.int64()),
    ("ssthresh_bytes", pa.int64()),
    ("bytes_in_flight", pa.int64()),
    ("srtt_s", pa.float64()),
    ("rttvar_s", pa.float64()),
    ("min_rtt_s", pa.float64()),
    ("lost_packets_total", pa.int64()),
    ("ptos_total", pa.int64()),
    ("pto_count", pa.int16()),
])

#: A pull player's log of an HTTP video stream (traffic/http_player.py; papers/003): one row per
#: event, written as it happens. ``event`` is ``arrival`` (frame ``frame``, in decode order, was
#: whole in the playout buffer at ``time_s``), ``start`` (playback started at ``time_s``;
#: ``frame`` -1) or ``never`` (frame ``frame`` had not arrived when the player stopped;
#: ``time_s`` NaN). ``pts_s`` is the frame's presentation time from the stream's start,
#: ``end_byte`` the file offset just past its last byte.
PLAYOUT_SCHEMA = pa.schema([
    ("flow_id", pa.int32()),
    ("event", pa.string()),
    ("frame", pa.int64()),
    ("pts_s", pa.float64()),
    ("size_bytes", pa.int32()),
    ("end_byte", pa.int64()),
    ("time_s", pa.float64()),
])

#: The bottleneck queue's length over time, per direction (``a_to_b``, ``b_to_a``): packets and
#: bytes waiting (the packet being sent not counted, as the emulator counts), sampled every
#: period. Written by the ns-3 backend (its link is in the simulation).
LINK_QUEUE_SCHEMA = pa.schema([
    ("direction", pa.string()),
    ("time_s", pa.float64()),
    ("packets", pa.int64()),
    ("bytes", pa.int64()),
])

SCHEMAS = {"sent": SENT_SCHEMA, "received": RECEIVED_SCHEMA, "tcp_state": TCP_STATE_SCHEMA,
           "quic_state": QUIC_STATE_SCHEMA, "playout": PLAYOUT_SCHEMA, "link_queue": LINK_QUEUE_SCHEMA}
RUN_METADATA = "run.json"


class RecordWriter:
    """Buffers rows of one kind and flushes them as a new part file every ``flush_rows`` rows
    or ``flush_interval_s`` seconds (checked on each append), and on :meth:`close`.

    Use as a context manager. Parts are written to a temporary name and renamed, so a reader
    never sees a half-written part.

    Written for real-time programs, many at once on one machine (the testbed's 2N media
    programs): the Parquet writer is warmed up when the writer is made, before media flows (a
    process's first ``write_table`` costs ~2 ms more than later ones), and each writer's
    periodic flush is offset by a fraction of ``flush_interval_s`` taken from its
    ``writer_id``, so programs started together do not all flush at the same instant (160 of
    them did, ~1 s into every run, and delayed every packet of that moment by up to 0.2 s).
    """

    def __init__(self, run_dir: str | os.PathLike, kind: str, *, writer_id: str | None = None,
                 flush_rows: int = 2000, flush_interval_s: float = 1.0):
        if kind not in SCHEMAS:
            raise ValueError(f"record kind {kind!r} is not one of {sorted(SCHEMAS)}")
        self.schema = SCHEMAS[kind]
        self.dir = Path(run_dir) / kind
        self.dir.mkdir(parents=True, exist_ok=True)
        self.writer_id = writer_id or f"{os.getpid()}-{time.time_ns() % 10**9}"
        self.flush_rows = flush_rows
        self.flush_interval_s = flush_interval_s
        self._cols: dict[str, list] = {name: [] for name in self.schema.names}
        self._rows = 0
        self._parts = 0
        _warm_up(self.schema)
        phase = (zlib.crc32(self.writer_id.encode()) % 1000) / 1000.0
        self._last_flush = time.monotonic() - phase * min(flush_interval_s, 3600.0)

    def append(self, **row) -> None:
        for name in self.schema.names:
            self._cols[name].append(row[name])
        self._rows += 1
        if self._rows >= self.flush_rows or time.monotonic() - self._last_flush >= self.flush_interval_s:
            self.flush()

    def extend(self, rows: list[tuple]) -> None:
        """Append several rows at once, each a tuple of the schema's columns in order (the
        periodic samplers' path: one flush check per batch instead of per row)."""
        if not rows:
            return
        for name, values in zip(self.schema.names, zip(*rows)):
            self._cols[name].extend(values)
        self._rows += len(rows)
        if self._rows >= self.flush_rows or time.monotonic() - self._last_flush >= self.flush_interval_s:
            self.flush()

    def flush(self) -> None:
        self._last_flush = time.monotonic()
        if not self._rows:
            return
        table = pa.table(self._cols, schema=self.schema)
        name = f"part-{self.writer_id}-{self._parts:06d}.parquet"
        tmp = self.dir / f".{name}.tmp"
        try:
            pq.write_table(table, tmp)
            os.replace(tmp, self.dir / name)
        except BaseException:
            _discard(tmp)  # no half-written part left behind (e.g. the disk is full)
            raise
        self._parts += 1
        self._cols = {name: [] for name in self.schema.names}
        self._rows = 0

    def close(self) -> None:
        self.flush()

    def __enter__(self) -> "RecordWriter":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


_WARM: set[str] = set()


def _warm_up(schema: pa.Schema) -> None:
    """Encode an empty table of ``schema`` once per process (in memory), so the first part a
    real-time program writes does not pay Parquet's first-use cost."""
    key = schema.to_string()
    if key not in _WARM:
        pq.write_table(pa.table({n: [] for n in schema.names}, schema=schema), pa.BufferOutputStream())
        _WARM.add(key)


def write_part(run_dir: str | os.PathLike, kind: str, columns: dict, *, writer_id: str) -> Path | None:
    """Write ``columns`` (name -> values, every column of the kind's schema) as one part file of
    ``kind`` in ``run_dir`` at once (a writer that has all its rows at the end, e.g. a
    simulation); nothing when there are no rows. Returns the part's path."""
    schema = SCHEMAS[kind]
    table = pa.table({name: columns[name] for name in schema.names}, schema=schema)
    if table.num_rows == 0:
        return None
    d = Path(run_dir) / kind
    d.mkdir(parents=True, exist_ok=True)
    path = d / f"part-{writer_id}-000000.parquet"
    tmp = d / f".{path.name}.tmp"
    try:
        pq.write_table(table, tmp)
        os.replace(tmp, path)
    except BaseException:
        _discard(tmp)
        raise
    return path


def read_records(run_dir: str | os.PathLike, kind: str) -> pa.Table:
    """All rows of ``kind`` in ``run_dir`` (an empty table with the schema if there are none)."""
    if kind not in SCHEMAS:
        raise ValueError(f"record kind {kind!r} is not one of {sorted(SCHEMAS)}")
    parts = sorted((Path(run_dir) / kind).glob("part-*.parquet"))
    if not parts:
        return SCHEMAS[kind].empty_table()
    return pa.concat_tables(pq.read_table(p, schema=SCHEMAS[kind]) for p in parts)


def move_times(run_dir: str | os.PathLike, kind: str, column: str, flow_ids, to_this_clock) -> int:
    """Rewrite ``column`` (a time, s) of the rows of ``flow_ids`` in every part of ``kind`` in
    ``run_dir`` as ``to_this_clock(values)`` (an array function): times a program recorded on
    another clock (a reference-kernel guest's) moved onto the run's. Each part is replaced whole
    (written, then renamed). Returns the rows moved."""
    import numpy as np

    schema = SCHEMAS[kind]
    if column not in schema.names or "flow_id" not in schema.names:
        raise ValueError(f"record kind {kind!r} has no per-flow column {column!r}")
    wanted = np.asarray(sorted(flow_ids), dtype=np.int64)
    moved = 0
    for part in sorted((Path(run_dir) / kind).glob("part-*.parquet")):
        table = pq.read_table(part, schema=schema)
        rows = np.isin(table["flow_id"].to_numpy().astype(np.int64), wanted)
        if not rows.any():
            continue
        values = table[column].to_numpy(zero_copy_only=False).astype(float)
        values[rows] = to_this_clock(values[rows])
        table = table.set_column(schema.get_field_index(column), column, pa.array(values, pa.float64()))
        tmp = part.with_name(f".{part.name}.tmp")
        try:
            pq.write_table(table, tmp)
            os.replace(tmp, part)
        except BaseException:
            _discard(tmp)
            raise
        moved += int(rows.sum())
    return moved


def write_run_metadata(run_dir: str | os.PathLike, metadata: dict) -> None:
    """``run.json``: the run's parameters and its clock (e.g. {"clock": "shared-monotonic"} inside
    the testbed, {"clock": "unsynchronized"} across real hosts)."""
    path = Path(run_dir)
    path.mkdir(parents=True, exist_ok=True)
    write_json(path / RUN_METADATA, metadata)  # atomic; nothing half-written left (e.g. disk full)


def _discard(path: Path) -> None:
    try:
        path.unlink()
    except OSError:
        pass


def read_run_metadata(run_dir: str | os.PathLike) -> dict:
    path = Path(run_dir) / RUN_METADATA
    return json.loads(path.read_text()) if path.exists() else {}
