"""What the reproductions share: a sweep directory's cells and runs, every media packet's one-way
delay, and how a figure is written.

The per-packet record sets (``sent/``, ``received/``) are not committed (results/.gitignore);
each run's ``packets.parquet`` is (:mod:`tcpdelay.results.packets`). :func:`media_delays`
reads the media packets' delays of a whole sweep from the records when they are there, else from
the runs' ``packets.parquet`` (:func:`tcpdelay.results.packets.run_delays`), and keeps them in
``delays.parquet`` in the sweep directory, in the one delays form of
:mod:`tcpdelay.results.packets` (a cache: it is rebuilt from the runs; the copies committed
before are of results format 1 and read the same).
"""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pyarrow as pa

from tcpdelay.errors import ParameterError
from tcpdelay.results.layout import DELAYS_FILE, PACKETS_FILE, RUN_METADATA, find_runs, has_records, seed_of
from tcpdelay.results.packets import read_delays, run_delays, write_delays
from tcpdelay.results.runs import flow_rows, run_json as _run_json
from tcpdelay.results.testbed_error import LATE_MARK, run_verdict, worst_emulator_lateness_us

#: The repository (its results/, docs/, experiments/ and data/).
REPO_ROOT = Path(__file__).resolve().parents[3]


def save_figure(fig, path: Path) -> None:
    """Lay out and write a reproduction's figure (80 dpi, the size the docs embed)."""
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=80)


def runs(sweep_dir: Path) -> list[dict]:
    """Every run of the sweep: ``{"cell_id", "label", "overrides", "seed", "dir"}``, in the sweep's
    cell order; only runs that have ``run.json`` (finished)."""
    layout = find_runs(sweep_dir)
    if layout.kind != "sweep":
        raise ParameterError(f"{sweep_dir}: not a sweep directory (no sweep.json)")
    return [{"cell_id": cell.id, "label": cell.entry.get("label", ""), "overrides": cell.entry.get("overrides", {}),
             "seed": seed_of(d), "dir": d}
            for cell, d in layout.run_dirs() if (d / RUN_METADATA).exists()]


class CellIndex:
    """The rows of each cell in a delays table (:func:`media_delays`), by integer codes: comparing
    a million cell-id strings per cell took the §5.3 tables 16 of their 32 s."""

    def __init__(self, delays: pa.Table) -> None:
        encoded = delays["cell_id"].combine_chunks().dictionary_encode()
        self.codes = encoded.indices.to_numpy(zero_copy_only=False)
        self._code = {cell: i for i, cell in enumerate(encoded.dictionary.to_pylist())}

    def mask(self, cell_id: str) -> np.ndarray:
        """A boolean mask of the rows of ``cell_id`` (none for a cell the table lacks)."""
        return self.codes == self._code.get(cell_id, -1)


def media_delays(sweep_dir: Path) -> pa.Table:
    """cell_id, seed, flow_id, send_time_s, delay_s (NaN: not delivered) for every media packet
    of the sweep (from the records when present, cached in ``delays.parquet`` at 1 ms / 1 µs
    resolution; the returned values are always the cached ones, so a fresh clone computes the
    same tables)."""
    cache = sweep_dir / DELAYS_FILE
    rs = runs(sweep_dir)
    have_records = all(has_records(r["dir"]) for r in rs) and rs
    have_packets = all((r["dir"] / PACKETS_FILE).is_file() for r in rs) and rs
    sources = [r["dir"] / ("received" if have_records else PACKETS_FILE) for r in rs]

    def fresh() -> bool:
        return cache.exists() and bool(have_records or have_packets) and cache.stat().st_mtime >= max(
            p.stat().st_mtime for p in sources)

    if fresh():
        return _cached(cache)
    if not (have_records or have_packets):
        raise ParameterError(f"{sweep_dir}: the runs have neither their per-packet records nor packets.parquet")
    # One process builds a sweep's cache at a time; the others wait and read it (a fresh clone's
    # test workers and page scripts all asked for the same sweeps at once and each built them all).
    with _build_lock(sweep_dir):
        if fresh():
            return _cached(cache)
        _build(sweep_dir, rs, cache)
    return _cached(cache)


#: The lock file :func:`media_delays` holds while it builds a sweep's cache (results/.gitignore).
DELAYS_LOCK = ".delays.lock"


@contextmanager
def _build_lock(sweep_dir: Path):
    import fcntl

    with open(sweep_dir / DELAYS_LOCK, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _build(sweep_dir: Path, rs: list[dict], cache: Path) -> None:
    parts = [(r, run_delays(r["dir"])) for r in rs]
    send = np.concatenate([t["send_time_s"].to_numpy() for _, t in parts])
    write_delays(cache, np.concatenate([t["flow_id"].to_numpy() for _, t in parts]),
                 np.concatenate([t["delay_s"].to_numpy() for _, t in parts]),
                 seq=np.concatenate([t["seq"].to_numpy() for _, t in parts]),
                 # send times at 1 ms, as the caches have always kept them: the tables computed
                 # from a fresh cache are those computed from a committed one
                 send_time_s=np.round(send * 1e3) / 1e3,
                 keys={"cell_id": np.concatenate([[r["cell_id"]] * t.num_rows for r, t in parts]),
                       "seed": np.concatenate([np.full(t.num_rows, r["seed"], np.int32) for r, t in parts])},
                 source=f"media packets of the sweep {sweep_dir.name}")


def _cached(cache: Path) -> pa.Table:
    return read_delays(cache).select(["cell_id", "seed", "flow_id", "send_time_s", "delay_s"])


def flows_table(run_dir: Path) -> list[dict]:
    return flow_rows(run_dir)


def run_json(run_dir: Path) -> dict:
    return _run_json(run_dir)


def emulator_lateness_us(run_dir: Path) -> tuple[float, float]:
    """The emulator's worst p99 and maximum lateness over both directions (µs): how far behind
    schedule it delivered packets — large values mean the machine disturbed the run."""
    link = run_json(run_dir)["run"].get("link_counters") or {}
    return worst_emulator_lateness_us(link, bottleneck_only=True) or (0.0, 0.0)


def late_mark(sweep_dir: Path, cell_id: str, seed) -> str:
    """:data:`~tcpdelay.results.testbed_error.LATE_MARK` when that run of the sweep recorded that
    its testbed was itself late (docs/testbed.md, "When the testbed itself was late"), else ""
    (also for a run from before the section existed: not recorded, not marked)."""
    run_dir = sweep_dir / "cells" / str(cell_id) / f"seed-{seed}"
    return LATE_MARK if run_verdict(run_dir).late else ""
