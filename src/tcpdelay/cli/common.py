"""Shared pieces of the command line: the --json flag, output, parameter types."""

from __future__ import annotations

import json
import math
from typing import Any, Callable

import click
import numpy as np
from rich.console import Console
from rich.table import Table

json_option = click.option(
    "--json", "as_json", is_flag=True, help="Print one JSON object (documented keys) instead of text."
)

PROBABILITY = click.FloatRange(min=0.0, max=1.0, max_open=True)
POSITIVE = click.FloatRange(min=0.0, min_open=True)
NON_NEGATIVE = click.FloatRange(min=0.0)


def jsonable(value: Any) -> Any:
    """Plain JSON types; non-finite floats become null (JSON has no inf/NaN)."""
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return [jsonable(v) for v in value.tolist()]
    if isinstance(value, (np.bool_, bool)):
        return bool(value)
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        f = float(value)
        return f if math.isfinite(f) else None
    return value


def emit(result: dict, as_json: bool, human: Callable[[Console], None]) -> None:
    """Print ``result`` as JSON, or call ``human`` with a rich console."""
    if as_json:
        click.echo(json.dumps(jsonable(result), indent=2))
    else:
        human(Console())


def key_value_table(title: str, rows: list[tuple[str, str]]) -> Table:
    table = Table(title=title, show_header=False, title_justify="left")
    table.add_column(style="bold")
    table.add_column(justify="right")
    for k, v in rows:
        table.add_row(k, v)
    return table


def fmt_s(seconds: float | None) -> str:
    """Seconds for people: ms below 1 s."""
    if seconds is None or not math.isfinite(seconds):
        return "—" if seconds is None else ("∞" if seconds > 0 else str(seconds))
    return f"{seconds * 1e3:.1f} ms" if abs(seconds) < 1 else f"{seconds:.3f} s"


def fmt_bps(bps: float | None) -> str:
    if bps is None or not math.isfinite(bps):
        return "—" if bps is None else "∞"
    for unit, scale in (("Gb/s", 1e9), ("Mb/s", 1e6), ("kb/s", 1e3)):
        if abs(bps) >= scale:
            return f"{bps / scale:.3g} {unit}"
    return f"{bps:.3g} b/s"
