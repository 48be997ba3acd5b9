"""A cell's parameters as flat ``key -> value`` pairs, and short labels that tell cells apart.

A sweep's cell is known by its overrides (``{"path.rtt_s": 0.1, "path.forward": {"rate_bps":
3e6, "queue_packets": 100}}``). :func:`flat_params` flattens nested tables to dotted keys
(``path.forward.queue_packets``), so two cells of different sweeps with the same parameters have
the same :func:`params_key` whatever order or nesting wrote them (the comparison matches cells
by it; the CSV export writes one column per key). The labels a person reads are
:func:`tcpdelay.report.cell_labels.compact_labels`.
"""

from __future__ import annotations

import json
import math

__all__ = ["flat_params", "format_value", "params_key"]


def flat_params(overrides: dict, prefix: str = "") -> dict[str, object]:
    """``overrides`` with nested tables flattened to dotted keys, in the order given."""
    out: dict[str, object] = {}
    for k, v in overrides.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(flat_params(v, f"{key}."))
        else:
            out[key] = v
    return out


def params_key(overrides: dict) -> str:
    """A canonical text of the cell's parameters (equal parameters, equal text)."""
    return json.dumps(flat_params(overrides), sort_keys=True, default=str)


def format_value(v: object) -> str:
    """A parameter value as a person writes it (``0.1``, ``voip``, ``3e+06``)."""
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, float):
        return format(v, ".6g") if math.isfinite(v) else str(v)
    if isinstance(v, list | tuple):
        return ",".join(format_value(x) for x in v)
    return str(v)
