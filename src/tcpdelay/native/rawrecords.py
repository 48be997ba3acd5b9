"""The files between Python and ``tcpdelay-endpoint``: a flow's schedule (what to send when) and
its raw records (what was sent or received), turned here into the ``sent`` and ``received``
Parquet parts of :mod:`tcpdelay.records` (the same columns, the same part names as the
:class:`~tcpdelay.records.RecordWriter` of the Python endpoints).

All little-endian, fixed-size rows (emulator/src/endpoint/records.rs):

- schedule (32 B): at_ns u64 (from the flow's start), rtp_ts u32, size_bytes u32, frame_id i64,
  frame_type u8, frame_last u8, 6 B padding;
- sent (40 B): flow_id u32, connection i16, frame_type u8, flags u8 (1 frame_last, 2 dropped),
  seq u64, size_bytes u32, pad u32, send_ns u64, frame_id i64;
- received (40 B): flow_id u32, connection i16, pad u16, seq u64, size_bytes u32, pad u32,
  send_ns u64, recv_ns u64.

Times are CLOCK_MONOTONIC ns, as the Python endpoints' (:mod:`tcpdelay.transport.clock`). The
endpoint writes whole rows every 0.2 s; a file cut by a kill holds whole rows up to its last write
(a trailing partial row is ignored).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from tcpdelay.records import write_part
from tcpdelay.transport import framing

SCHEDULE_DTYPE = np.dtype([("at_ns", "<u8"), ("rtp_ts", "<u4"), ("size", "<u4"), ("frame_id", "<i8"),
                           ("frame_type", "u1"), ("frame_last", "u1"), ("pad", "V6")])
SENT_DTYPE = np.dtype([("flow_id", "<u4"), ("connection", "<i2"), ("frame_type", "u1"), ("flags", "u1"),
                       ("seq", "<u8"), ("size", "<u4"), ("pad", "<u4"), ("send_ns", "<u8"), ("frame_id", "<i8")])
RECEIVED_DTYPE = np.dtype([("flow_id", "<u4"), ("connection", "<i2"), ("pad", "<u2"), ("seq", "<u8"),
                           ("size", "<u4"), ("pad2", "<u4"), ("send_ns", "<u8"), ("recv_ns", "<u8")])
_FRAME_TYPES = {"": 0, "I": ord("I"), "P": ord("P"), "B": ord("B")}
_TYPE_NAMES = {0: "", ord("I"): "I", ord("P"): "P", ord("B"): "B"}


def write_schedule(path: str | os.PathLike, source, duration_s: float, seed: int) -> int:
    """The source's packets (``source.packets(duration_s, seed)``: a pure schedule) as a schedule
    file; returns how many. The due instant and RTP timestamp are computed as sender.py does
    (``int(at_s * 1e9)``, ``int(at_s * 90000)``)."""
    rows = [(int(p.at_s * 1e9), int(p.at_s * framing.RTP_CLOCK_HZ) & 0xFFFFFFFF, int(p.size_bytes),
             int(p.frame_id), _FRAME_TYPES.get(str(p.frame_type), 0), 1 if p.frame_last else 0, b"")
            for p in source.packets(duration_s, seed)]
    arr = np.array(rows, dtype=SCHEDULE_DTYPE) if rows else np.zeros(0, SCHEDULE_DTYPE)
    tmp = Path(f"{path}.tmp")
    arr.tofile(tmp)
    os.replace(tmp, path)
    return len(rows)


def _rows(path: Path, dtype: np.dtype) -> np.ndarray:
    data = path.read_bytes() if path.exists() else b""
    whole = len(data) - len(data) % dtype.itemsize
    return np.frombuffer(data[:whole], dtype=dtype)


def convert_sent(raw: str | os.PathLike, run_dir: str | os.PathLike, writer_id: str) -> int:
    """The raw ``sent`` rows as one ``sent`` part of ``run_dir``; the raw file removed. Rows."""
    raw = Path(raw)
    a = _rows(raw, SENT_DTYPE)
    if len(a):
        write_part(run_dir, "sent", {
            "flow_id": a["flow_id"].astype(np.int32), "connection": a["connection"].astype(np.int16),
            "seq": a["seq"].astype(np.int64), "size_bytes": a["size"].astype(np.int32),
            "send_time_s": a["send_ns"].astype(np.float64) / 1e9, "frame_id": a["frame_id"],
            "frame_type": [_TYPE_NAMES.get(int(t), "") for t in a["frame_type"]],
            "frame_last": (a["flags"] & 1).astype(bool), "dropped": (a["flags"] & 2).astype(bool)},
            writer_id=writer_id)
    raw.unlink(missing_ok=True)
    return len(a)


def convert_received(raw: str | os.PathLike, run_dir: str | os.PathLike, writer_id: str) -> int:
    """The raw ``received`` rows as one ``received`` part of ``run_dir``; the raw file removed."""
    raw = Path(raw)
    a = _rows(raw, RECEIVED_DTYPE)
    if len(a):
        write_part(run_dir, "received", {
            "flow_id": a["flow_id"].astype(np.int32), "connection": a["connection"].astype(np.int16),
            "seq": a["seq"].astype(np.int64), "size_bytes": a["size"].astype(np.int32),
            "send_time_s": a["send_ns"].astype(np.float64) / 1e9,
            "recv_time_s": a["recv_ns"].astype(np.float64) / 1e9}, writer_id=writer_id)
    raw.unlink(missing_ok=True)
    return len(a)


#: Raw files' names in a flow's directory: ``.native-<kind>-<writer_id>.raw``.
def raw_path(run_dir: str | os.PathLike, kind: str, writer_id: str) -> Path:
    return Path(run_dir) / f".native-{kind}-{writer_id}.raw"


def convert_leftovers(run_dir: str | os.PathLike) -> int:
    """Raw records no member converted (its group process was killed) under ``run_dir``'s
    ``flows/*/``, converted now; returns the rows."""
    n = 0
    for raw in sorted(Path(run_dir).glob("flows/*/.native-*.raw")):
        kind, _, writer_id = raw.name[len(".native-"):-len(".raw")].partition("-")
        if kind == "sent":
            n += convert_sent(raw, raw.parent, writer_id)
        elif kind == "received":
            n += convert_received(raw, raw.parent, writer_id)
        else:                       # a schedule
            raw.unlink(missing_ok=True)
    return n
