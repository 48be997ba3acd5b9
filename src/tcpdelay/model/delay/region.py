"""Working regions (Brosh et al., Section 6.1, Figures 14-16).

For a profile and a criterion (the ``percentile`` of delay at most ``bound_s``), the model is
solved on a loss x RTT grid; the working region per RTT is the largest grid loss up to which
every grid loss meets the criterion. Grid cells are independent and solved in parallel
processes. Returns plain data (dicts, lists, floats) for the CLI, the report and JSON.
"""

from __future__ import annotations

import math
import os
from concurrent.futures import ProcessPoolExecutor
from typing import Callable

from tcpdelay.errors import ParameterError
from tcpdelay.model.delay.predict import predict, resolve_source
from tcpdelay.model.delay.profiles import Criterion
from tcpdelay.model.delay.stacks import DEFAULT_STACK

DEFAULT_LOSSES = (0.001, 0.005, 0.01, 0.02, 0.03, 0.05, 0.10)
"""Section 5.1's configured drop rates."""
DEFAULT_RTTS_S = (0.02, 0.1, 0.3)
"""Section 5.1's round-trip times (same coast, coast to coast, transcontinental)."""


def _cell(args) -> dict:
    source, rtt, loss, percentile, options = args
    pred = predict(source, rtt_s=rtt, loss=loss, **options)
    value = None if pred.unstable else pred.percentile_s(percentile)
    return {"rtt_s": rtt, "loss": loss, "value_s": value, "unstable": pred.unstable,
            "mean_s": None if pred.unstable else pred.mean_s,
            "truncated_mass": pred.info.get("truncated_mass"),
            "throughput_ratio": pred.info.get("throughput_ratio"),
            "solve_s": pred.info.get("solve_s")}


def working_region(profile=None, *, rate_bps=None, packet_bytes=None, percentile=None, bound_s=None,
                   rtts_s=DEFAULT_RTTS_S, losses=DEFAULT_LOSSES, workers: int | None = None,
                   progress: Callable[[int, int], None] | None = None, **options) -> dict:
    """The working region of a source over a loss x RTT grid.

    Returns ``{"profile", "percentile", "bound_s", "rtts_s", "losses", "cells": [...],
    "max_loss_by_rtt": [{"rtt_s", "max_loss"}], "elapsed_s", "stack"}``; each cell has ``rtt_s``,
    ``loss``, ``value_s`` (the percentile, None when unstable), ``ok``, ``unstable``,
    ``mean_s``, ``truncated_mass``, ``throughput_ratio``, ``solve_s``. ``max_loss`` is None
    when even the smallest grid loss fails. ``options`` go to :func:`predict`.
    """
    import time

    source = resolve_source(profile, rate_bps, packet_bytes)
    crit = Criterion(
        source.criterion.percentile if percentile is None else float(percentile),
        source.criterion.bound_s if bound_s is None else float(bound_s))
    rtts = sorted(float(x) for x in rtts_s)
    loss_list = sorted(float(x) for x in losses)
    if not rtts or not loss_list:
        raise ParameterError("the grid needs at least one RTT and one loss rate")
    for p in loss_list:
        if not (0 <= p < 1):  # NaN fails too
            raise ParameterError(f"losses: {p:g} is outside [0, 1)")
    for r in rtts:
        if not (r > 0 and math.isfinite(r)):
            raise ParameterError(f"rtts_s: {r:g} must be positive and finite")
    # fail fast on bad options in this process, with one clear message
    predict(source, rtt_s=rtts[0], loss=0.0, **options)
    jobs = [(source, r, p, crit.percentile, options) for r in rtts for p in loss_list]
    t0 = time.perf_counter()
    n_workers = workers if workers is not None else min(len(jobs), os.cpu_count() or 1)
    cells: list[dict] = []
    if n_workers <= 1:
        for i, job in enumerate(jobs):
            cells.append(_cell(job))
            if progress:
                progress(i + 1, len(jobs))
    else:
        with ProcessPoolExecutor(max_workers=n_workers) as pool:
            for i, cell in enumerate(pool.map(_cell, jobs)):
                cells.append(cell)
                if progress:
                    progress(i + 1, len(jobs))
    for c in cells:
        c["ok"] = (not c["unstable"]) and c["value_s"] is not None and c["value_s"] <= crit.bound_s + 1e-12
    by_rtt = []
    for r in rtts:
        best = None
        for c in sorted((c for c in cells if c["rtt_s"] == r), key=lambda c: c["loss"]):
            if not c["ok"]:
                break
            best = c["loss"]
        by_rtt.append({"rtt_s": r, "max_loss": best})
    return {
        "profile": source.name, "rate_bps": source.rate_bps, "packet_bytes": source.packet_bytes,
        "percentile": crit.percentile, "bound_s": crit.bound_s,
        "rtts_s": rtts, "losses": loss_list, "cells": cells, "max_loss_by_rtt": by_rtt,
        "elapsed_s": time.perf_counter() - t0,
        "stack": options.get("stack", DEFAULT_STACK),
    }
