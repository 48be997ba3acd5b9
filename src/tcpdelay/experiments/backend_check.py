"""What a backend cannot run of a scenario, found before anything starts: the one check that
``tcpdelay run`` and ``tcpdelay sweep`` make, with ``--dry-run`` or without, so that a dry run
refuses exactly what the run would refuse.

:func:`check_scenario` plans every cell of the grid (its first seed: a seed changes a plan's
random draws, never what it asks of a backend), asks the backend what it cannot run of each plan
(:meth:`tcpdelay.experiments.backends.Backend.unsupported`) and refuses all of it at once, in one
line: each problem once, with the places it is found and, when not every cell has it, which cells.
A run (:func:`tcpdelay.experiments.run.run_scenario`) checks its own plan again with the same
backend method before it writes anything.
"""

from __future__ import annotations

from typing import Any

from tcpdelay.errors import ParameterError
from tcpdelay.experiments.backends import Backend, Unsupported, get_backend, refusal
from tcpdelay.experiments.plan import plan_run
from tcpdelay.experiments.scenario import Scenario, describe
from tcpdelay.experiments.sweep import Cell, expand

#: Cells named in a refusal for one problem at most (then "and N more").
CELLS_NAMED = 3


def check_scenario(scenario: Scenario, backend: str | Backend, cells: list[Cell] | None = None) -> list[str]:
    """Refuse (one :class:`ParameterError`) everything of any cell of ``scenario`` (``cells``,
    default its whole grid) that ``backend`` cannot run; return what it only approximates (the
    backend's notes, each once)."""
    runner = get_backend(backend) if isinstance(backend, str) else backend
    cells = expand(scenario) if cells is None else cells
    found: list[Unsupported] = []
    cells_of: dict[str, list[Cell]] = {}
    notes: list[str] = []
    for cell in cells:
        plan = plan_run(cell.scenario, cell.scenario.seed_list[0])
        for problem in runner.unsupported(plan):
            found.append(problem)
            where = cells_of.setdefault(problem.what, [])
            if not any(c.id == cell.id for c in where):
                where.append(cell)
        notes += [n for n in runner.notes(plan) if n not in notes]
    if found:
        scope = {what: _cells_text(these, cells) for what, these in cells_of.items() if len(these) < len(cells)}
        name = f"scenario {scenario.name!r}" if scenario.name else "this scenario"
        raise ParameterError(refusal(runner.name, found, name, scope))
    return notes


def _cells_text(these: list[Cell], cells: list[Cell]) -> str:
    """Which cells of the grid have a problem: the swept values they share and no other cell has,
    else their labels (at most :data:`CELLS_NAMED`)."""
    head = f"{len(these)} of {len(cells)} cells"
    common = _shared(these)
    ids = {c.id for c in these}
    others = [c for c in cells if c.id not in ids]
    if common and not any(all(_key(c.overrides, k) == v for k, v in common.items()) for c in others):
        return f"{head}: those with {describe(common)}"
    labels = [c.label for c in these[:CELLS_NAMED]]
    more = f" and {len(these) - CELLS_NAMED} more" if len(these) > CELLS_NAMED else ""
    return f"{head}: " + "; ".join(labels) + more


def _shared(cells: list[Cell]) -> dict[str, Any]:
    first = cells[0].overrides
    return {k: v for k, v in first.items() if all(_key(c.overrides, k) == v for c in cells[1:])}


_MISSING = object()


def _key(overrides: dict[str, Any], key: str) -> Any:
    return overrides.get(key, _MISSING)
