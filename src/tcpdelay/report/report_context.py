"""What every section of a results report shares: the results, each cell's short label, each
run's other measures read once (:func:`tcpdelay.results.run_measures.read_run_measures`), and
figures split into parts that never share a title.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from tcpdelay.results import CellData, Results, RunData
from tcpdelay.results.run_measures import RunMeasures, read_run_measures

__all__ = ["CURVES_PER_FIGURE", "ReportContext", "chunks", "part_title"]

#: Curves per figure (more cells are drawn in several figures, each titled with its part).
CURVES_PER_FIGURE = 10


def chunks(items: list, n: int = CURVES_PER_FIGURE) -> list[list]:
    return [items[i:i + n] for i in range(0, len(items), n)] if items else []


def part_title(title: str, index: int, parts: int, what: str = "part") -> str:
    """``title`` alone for one part, else ``title (what i of n)``: figures of one thing split in
    parts never share a title."""
    return title if parts <= 1 else f"{title} ({what} {index + 1} of {parts})"


@dataclass
class ReportContext:
    results: Results
    labels: dict[str, str] = field(default_factory=dict)
    _measures: dict[Path, RunMeasures] = field(default_factory=dict)

    @classmethod
    def of(cls, results: Results) -> "ReportContext":
        from tcpdelay.report.cell_labels import compact_labels

        labels = compact_labels([c.overrides for c in results.cells])
        # a cell without parameters (one run, or a run directory) is known by the scenario's name
        labels = [results.name if (lbl == "-" and not c.overrides) else lbl
                  for c, lbl in zip(results.cells, labels)]
        return cls(results, {c.id: lbl for c, lbl in zip(results.cells, labels)})

    def label(self, cell: CellData) -> str:
        return self.labels.get(cell.id) or cell.label or self.results.name

    def complete(self, cell: CellData) -> list[RunData]:
        return [r for r in cell.runs if r.status == "complete"]

    def measures(self, run: RunData) -> RunMeasures:
        """The run's transfers, cross traffic, queue and TCP statistics (read once)."""
        if run.run_dir not in self._measures:
            self._measures[run.run_dir] = read_run_measures(run.run_dir)
        return self._measures[run.run_dir]

    def problems(self) -> list[str]:
        return [p for m in self._measures.values() for p in m.problems]
