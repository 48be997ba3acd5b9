"""VBR video from a frame-size trace file.

Accepted format (plain text, one frame per line, in display order):

- ``#`` starts a comment (whole line or the rest of a line); blank lines are ignored;
- columns are separated by whitespace or commas;
- by default (``type_column=None, size_column=None``) the frame type is the first column whose
  value is ``I``, ``P`` or ``B`` (case-insensitive) and the size is the column right after it,
  so each of these lines is the same frame::

      I 14056
      0 I 14056
      0 I 14056 10 0.000

  (``TYPE SIZE``; ``FRAME_NO TYPE SIZE ...`` with any further columns, e.g. EvalVid's ``st``
  layout: number, type, size, fragments, time). For other layouts name the 0-based columns with
  ``type_column`` and ``size_column``;
- sizes are non-negative integers in bytes, or in bits with ``size_unit="bits"`` (rounded up to
  whole bytes); a frame of size 0 is sent as one minimum-size packet;
- a first line that names the columns ``frame_type`` and ``size_bytes`` (a CSV header, e.g.
  ``pts_s,size_bytes,pos_bytes,frame_type``, the index of papers/003's H.264 file that
  :mod:`tcpdelay.traffic.video_file` writes) sets the two columns by name; a file ending in
  ``.gz`` is read through gzip.

The frame rate is not in the file: give ``fps``. Frames are emitted at ``k / fps``; each frame
is cut into packets of at most ``max_packet_bytes`` (RTP header included), emitted together at
the frame's time, the last one flagged ``frame_last`` and padded to at least 32 bytes (the
transport's RTP + media header, :data:`~tcpdelay.traffic.source.MIN_PACKET_BYTES`). Any other line is an error naming the
file, the line and what was expected (:class:`tcpdelay.errors.ParameterError`).
"""

from __future__ import annotations

import functools
import gzip
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Iterator

import numpy as np

from tcpdelay import checks
from tcpdelay.errors import ParameterError
from tcpdelay.traffic.source import Packet, check_packet_bytes, split_frame

FRAME_TYPES = ("I", "P", "B")
_SPLIT = re.compile(r"[\s,]+")


