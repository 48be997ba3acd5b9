"""run.json of a media run, written by both ends when they share a run directory.

Each end writes its own section ("sender", "receiver") plus the common keys (``clock``,
``clock_source``, ``run_id``) with a read-modify-write under an exclusive ``flock(2)``, so the
two ends can update one run.json concurrently without losing each other's section.

A receiver killed mid-run (SIGKILL, a crash of the machine) cannot write its last records nor its
section's final status: run.json keeps ``"status": "running"`` and the records miss what the
receiver had read but not yet flushed (up to ``RecordWriter.flush_interval_s``, 1 s). The
receiver's section names its process (``process``: pid, start time, boot id), so the next
receiver started on that output folder marks such a run ``interrupted``
(:func:`mark_interrupted_runs`), and ``metrics`` says of a run that is (:func:`interrupted_note`)
that the missing tail is not loss.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
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


#: What the receiver's section says of a run whose receiver ended without closing it.
KILLED = "the receiver ended without closing the run (killed or crashed)"


def _boot_id() -> str:
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            return f.read().strip()
    except OSError:
        return ""


def _start_ticks(pid: int) -> int | None:
    """The process's start time (clock ticks after boot, /proc/PID/stat field 22), which a
    reused pid does not share."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def this_process() -> dict:
    """The receiver's process as its run.json section names it."""
    pid = os.getpid()
    return {"pid": pid, "start_ticks": _start_ticks(pid), "boot_id": _boot_id(), "host": socket.gethostname()}


def process_alive(proc) -> bool:
    """Whether the process a section names still runs (same boot, same pid, same start)."""
    if not isinstance(proc, dict) or not isinstance(proc.get("pid"), int):
        return False
    if proc.get("boot_id") != _boot_id():
        return False
    return _start_ticks(proc["pid"]) == proc.get("start_ticks") is not None


def mark_interrupted_runs(out_dir: str | os.PathLike, per_run: bool) -> list[str]:
    """Mark ``interrupted`` every run in ``out_dir`` (itself, or its sub-folders with
    ``per_run``) whose receiver section still says ``running`` but whose receiver process is
    gone. Returns the run folders marked. Unreadable run.json files, and runs of a receiver on
    another host (a shared folder), are left alone."""
    out = Path(out_dir)
    if not out.is_dir():
        return []
    dirs = [d for d in out.iterdir() if d.is_dir() and not d.is_symlink()] if per_run else [out]
    marked = []
    for d in dirs:
        path = d / "run.json"
        if not path.is_file():
            continue
        try:
            rcv = json.loads(path.read_text()).get("receiver")
        except (OSError, ValueError, AttributeError):
            continue
        if not isinstance(rcv, dict) or rcv.get("status") != "running" or process_alive(rcv.get("process")):
            continue
        if (rcv.get("process") or {}).get("host", socket.gethostname()) != socket.gethostname():
            continue                # another machine's receiver (a shared folder): not ours to judge
        with open(d / ".run.json.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            meta = read_run_metadata(d)
            rcv = meta.get("receiver")
            if not isinstance(rcv, dict) or rcv.get("status") != "running":
                continue
            rcv.update(status="interrupted", interrupted=KILLED)
            write_run_metadata(d, meta)
        marked.append(str(d))
    return marked


def interrupted_note(meta: dict) -> str | None:
    """What ``metrics`` must say of a run whose receiver did not end it (None: it did)."""
    rcv = meta.get("receiver") if isinstance(meta, dict) else None
    if not isinstance(rcv, dict):
        return None
    status = rcv.get("status")
    if status == "running" and process_alive(rcv.get("process")):
        return ("the receiver is still running this run: its records are not complete yet; packets "
                "missing at the end are not loss")
    if status == "running" or rcv.get("interrupted") == KILLED:
        return ("the receiver was killed during this run (run.json says it never ended it): up to "
                "~1 s of packets it had read were never written, so the missing tail of the run is "
                "not loss")
    if status == "interrupted":
        return ("the run was interrupted: packets still in flight when it ended are missing from "
                "'received' and are not loss")
    return None
