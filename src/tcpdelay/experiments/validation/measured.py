"""The measured side of the validation: per cell of a loaded validation sweep, the pooled delay
statistics of its media flow, the run counters (realized drop ratio, TCP retransmissions and
RTOs, the emulator's lateness) and the RTT and drop probability the runs were given, as the runs
recorded them (their ``scenario.toml``), not as the sweep's key strings spell them.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import numpy as np

from tcpdelay.experiments.scenario import load_scenario
from tcpdelay.experiments.validation.model_side import LATE_AT_S
from tcpdelay.results import CellData, aggregate_cell, late_at, load_results
from tcpdelay.results.layout import RUN_METADATA, SCENARIO_FILE
from tcpdelay.results.markers import read_status
from tcpdelay.results.testbed_error import worst, worst_emulator_lateness_us


def recorded_path(cell: CellData, cell_dir: Path | None = None) -> tuple[float | None, float | None]:
    """``(rtt_s, loss)`` a cell's runs ran with: the round-trip propagation delay (forward plus
    reverse one-way delay, as the run set up its link) and the data direction's Bernoulli drop
    probability (None for another loss model). Read from the scenario the first of its runs that
    kept one recorded, else from the cell's own ``scenario.toml`` in ``cell_dir`` (what the sweep
    ran there; validate-wide's runs kept only their delays), else — a directory written without
    scenario files — from the sweep's overrides. A scenario file that does not read is a
    :class:`~tcpdelay.errors.ParameterError` naming it."""
    files = [r.run_dir / SCENARIO_FILE for r in cell.runs]
    if cell_dir is not None:
        files.append(cell_dir / SCENARIO_FILE)
    for f in files:
        if f.is_file():
            path = load_scenario(f, sweep=False).path
            fwd, rev = path.direction("forward"), path.direction("reverse")
            loss = fwd.loss.p if fwd.loss.model == "bernoulli" else None
            return fwd.delay_s + rev.delay_s, loss
    ov = cell.overrides
    return ov.get("path.rtt_s"), ov.get("path.forward.loss.p")


def _run_extras(run_dir: Path) -> dict:
    """From a run's run.json: the realized data-segment drop ratio, TCP retransmissions and
    RTOs, and the emulator's worst lateness."""
    try:
        meta = json.loads((run_dir / RUN_METADATA).read_text())
    except (OSError, ValueError):
        return {}
    link = (meta.get("run") or {}).get("link_counters") or {}
    fwd = link.get("a_to_b") or {}
    stats = meta.get("tcp_stats") or []
    late = worst_emulator_lateness_us(link, bottleneck_only=True) or (0.0, 0.0)
    return {
        "packets_in": fwd.get("packets_in"),
        "loss_drops": (fwd.get("drops") or {}).get("loss"),
        "lateness_max_us": late[1],
        "lateness_p99_us": late[0],
        "total_retrans": sum(int(s.get("total_retrans") or 0) for s in stats),
        "total_rto": _rtos(meta, stats),
    }


def _rtos(meta: dict, stats: list[dict]) -> int:
    """The run's retransmission timeouts: TCP_INFO's ``tcpi_total_rto`` (Linux 6.7 on); from an
    older kernel (a reference-kernel guest's 6.1) the sender's own ``TCPTimeouts`` counter (its
    host runs the one media sender)."""
    if not stats or any(s.get("total_rto") is not None for s in stats):
        return sum(int(s.get("total_rto") or 0) for s in stats)
    return sum(int(((m.get("sender") or {}).get("tcp_counters") or {}).get("TCPTimeouts") or 0)
               for m in (meta.get("run") or {}).get("media") or [])