def parse_trace_lines(lines: Iterable[str], *, name: str = "trace", type_column: int | None = None,
                      size_column: int | None = None, size_unit: str = "bytes"
                      ) -> tuple[np.ndarray, np.ndarray]:
    """Frame types (array of "I"/"P"/"B") and frame sizes in bytes (int64) from trace lines."""
    if size_unit not in ("bytes", "bits"):
        raise ParameterError(f"size_unit: {size_unit!r} is not one of 'bytes', 'bits'")
    for col_name, col in (("type_column", type_column), ("size_column", size_column)):
        if col is not None and (isinstance(col, bool) or int(col) != col or col < 0):
            raise ParameterError(f"{col_name}: {col!r} must be a 0-based column index >= 0")
    types: list[str] = []
    sizes: list[int] = []
    first = True
    for lineno, raw in enumerate(lines, start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        cols = [c for c in _SPLIT.split(line) if c]
        where = f"{name} line {lineno}"
        if first and {"frame_type", "size_bytes"} <= {c.lower() for c in cols}:
            # a header naming the columns (given columns would contradict it: refused)
            if type_column is not None or size_column is not None or size_unit != "bytes":
                raise ParameterError(f"{where}: the header names the columns; give no type_column, "
                                     "size_column or size_unit")
            names = [c.lower() for c in cols]
            type_column, size_column = names.index("frame_type"), names.index("size_bytes")
            first = False
            continue
        first = False
        if type_column is None:
            tcol = next((i for i, c in enumerate(cols) if c.upper() in FRAME_TYPES), None)
            if tcol is None:
                raise ParameterError(f"{where}: no frame type column (I, P or B) in {line[:60]!r}")
        else:
            tcol = type_column
        scol = tcol + 1 if size_column is None else size_column
        if tcol >= len(cols) or scol >= len(cols):
            raise ParameterError(f"{where}: expected a frame type in column {tcol} and a size in "
                                 f"column {scol}, found {len(cols)} column(s) in {line[:60]!r}")
        ftype = cols[tcol].upper()
        if ftype not in FRAME_TYPES:
            raise ParameterError(f"{where}: frame type {cols[tcol]!r} is not one of I, P, B")
        token = cols[scol]
        if not token.isdigit():
            raise ParameterError(f"{where}: frame size {token!r} is not a non-negative integer "
                                 f"({size_unit})")
        size = int(token)
        if size_unit == "bits":
            size = math.ceil(size / 8)
        types.append(ftype)
        sizes.append(size)
    if not sizes:
        raise ParameterError(f"{name}: no frames (expected lines like 'I 14056': frame type, size)")
    return np.asarray(types), np.asarray(sizes, dtype=np.int64)


def parse_trace(path: str | os.PathLike, *, type_column: int | None = None, size_column: int | None = None,
                size_unit: str = "bytes") -> tuple[np.ndarray, np.ndarray]:
    """:func:`parse_trace_lines` on a file; a missing or unreadable file is a ParameterError.

    A file read before, unchanged since (same size and modification time), is not parsed again:
    planning a sweep builds each cell's source, and papers/003's H.264 trace took 80 ms to parse
    in each of a 46-cell grid's plans. The arrays returned are read-only (shared)."""
    p = Path(path)
    try:
        st = p.stat()
    except OSError as err:
        raise ParameterError(f"trace file {str(p)!r}: {getattr(err, 'strerror', None) or err}") from None
    return _parse_trace_file(str(p), str(p.resolve()), (st.st_ino, st.st_mtime_ns, st.st_ctime_ns, st.st_size),
                             type_column, size_column, size_unit)


@functools.lru_cache(maxsize=32)
def _parse_trace_file(name: str, resolved: str, version: tuple, type_column, size_column,
                      size_unit: str) -> tuple[np.ndarray, np.ndarray]:
    """:func:`parse_trace` of one version of a file (``version``: its inode, modification and change
    times and size, so that a file written again is read again)."""
    p = Path(resolved)
    try:
        if p.suffix == ".gz":
            with gzip.open(p, "rt", encoding="utf-8", errors="replace") as f:
                text = f.read()
        else:
            text = p.read_text(encoding="utf-8", errors="replace")
    except OSError as err:
        raise ParameterError(f"trace file {name!r}: {getattr(err, 'strerror', None) or err}") from None
    types, sizes = parse_trace_lines(text.splitlines(), name=name, type_column=type_column,
                                     size_column=size_column, size_unit=size_unit)
    types.setflags(write=False)
    sizes.setflags(write=False)
    return types, sizes


def write_trace(path: str | os.PathLike, types: Iterable[str], sizes_bytes: Iterable[int]) -> None:
    """Write frames in the plain ``FRAME_NO TYPE SIZE`` layout (read back by :func:`parse_trace`)."""
    lines = ["# frame_no frame_type size_bytes"]
    lines += [f"{i} {t} {int(s)}" for i, (t, s) in enumerate(zip(types, sizes_bytes))]
    Path(path).write_text("\n".join(lines) + "\n")


@dataclass(frozen=True)
class VideoTraceSource:
    """Frames of a trace file at ``fps``. With ``loop`` the trace repeats until the duration
    ends (frame ids keep increasing); without it the flow ends with the trace. With
    ``random_start`` the seed picks the trace frame the flow starts from (a GOP boundary is not
    enforced), so several flows from one trace are not in lockstep; otherwise the seed is
    unused."""

    trace_file: str | os.PathLike
    fps: float = 30.0
    max_packet_bytes: int = 1446
    loop: bool = True
    random_start: bool = False
    type_column: int | None = None
    size_column: int | None = None
    size_unit: str = "bytes"
    name: str = "video-trace"
    frame_types: np.ndarray = field(init=False, repr=False, compare=False)
    frame_bytes: np.ndarray = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        checks.positive_float("fps", self.fps)
        check_packet_bytes("max_packet_bytes", self.max_packet_bytes)
        types, sizes = parse_trace(self.trace_file, type_column=self.type_column,
                                   size_column=self.size_column, size_unit=self.size_unit)
        object.__setattr__(self, "frame_types", types)
        object.__setattr__(self, "frame_bytes", sizes)

    @property
    def nominal_interval_s(self) -> float:
        return 1.0 / self.fps

    @property
    def mean_rate_bps(self) -> float:
        """Mean video bit rate of the trace (frame bytes, RTP headers not counted)."""
        return float(self.frame_bytes.mean()) * 8 * self.fps

    def packets(self, duration_s: float, seed: int = 0) -> Iterator[Packet]:
        duration = checks.non_negative_float("duration_s", duration_s)
        n = len(self.frame_bytes)
        start = int(np.random.default_rng(seed).integers(n)) if self.random_start else 0
        k = 0
        while (t := k / self.fps) < duration:
            if not self.loop and start + k >= n:
                return
            i = (start + k) % n
            sizes = split_frame(int(self.frame_bytes[i]), self.max_packet_bytes)
            ftype = str(self.frame_types[i])
            for j, size in enumerate(sizes):
                yield Packet(t, size, k, ftype, j == len(sizes) - 1)
            k += 1
