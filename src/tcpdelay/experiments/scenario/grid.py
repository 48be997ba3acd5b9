"""The ``[sweep]`` table: dotted keys into the scenario, the Cartesian grid of their values, and
each cell's scenario (the overrides applied)."""

from __future__ import annotations

import copy
import itertools
import math
import re
from typing import Any

from tcpdelay.errors import ParameterError
from tcpdelay.experiments.scenario.experiment import Scenario
from tcpdelay.experiments.scenario.validate import validate

MAX_SWEEP_CELLS = 10_000
"""The most cells a ``[sweep]`` grid may have. Every cell is validated when the file is loaded
and each is a real-time run; a larger grid is refused at once, naming its size, rather than
expanded for minutes."""

_KEY_PART = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)((?:\[\d+\])*)")


def _split_key(key: str, source: str) -> list[str | int]:
    """``"flows[0].tcp.sack"`` -> ``['flows', 0, 'tcp', 'sack']``."""
    parts: list[str | int] = []
    for piece in key.split("."):
        if piece.isdigit():
            parts.append(int(piece))
            continue
        m = _KEY_PART.fullmatch(piece)
        if not m:
            raise ParameterError(f"{source}: sweep key {key!r}: {piece!r} is not a key (use e.g. \"path.loss.p\" or \"flows[0].profile\")")
        parts.append(m.group(1))
        parts.extend(int(i) for i in re.findall(r"\[(\d+)\]", m.group(2)))
    return parts


def apply_overrides(data: dict, overrides: dict[str, Any], *, source: str = "scenario") -> dict:
    """A deep copy of ``data`` with each dotted key set (missing tables are created; a list
    index must exist). A key of several dotted keys joined by ``&`` sets each of them to the
    one value: ``"flows[0].tcp.congestion_control & cross[0].tcp.congestion_control"`` sweeps
    the media's and the cross traffic's variant together (papers/004 runs both on one variant)."""
    out = copy.deepcopy(data)
    for joined, value in overrides.items():
        for key in linked_keys(joined, source):
            _set_key(out, key, value, source)
    return out


def linked_keys(joined: str, source: str = "scenario") -> list[str]:
    """The dotted keys of a sweep key: one, or several joined by ``&``."""
    keys = [k.strip() for k in joined.split("&")]
    if any(not k for k in keys):
        raise ParameterError(f"{source}: sweep key {joined!r}: an empty key around '&'")
    if len(set(keys)) != len(keys):
        raise ParameterError(f"{source}: sweep key {joined!r}: a key is linked to itself")
    return keys


def _set_key(out: dict, key: str, value: Any, source: str) -> None:
    """Set one dotted ``key`` of ``out`` to a copy of ``value`` in place."""
    parts = _split_key(key, source)
    node: Any = out
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        where = ".".join(str(p) for p in parts[: i + 1])
        if isinstance(part, int):
            if not isinstance(node, list) or part >= len(node):
                have = len(node) if isinstance(node, list) else 0
                raise ParameterError(f"{source}: sweep key {key!r}: there is no element [{part}] "
                                     f"(the scenario has {have})")
            if last:
                node[part] = copy.deepcopy(value)
            else:
                node = node[part]
        else:
            if not isinstance(node, dict):
                raise ParameterError(f"{source}: sweep key {key!r}: {where!r} is not a table")
            if last:
                node[part] = copy.deepcopy(value)
            else:
                nxt = node.get(part)
                if nxt is None:
                    nxt = node[part] = [] if isinstance(parts[i + 1], int) else {}
                node = nxt


def grid(scenario: Scenario, *, source: str = "scenario") -> list[dict[str, Any]]:
    """The overrides of every cell of the sweep, in a stable order (keys in file order, values
    in list order, the last key varying fastest); ``[{}]`` without a sweep."""
    sweep = scenario.sweep
    for key, values in sweep.items():
        if any(k == "sweep" or k.startswith("sweep.") for k in linked_keys(key, source)):
            raise ParameterError(f"{source}: sweep key {key!r}: a sweep cannot sweep itself")
        if not isinstance(values, list) or not values:
            raise ParameterError(f"{source}: sweep.\"{key}\": give a non-empty list of values")
    keys = list(sweep)
    cells = math.prod(len(sweep[k]) for k in keys)
    if cells > MAX_SWEEP_CELLS:
        sizes = " x ".join(str(len(sweep[k])) for k in keys)
        raise ParameterError(f"{source}: [sweep]: the grid has {cells} cells ({sizes}); at most "
                             f"{MAX_SWEEP_CELLS} per scenario (split it into several files)")
    return [dict(zip(keys, combo)) for combo in itertools.product(*(sweep[k] for k in keys))]


def cell_scenario(scenario: Scenario, overrides: dict[str, Any]) -> Scenario:
    """The scenario of one cell: the overrides applied, no sweep left."""
    data = apply_overrides(scenario.to_data(), overrides)
    data.pop("sweep", None)
    return validate(data, "scenario")


def show_value(value: Any) -> str:
    """One sweep value as messages and cell labels show it (``0.01``, ``'voip'``)."""
    if isinstance(value, float):
        return f"{value:g}" if math.isfinite(value) else str(value)
    return repr(value) if isinstance(value, str) else str(value)


def describe(overrides: dict[str, Any]) -> str:
    """``path.loss.p=0.01 flows[0].profile='video'`` (``base`` without a sweep)."""
    return " ".join(f"{k}={show_value(v)}" for k, v in overrides.items()) or "base"
