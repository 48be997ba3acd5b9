"""run.json of a media run, written by both ends when they share a run directory.

Each end writes its own section ("sender", "receiver") plus the common keys (``clock``,
``clock_source``, ``run_id``) with a read-modify-write under an exclusive ``flock(2)``, so the
two ends can update one run.json concurrently without losing each other's section.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from tcpdelay.records import read_run_metadata, write_run_metadata


def update_run_metadata(run_dir: str | os.PathLike, common: dict, section: str, data: dict) -> None:
    path = Path(run_dir)
    path.mkdir(parents=True, exist_ok=True)
    with open(path / ".run.json.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        meta = read_run_metadata(path)
        meta.update(common)
        meta[section] = data
        write_run_metadata(path, meta)
