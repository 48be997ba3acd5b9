"""Reading a scenario: a TOML file or parsed data validated (every cell of its sweep too), trace
paths resolved against the file's folder; and writing one back as TOML."""

from __future__ import annotations

import tomllib
from pathlib import Path as FsPath

from tcpdelay.errors import ParameterError
from tcpdelay.experiments.scenario.experiment import Scenario
from tcpdelay.experiments.scenario.grid import apply_overrides, grid, linked_keys, show_value
from tcpdelay.experiments.scenario.validate import validate


def _resolve_files(scenario: Scenario, base_dir: FsPath | None, source: str) -> Scenario:
    """Make trace paths absolute (relative to the scenario file) and check they exist."""
    if base_dir is None:
        return scenario
    data = scenario.to_data()

    def fix(holder: dict, where: str) -> None:
        if "trace" in holder:
            if not str(holder["trace"]).strip():
                raise ParameterError(f"{source}: {where}.trace: empty path; give a trace file")
            p = FsPath(holder["trace"])
            p = p if p.is_absolute() else (base_dir / p)
            if p.is_dir():
                raise ParameterError(f"{source}: {where}.trace: '{holder['trace']}' is a directory, not a trace file")
            if not p.is_file():
                raise ParameterError(f"{source}: {where}.trace: file '{holder['trace']}' does not exist")
            holder["trace"] = str(p.resolve())

    path = data.get("path", {})
    fix(path, "path")
    for d in ("forward", "reverse"):
        fix(path.get(d, {}), f"path.{d}")
    access = data.get("access") or {}
    fix(access, "access")
    for side in ("left", "right"):
        fix(access.get(side, {}), f"access.{side}")
    for i, f in enumerate(data["flows"]):
        fix(f, f"flows[{i}]")
    # The sweep's values too: a key ending in ".trace" (each value a path), or a value that is a
    # table holding "trace" (e.g. "flows[0]" = [{..., trace = "..."}] or "path.forward" = [...]).
    for key, values in (data.get("sweep") or {}).items():
        if not isinstance(values, list):
            continue            # validate has said what is wrong
        for j, v in enumerate(values):
            where = f"[sweep] {key!r}, value {j + 1}"
            if isinstance(v, str) and any(k.rsplit(".", 1)[-1] == "trace" for k in linked_keys(key, source)):
                holder = {"trace": v}
                fix(holder, where)
                values[j] = holder["trace"]
            elif isinstance(v, dict):
                _fix_tables(v, where, fix)
    return validate(data, source)


def _fix_tables(table: dict, where: str, fix) -> None:
    """``fix`` every table inside ``table`` (itself included) that holds a ``trace``."""
    fix(table, where)
    for k, v in table.items():
        if isinstance(v, dict):
            _fix_tables(v, f"{where}.{k}", fix)


def parse_scenario(data: dict, *, source: str = "scenario", base_dir: str | None = None,
                   sweep: bool = True) -> Scenario:
    """A :class:`Scenario` from plain data (a parsed TOML table). ``source`` names the file in
    messages; ``base_dir`` is where relative trace paths are looked up. Every cell of the sweep
    is validated too, unless ``sweep`` is false (``tcpdelay run``, which ignores the sweep: its
    grid is then neither expanded nor checked)."""
    if not isinstance(data, dict):
        raise ParameterError(f"{source}: a scenario is a table of keys")
    base = _resolve_files(validate(data, source), FsPath(base_dir) if base_dir else None, source)
    if not sweep:
        return base
    for overrides in grid(base, source=source):
        cell_data = apply_overrides(base.to_data(), overrides, source=source)
        cell_data.pop("sweep", None)
        where = source + " [sweep: " + ", ".join(f"{k} = {show_value(v)}" for k, v in overrides.items()) + "]"
        validate(cell_data, where)
    return base


def load_scenario(path: str | FsPath, *, sweep: bool = True) -> Scenario:
    """Read and validate a scenario file (TOML); with ``sweep`` false its ``[sweep]`` grid is
    left unexpanded (see :func:`parse_scenario`)."""
    p = FsPath(path)
    if p.is_dir():
        raise ParameterError(f"{p}: is a directory, not a scenario file")
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ParameterError(f"{p}: no such scenario file") from None
    except (OSError, UnicodeDecodeError) as err:
        raise ParameterError(f"{p}: cannot read: {err}") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise ParameterError(f"{p.name}: not valid TOML: {err}") from None
    return parse_scenario(data, source=p.name, base_dir=str(p.parent), sweep=sweep)


def dump_scenario(scenario: Scenario) -> str:
    """The scenario as TOML text (what a run writes next to its records)."""
    import tomli_w

    return tomli_w.dumps(scenario.to_data())
