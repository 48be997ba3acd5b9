"""The comparison as table rows of text (the CLI's table, the page's table and the main job's
measured check): parameters, measured / model mean, p95 and std in ms, relative errors in %."""

from __future__ import annotations

import math
from typing import Any

#: The headers of :func:`table_rows` (the CLI and the measured check index into this layout).
TABLE_COLUMNS = ["profile", "stack", "RTT ms", "loss %", "runs",
                 "mean ms measured", "mean ms model", "rel. err", "rel. err TCP-level",
                 "p95 ms measured", "p95 ms model", "rel. err",
                 "std ms measured", "std ms model", "rel. err",
                 "realized drop ratio: rel. err of the model's mean there",
                 "PFTK / rate", "RTOs per drop", "model P(timeout | loss)", "emulator late p99 ms"]

#: Where :func:`table_rows` puts the hol_ramp variant's mean and error (after the paper's mean).
_HOL_AT = TABLE_COLUMNS.index("rel. err TCP-level") + 1


def table_columns(*, hol_ramp: bool = False) -> list[str]:
    """The headers of :func:`table_rows` with the same ``hol_ramp``."""
    cols = list(TABLE_COLUMNS)
    if hol_ramp:
        cols[_HOL_AT:_HOL_AT] = ["mean ms model + hol_ramp", "rel. err (hol_ramp)"]
    return cols


def ms_text(x: float | None) -> str:
    """Seconds as milliseconds with one decimal; "—" when missing or not finite."""
    return "—" if x is None or not math.isfinite(x) else f"{x * 1e3:.1f}"


def error_text(x: float | None) -> str:
    """A relative error as a signed whole percentage; "—" when missing."""
    return "—" if x is None else f"{x * 100:+.0f} %"


def table_rows(points: list[dict], *, hol_ramp: bool = False) -> list[list[Any]]:
    """One row per point: parameters, measured / model mean, p95, std, relative errors
    (:data:`TABLE_COLUMNS`). ``hol_ramp``: also the hol_ramp variant's mean and its relative
    error, after the paper's mean (:func:`table_columns`)."""
    rows = []
    for p in points:
        meas, mod, err = p.get("measured") or {}, p.get("model") or {}, p.get("relative_error") or {}
        unstable = mod.get("unstable")
        rows.append([
            p["profile"], p["stack"], f"{p['rtt_s'] * 1e3:g}", f"{p['loss'] * 100:g}", p["runs"],
            ms_text(meas.get("mean_s")), "unstable" if unstable else ms_text(mod.get("mean_s")),
            error_text(err.get("mean_s")), error_text(err.get("tcp_level_mean_s")),
            ms_text(meas.get("p95_s")), "unstable" if unstable else ms_text(mod.get("p95_s")),
            error_text(err.get("p95_s")),
            ms_text(meas.get("std_s")), "unstable" if unstable else ms_text(mod.get("std_s")),
            error_text(err.get("std_s")),
            _realized(p),
            "—" if mod.get("throughput_ratio") is None else f"{mod['throughput_ratio']:.2f}",
            "—" if meas.get("rtos_per_drop") is None else f"{meas['rtos_per_drop']:.2f}",
            "—" if mod.get("timeout_probability") is None else f"{mod['timeout_probability']:.2f}",
            "—" if meas.get("emulator_lateness_p99_us") is None else f"{meas['emulator_lateness_p99_us'] / 1e3:.1f}",
        ])
        if hol_ramp:
            hol, err_h = p.get("model_hol_ramp") or {}, p.get("relative_error_hol_ramp") or {}
            rows[-1][_HOL_AT:_HOL_AT] = ["unstable" if hol.get("unstable") else ms_text(hol.get("mean_s")),
                                         error_text(err_h.get("mean_s"))]
    return rows


def claim_hol_ramp_text(c: dict) -> str:
    """A claim check's hol_ramp variant: its worst relative error and at which loss."""
    err, loss = c.get("worst_relative_error_hol_ramp"), c.get("worst_loss_hol_ramp")
    return "—" if err is None or loss is None else f"{error_text(err)} ({loss * 100:g} %)"


def _realized(p: dict) -> str:
    """The drop ratio the link realized and the model's mean's relative error there."""
    r = p.get("model_at_realized_loss")
    if not r:
        return "—"
    err = "unstable" if r["unstable"] else error_text(r["relative_error_mean"])
    return f"{r['loss'] * 100:.2f} %: {err}"
