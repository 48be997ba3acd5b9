"""A cell's parameters as flat ``key -> value`` pairs, and short labels that tell cells apart.

A sweep's cell is known by its overrides (``{"path.rtt_s": 0.1, "path.forward": {"rate_bps":
3e6, "queue_packets": 100}}``). :func:`flat_params` flattens nested tables to dotted keys
(``path.forward.queue_packets``), so two cells of different sweeps with the same parameters have
the same :func:`params_key` whatever order or nesting wrote them (the comparison matches cells
by it; the CSV export writes one column per key). :func:`short_labels` names each of a list of
cells by the parameters that differ between them only.
"""

from __future__ import annotations

import json
import math

__all__ = ["flat_params", "format_value", "params_key", "short_labels"]


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


def _short_key(key: str) -> str:
    """A dotted key's last part, with its parent when the part is short or the parent is an
    item of a list: ``rtt_s``, ``queue_packets``, ``loss.p``, ``flows[0].profile``, ``cross[1].count``."""
    parts = key.split(".")
    if len(parts) > 1 and (len(parts[-1]) <= 2 or parts[-2].endswith("]")):
        return ".".join(parts[-2:])
    return parts[-1]


def short_labels(params: list[dict[str, object]]) -> list[str]:
    """One label per flat parameter dict: ``key=value`` of the keys whose value differs between
    them (a key missing in a cell is left out of its label); ``-`` when nothing differs."""
    keys: list[str] = []
    for p in params:
        keys.extend(k for k in p if k not in keys)
    differ = [k for k in keys if len({format_value(p[k]) if k in p else None for p in params}) > 1]
    shorts = {k: _short_key(k) for k in differ}
    if len(set(shorts.values())) < len(shorts):  # two keys end alike: write them whole
        shorts = {k: k for k in differ}
    return [" ".join(f"{shorts[k]}={format_value(p[k])}" for k in differ if k in p) or "-" for p in params]