def measured_points(results) -> list[dict]:
    """Per cell of a loaded validation sweep (:func:`tcpdelay.report.results.load_results`):
    the pooled measured statistics of its media flow and the run counters. The keys ``_delays``
    and ``_seeds`` hold every packet's delay (seconds, NaN: not received) and its run's seed."""
    out = []
    for cell in results.cells:
        ov = cell.overrides
        rtt_s, loss = recorded_path(cell, results.path / "cells" / cell.id if results.kind == "sweep" else None)
        agg = aggregate_cell(cell)
        flow = agg[0] if agg else None
        extras = [_run_extras(r.run_dir) for r in cell.runs if r.status == "complete"]
        pin = sum(e.get("packets_in") or 0 for e in extras)
        drops = sum(e.get("loss_drops") or 0 for e in extras)
        point = {
            "cell_id": cell.id,
            "profile": ov.get("flows[0].profile"),
            "stack": ov.get("flows[0].tcp.preset"),
            "rtt_s": rtt_s,
            "loss": loss,
            "runs": flow["runs"] if flow else 0,
            "runs_failed": sum(r.status == "failed" for r in cell.runs),
            "measured": None,
            # the worst of its complete runs' own errors, and each run's (docs/testbed.md)
            "testbed_error": _testbed_error(cell),
        }
        if flow and flow["delay"]["count"]:
            pairs = [(r.seed, f.delay_s) for r in cell.runs if r.status == "complete"
                     for f in r.flows if f.flow_id == flow["flow_id"]]
            point["_delays"] = np.concatenate([d for _, d in pairs])
            point["_seeds"] = np.concatenate([np.full(d.size, -1 if s is None else s) for s, d in pairs])
            d = flow["delay"]
            point["measured"] = {
                "mean_s": d["mean_s"], "p95_s": d.get("p95_s"), "p99_s": d.get("p99_s"), "std_s": d["std_s"],
                "min_s": d["min_s"], "max_s": d["max_s"], "packets": flow["packets"], "received": flow["received"],
                "app_loss_rate": flow["loss_rate"],
                "late_fraction": {f"{x:g}": late_at(flow, x) for x in LATE_AT_S},
                "segment_drop_ratio": drops / pin if pin else None,
                "tcp_retransmissions": sum(e.get("total_retrans") or 0 for e in extras),
                "tcp_rtos": sum(e.get("total_rto") or 0 for e in extras),
                "rtos_per_drop": (sum(e.get("total_rto") or 0 for e in extras) / drops) if drops else None,
                "emulator_lateness_max_us": max((e.get("lateness_max_us") or 0.0) for e in extras) if extras else None,
                "emulator_lateness_p99_us": max((e.get("lateness_p99_us") or 0.0) for e in extras) if extras else None,
            }
            complete = [r for r in cell.runs if r.status == "complete"]
            if len(complete) == 1 and not (complete[0].run_dir / RUN_METADATA).is_file():
                point["measured"].update(_recorded_counters(complete[0].run_dir))
        out.append(point)
    return out


def _testbed_error(cell: CellData) -> dict:
    """A point's ``testbed_error``: ``worst`` (the verdict shown for the cell, None without a
    complete run) and ``runs`` (each complete run's verdict with its section)."""
    done = [r for r in cell.runs if r.status == "complete" and r.testbed is not None]
    w = worst(r.testbed for r in done)
    return {"worst": None if w is None else w.to_dict(),
            "runs": [{**r.testbed.to_dict(), "section": r.testbed_section} for r in done]}


#: The run counters (from run.json) of a point's measured statistics.
_COUNTERS = ("segment_drop_ratio", "tcp_retransmissions", "tcp_rtos", "rtos_per_drop",
             "emulator_lateness_max_us", "emulator_lateness_p99_us")


def _recorded_counters(run_dir: Path) -> dict:
    """The counters of a run whose run.json was never kept (validate-wide's runs: only their
    delays and their point's counters survive): the ones recorded in its complete.json
    (``summary.measured``), so that recomputing the model does not lose them."""
    measured = read_status(run_dir).summary.get("measured") or {}
    return {k: measured[k] for k in _COUNTERS if k in measured}


def read_measured_points(out_dir: str | os.PathLike, *,
                         progress: Callable[[int, int], None] | None = None) -> list[dict]:
    """:func:`measured_points` of the validation sweep in ``out_dir``; ``progress(done, total)``
    after each run read."""
    return measured_points(load_results(out_dir, progress=progress))
