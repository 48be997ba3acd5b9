"""The version of the results format: what a directory written by ``tcpdelay run`` /
``tcpdelay sweep`` (and the delay caches built from it) looks like on disk.

As flent's ``ResultSet`` does, every file that starts a result carries the version it was
written in (``format_version`` in ``sweep.json`` and in each run's ``complete.json``; a key of the
metadata of a delays file), and a reader takes a missing version as version 1 — everything
written before the version was recorded, i.e. all of ``results/`` as committed. A version newer
than this code knows is refused with one line rather than misread.

Versions:

1. No version recorded. A sweep's delay cache (``delays.parquet``, of the reproduction scripts)
   holds ``cell_id, seed, flow_id, send_time_ms, delay_us`` (int32; ``-1``: never received).
2. ``format_version`` in ``sweep.json`` and ``complete.json``; every delays file, a run's
   ``packets.parquet`` of kind ``delays`` and a sweep's ``delays.parquet`` alike, has the one
   form of :mod:`tcpdelay.results.packets` (integer µs, null where unknown or never received).
   Run directories are otherwise as in version 1, which reads identically.
3. A testbed run's ``run.json`` carries ``testbed_error``, the run's own error (the emulator's
   lateness per link, each sender's lateness against its schedule, receive lags where measured,
   CPU pressure and throttling over the run; :mod:`tcpdelay.results.testbed_error`). Runs of
   versions 1 and 2 have none: their testbed error reads as "not recorded", everything else
   as before.
"""

from __future__ import annotations

from tcpdelay.errors import ParameterError

#: The version this code writes.
FORMAT_VERSION = 3
#: The key that holds it (in JSON files and in a Parquet file's ``tcpdelay.packets`` metadata).
VERSION_KEY = "format_version"


def version_of(doc: dict, where: str) -> int:
    """The format version ``doc`` (a marker, an index or a file's metadata, read from ``where``)
    was written in: 1 when it records none. Raises ParameterError for a version this code cannot
    read (newer than :data:`FORMAT_VERSION`, or not a positive integer)."""
    v = doc.get(VERSION_KEY, 1) if isinstance(doc, dict) else 1
    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
        raise ParameterError(f"{where}: {VERSION_KEY} {v!r} is not a results format version")
    if v > FORMAT_VERSION:
        raise ParameterError(f"{where}: written in results format {v}; this tcpdelay reads formats "
                             f"1 to {FORMAT_VERSION} (update tcpdelay to read it)")
    return v


def stamp(doc: dict) -> dict:
    """``doc`` with the current :data:`FORMAT_VERSION` recorded."""
    return {**doc, VERSION_KEY: FORMAT_VERSION}
