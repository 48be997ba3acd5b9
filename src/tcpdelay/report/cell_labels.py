"""Short, distinct labels for the cells of a sweep, for tables a person reads in a terminal.

A cell is known by its overrides (``{"flows[0].profile": "voip", "path.rtt_s": 0.1,
"path.forward.loss.p": 0.02}``); its stored label writes them whole
(``flows[0].profile='voip' path.rtt_s=0.1 …``), too long for 80 columns and the same in its
first 20 characters on every row. :func:`compact_labels` is a function over *all* the cells
of a sweep: each label keeps only the parameters whose value differs between the cells, named
by the shortest tail of the key that is unambiguous (``profile``, ``rtt``, ``loss``; ``cc`` for
a congestion control) and valued in the unit a person reads (``rtt=100ms``, ``loss=2%``,
``rate=4Mb/s``, ``cc=ccpd(kd=2000)``)::

    profile=voip rtt=100ms loss=2%

:func:`shared_params` writes, in the same form, what every cell has in common (a table's
caption). Labels are checked to be distinct; when the short form would merge two cells, the
keys are written whole, and identical cells get their position (``#3``).
"""

from __future__ import annotations

import json
import math

__all__ = ["compact_labels", "compact_value", "shared_params"]

#: Key names people shorten (the unit moves to the value).
_ABBREVIATIONS = {"congestion_control": "cc", "initcwnd": "initcwnd", "heuristics": "heuristics"}
#: Last key parts that say nothing alone: the part before them is kept (``loss.model``).
_VAGUE = {"model", "kind", "name", "p", "enabled", "value", "count"}
#: Tables that are one value, written ``name(k=v,…)``: a congestion control with its parameters.
_NAMED = {"congestion_control"}


def _flat(overrides: dict, prefix: str = "") -> dict[str, object]:
    """Nested tables flattened to dotted keys, except a congestion control with its parameters
    (``{"name": "ccpd", "kd": 2000}``), which is one value."""
    out: dict[str, object] = {}
    for k, v in overrides.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict) and not (str(k).split(".")[-1] in _NAMED and "name" in v):
            out.update(_flat(v, f"{key}."))
        else:
            out[key] = v
    return out


def _parts(key: str) -> list[str]:
    """A key's parts, first of linked keys (``a & b``) only; ``loss.p`` reads as ``loss``."""
    parts = key.split(" & ")[0].strip().split(".")
    if len(parts) >= 2 and parts[-1] == "p" and parts[-2] == "loss":
        parts = parts[:-1]
    return parts


def _unit(name: str) -> tuple[str, str]:
    """(the name without its unit suffix, the unit): ``rtt_s`` -> (``rtt``, ``s``)."""
    for suffix in ("_s", "_bps", "_bytes", "_packets", "_segments"):
        if name.endswith(suffix) and len(name) > len(suffix):
            return name[: -len(suffix)], suffix[1:]
    return name, ""


def _base(key: str) -> str:
    return _unit(_parts(key)[-1])[0]


def _name(parts: list[str], depth: int) -> str:
    tail = parts[-depth:]
    base, _ = _unit(tail[-1])
    tail = tail[:-1] + [_ABBREVIATIONS.get(base, base)]
    return ".".join(tail)


def _number(x: float) -> str:
    return format(x, ".4g") if isinstance(x, float) else str(x)


