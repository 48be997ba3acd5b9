"""A run's ``failed.json`` that is written even when the disk is full.

Before a run writes anything, :func:`reserve` sets aside :data:`RESERVE_BYTES` in its directory
(``.failed.json.reserve``, allocated with posix_fallocate). When the run fails,
:func:`write_failed` writes the marker into those blocks (no new space needed), trims the file
to its text and renames it to ``failed.json``; when the run completes, :func:`release` frees
them. Without a reservation (it could not be made: the disk was already full) the marker is
written the ordinary way, and a failure to write it is raised; the caller keeps the run's error
either way, and a half-written temporary file is never left behind.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
from pathlib import Path

from tcpdelay.atomic_file import write_bytes_atomic

RESERVE_NAME = ".failed.json.reserve"
#: Room kept for failed.json: its error line and a traceback trimmed to fit.
RESERVE_BYTES = 64 * 1024


def reserve(run_dir: str | os.PathLike) -> None:
    """Set aside room for the run's failure marker; raises OSError (ENOSPC, EDQUOT) when there
    is none. A file system that cannot allocate ahead gets no reservation (the marker is then
    written the ordinary way)."""
    path = Path(run_dir) / RESERVE_NAME
    fd = os.open(path, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
    try:
        os.posix_fallocate(fd, 0, RESERVE_BYTES)
    except OSError as err:
        os.close(fd)
        with contextlib.suppress(OSError):
            path.unlink()
        if err.errno in (errno.ENOSPC, errno.EDQUOT):
            raise
        return
    os.close(fd)


def release(run_dir: str | os.PathLike) -> None:
    """Give the reserved room back (the run completed)."""
    with contextlib.suppress(FileNotFoundError):
        (Path(run_dir) / RESERVE_NAME).unlink()


def _text(data: dict, limit: int) -> bytes:
    raw = json.dumps(data, indent=2, sort_keys=True, default=str).encode()
    if len(raw) <= limit:
        return raw
    trimmed = dict(data)
    tb = str(trimmed.get("traceback", ""))
    trimmed["traceback"] = "... (trimmed)\n" + tb[-max(0, limit // 2):]
    trimmed["error"] = str(trimmed.get("error", ""))[: limit // 4]
    raw = json.dumps(trimmed, indent=2, sort_keys=True, default=str).encode()
    return raw[:limit] if len(raw) > limit else raw


def write_failed(path: str | os.PathLike, data: dict) -> None:
    """Write ``data`` as the failure marker ``path`` (``<run_dir>/failed.json``), into the
    reserved room when there is one; atomic (a reader sees the whole file or none)."""
    path = Path(path)
    reserved = path.with_name(RESERVE_NAME)
    try:
        fd = os.open(reserved, os.O_WRONLY)  # no O_TRUNC: the reserved blocks are rewritten in place
    except FileNotFoundError:
        fd = None
    if fd is not None:
        try:
            view = memoryview(_text(data, RESERVE_BYTES))
            done = 0
            while done < len(view):
                done += os.pwrite(fd, view[done:], done)
            os.ftruncate(fd, len(view))
        finally:
            os.close(fd)
        os.replace(reserved, path)
        return
    write_bytes_atomic(path, _text(data, 1 << 20))   # an error names the file
