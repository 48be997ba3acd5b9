"""A run's markers: ``complete.json``, written last when the run completed, or ``failed.json``
with its error. A run directory with neither was interrupted (or is still running); its partial
data is not a result.

``complete.json`` holds ``cell_id, seed, started_unix_s, wall_s, summary`` (the runner's
summary) and the results format version (:mod:`tcpdelay.results.version`); ``failed.json``
holds ``cell_id, seed, error, traceback`` and is written even when the disk is full
(:mod:`tcpdelay.results.failure_marker`).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from tcpdelay.jsonio import write_json
from tcpdelay.results import failure_marker
from tcpdelay.results.layout import COMPLETE, FAILED
from tcpdelay.results.version import stamp, version_of


def reserve(run_dir: str | os.PathLike) -> None:
    """Set aside room for ``failed.json`` before the run writes anything (raises OSError when
    the disk has none)."""
    failure_marker.reserve(run_dir)


def write_complete(run_dir: str | os.PathLike, record: dict) -> dict:
    """Mark the run complete (``record`` with the format version; atomic) and give back the
    room kept for a failure marker. Returns what was written."""
    doc = stamp(record)
    write_json(Path(run_dir) / COMPLETE, doc)
    failure_marker.release(run_dir)
    return doc


def write_failed(run_dir: str | os.PathLike, record: dict) -> None:
    """Mark the run failed (``record``: its error and traceback), into the reserved room when
    there is one. Raises OSError when it cannot be written."""
    failure_marker.write_failed(Path(run_dir) / FAILED, record)


def is_complete(run_dir: str | os.PathLike) -> bool:
    return (Path(run_dir) / COMPLETE).is_file()


def is_failed(run_dir: str | os.PathLike) -> bool:
    return (Path(run_dir) / FAILED).is_file()


@dataclass(frozen=True)
class RunStatus:
    """What a run's markers say."""

    status: str
    """complete | failed | incomplete (no marker: interrupted or still running)"""
    complete: dict | None = None
    """``complete.json`` (an empty dict when it cannot be read)."""
    error: str | None = None
    """``failed.json``'s error."""

    @property
    def wall_s(self) -> float | None:
        return (self.complete or {}).get("wall_s")

    @property
    def summary(self) -> dict:
        return (self.complete or {}).get("summary", {})


def read_status(run_dir: str | os.PathLike) -> RunStatus:
    """The run's markers read: complete (with ``complete.json``), failed (with its error; an
    unreadable ``failed.json`` says so) or incomplete. Raises ParameterError when
    ``complete.json`` was written in a results format newer than this code reads."""
    rd = Path(run_dir)
    if (rd / COMPLETE).is_file():
        try:
            doc = json.loads((rd / COMPLETE).read_text())
        except (OSError, ValueError):
            doc = {}
        if not isinstance(doc, dict):
            doc = {}
        version_of(doc, str(rd / COMPLETE))
        return RunStatus("complete", complete=doc)
    if (rd / FAILED).is_file():
        try:
            error = json.loads((rd / FAILED).read_text()).get("error")
        except (OSError, ValueError, AttributeError):
            error = f"{FAILED} unreadable"
        return RunStatus("failed", error=error)
    return RunStatus("incomplete")


#: The sections ``tcpdelay send`` and ``tcpdelay recv`` write into a run directory's ``run.json``
#: (:mod:`tcpdelay.transport.runmeta`); a run of ``tcpdelay run`` keeps its ends' elsewhere.
MEDIA_RUN_ENDS = ("sender", "receiver")


def read_media_run_status(run_dir: str | os.PathLike, meta: dict) -> RunStatus:
    """What a ``tcpdelay send``/``recv`` run directory's ``run.json`` (``meta``) says of the
    run, which has no ``complete.json`` (only ``tcpdelay run`` and ``sweep`` write one): complete
    when every end that wrote into it says ``completed``, incomplete while an end says
    ``running`` (or none wrote), else failed with that end's status and error. A ``run.json``
    without an end's section (a ``tcpdelay run`` interrupted before ``complete.json``) is
    incomplete, as before."""
    if not isinstance(meta, dict):
        return RunStatus("incomplete")
    ends = {k: meta[k] for k in MEDIA_RUN_ENDS if isinstance(meta.get(k), dict)}
    if not ends or "run" in meta or any(e.get("status") in (None, "running") for e in ends.values()):
        return RunStatus("incomplete")
    bad = {k: e for k, e in ends.items() if e.get("status") != "completed"}
    if not bad:
        return RunStatus("complete", complete={})
    why = []
    for k, e in bad.items():
        result = e.get("result") if isinstance(e.get("result"), dict) else {}
        err = result.get("error") or result.get("failure")
        why.append(f"{k} {e.get('status')}" + (f": {err}" if err else ""))
    return RunStatus("failed", error="; ".join(why))