def compact_value(value: object, unit: str = "", loss: bool = False) -> str:
    """``value`` in the unit a person reads: seconds as ms below 1 s, a loss probability in %,
    bit rates in kb/s or Mb/s, sizes with B, a named table as ``name(k=v,…)``."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (int, float)) and not (isinstance(value, float) and not math.isfinite(value)):
        if loss:
            return f"{_number(value * 100.0)}%"
        if unit == "s":
            return f"{_number(value * 1e3)}ms" if abs(value) < 1 else f"{_number(value)}s"
        if unit == "bps":
            for name, scale in (("Gb/s", 1e9), ("Mb/s", 1e6), ("kb/s", 1e3)):
                if abs(value) >= scale:
                    return f"{_number(value / scale)}{name}"
            return f"{_number(value)}b/s"
        if unit == "bytes":
            return f"{value:g}B" if isinstance(value, float) and value != int(value) else f"{int(value)}B"
        if unit == "packets":
            return f"{_number(value)}pkt"
        if unit == "segments":
            return f"{_number(value)}seg"
        return _number(value)
    if isinstance(value, dict):
        items = {k: v for k, v in value.items() if k != "name"}
        inner = ",".join(f"{_unit(k)[0]}={compact_value(v, _unit(k)[1])}" for k, v in items.items())
        return f"{value.get('name')}({inner})" if "name" in value else inner
    if isinstance(value, (list, tuple)):
        return ",".join(compact_value(v, unit) for v in value)
    return str(value)


def _value(key: str, value: object) -> str:
    parts = key.split(" & ")[0].strip().split(".")
    loss = len(parts) >= 2 and parts[-1] == "p" and parts[-2] == "loss"
    return compact_value(value, _unit(parts[-1])[1], loss=loss)


def _names(keys: list[str]) -> dict[str, str]:
    """Each key's shortest unambiguous tail, at least two parts when the last part is vague.
    Two keys may share a name when their units differ (``queue=100pkt``, ``queue=100000B``)."""
    out: dict[str, str] = {}
    depth = {k: 2 if _base(k) in _VAGUE and len(_parts(k)) > 1 else 1 for k in keys}
    while True:
        out = {k: _name(_parts(k), depth[k]) for k in keys}
        named = [(out[k], _unit(_parts(k)[-1])[1]) for k in keys]
        clashes = [k for k, n in zip(keys, named) if named.count(n) > 1 and depth[k] < len(_parts(k))]
        if not clashes:
            return out
        for k in clashes:
            depth[k] += 1


def _differing(flats: list[dict]) -> list[str]:
    keys: list[str] = []
    for f in flats:
        keys.extend(k for k in f if k not in keys)
    if len(flats) == 1:
        return keys
    return [k for k in keys
            if len({json.dumps(f.get(k, "\0missing"), sort_keys=True, default=str) for f in flats}) > 1]


def compact_labels(overrides: list[dict]) -> list[str]:
    """One short label per cell (``overrides``: each cell's, in sweep order): the parameters that
    differ between the cells, compactly; ``-`` for a cell without overrides. Distinct for
    distinct cells."""
    flats = [_flat(o or {}) for o in overrides]
    keys = _differing(flats)
    names = _names(keys)
    labels = [" ".join(f"{names[k]}={_value(k, f[k])}" for k in keys if k in f) for f in flats]
    if len(set(labels)) < len(labels):  # the short form merged two cells: the keys in full
        labels = [" ".join(f"{k}={json.dumps(f[k], sort_keys=True, default=str)}" for k in keys if k in f)
                  for f in flats]
    labels = [lbl or "-" for lbl in labels]
    if len(set(labels)) < len(labels):  # identical cells: their position tells them apart
        seen: dict[str, int] = {}
        for lbl in labels:
            seen[lbl] = seen.get(lbl, 0) + 1
        labels = [f"{lbl} #{i + 1}" if seen[lbl] > 1 else lbl for i, lbl in enumerate(labels)]
    return labels


def shared_params(overrides: list[dict]) -> str:
    """What every cell (two or more) sets alike, in the labels' form; empty when nothing is."""
    flats = [_flat(o or {}) for o in overrides]
    if len(flats) < 2:
        return ""
    differ = set(_differing(flats))
    keys = [k for k in flats[0] if k not in differ and all(k in f for f in flats)]
    names = _names(keys)
    return " ".join(f"{names[k]}={_value(k, flats[0][k])}" for k in keys)
