"""The report's section on cross traffic (bulk, web, page loads: every flow that is not a media
flow, a pulled stream or timed transfers, which have their own sections), from each complete
run's ``flows.parquet``: per cell and
kind, the flows, how many completed, their goodput (all flows of the kind together, and per
flow) and a page load's time, as means over the runs; and a bar figure of the same.
"""

from __future__ import annotations

from tcpdelay.report.report_context import ReportContext, chunks, part_title
from tcpdelay.report.table_format import kbps, mean_std, num

__all__ = ["cross_section"]

#: Cells per bar figure.
CELLS_PER_BAR_FIGURE = 40


def cross_section(ctx: ReportContext, report) -> list[dict]:
    """Add the section (nothing when no run had cross traffic); return its data per cell and kind."""
    from tcpdelay.report import results_plots as rp

    out, rows = [], []
    for cell in ctx.results.cells:
        per_kind: dict[str, list[list[dict]]] = {}
        for r in ctx.complete(cell):
            kinds: dict[str, list[dict]] = {}
            for f in ctx.measures(r).cross:
                if f["kind"] == "transfers":  # timed transfers have their own section
                    continue
                kinds.setdefault(str(f["kind"]), []).append(f)
            for k, fl in kinds.items():
                per_kind.setdefault(k, []).append(fl)
        for kind, runs in sorted(per_kind.items()):
            total = mean_std([sum(f.get("goodput_bps") or 0.0 for f in fl) for fl in runs])
            each = mean_std([f.get("goodput_bps") for fl in runs for f in fl])
            loads = mean_std([f.get("page_load_time_s") for fl in runs for f in fl])
            flows = sum(len(fl) for fl in runs)
            done = sum(f.get("status") == "completed" for fl in runs for f in fl)
            entry = {"cell": cell.id, "label": cell.label, "short_label": ctx.label(cell), "kind": kind,
                     "runs": len(runs),
                     "flows_per_run": flows / len(runs), "completed": done, "flows": flows,
                     "goodput_bps": {"mean": total[0], "std": total[1]},
                     "goodput_per_flow_bps": {"mean": each[0], "std": each[1]},
                     "page_load_time_s": {"mean": loads[0], "std": loads[1]} if loads[0] is not None else None}
            out.append(entry)
            rows.append([ctx.label(cell), kind, len(runs), num(flows / len(runs), ".3g"), f"{done} / {flows}",
                         kbps(total[0]), kbps(each[0]), num(loads[0], ".3f")])
    if not out:
        return out
    sec = report.section("Cross traffic (means over the complete runs)")
    sec.table(["parameters", "kind", "runs", "flows", "completed", "goodput kb/s", "per flow kb/s", "page load s"],
              rows, "Goodput: the bytes a kind's flows delivered over the run, all its flows together; per "
                    "flow: the mean of its flows; completed: flows that ended by themselves (a bulk flow "
                    "still running at the run's end is not); page load s: from the first request to the "
                    "last byte of the page.")
    kinds = sorted({e["kind"] for e in out})
    cells = list(dict.fromkeys(e["cell"] for e in out))
    labels = {e["cell"]: e["short_label"] for e in out}
    by = {(e["cell"], e["kind"]): e for e in out}
    parts = chunks(cells, CELLS_PER_BAR_FIGURE)
    for i, part in enumerate(parts):
        panels = []
        for k in kinds:
            es = [by.get((c, k)) for c in part]
            panels.append((f"{k} goodput (kb/s)", [e["goodput_bps"]["mean"] / 1e3 if e else None for e in es],
                           [e["goodput_bps"]["std"] / 1e3 if e else None for e in es]))
            if any(e and e["page_load_time_s"] for e in es):
                panels.append((f"{k} load time (s)",
                               [e["page_load_time_s"]["mean"] if e and e["page_load_time_s"] else None for e in es],
                               [e["page_load_time_s"]["std"] if e and e["page_load_time_s"] else None for e in es]))
        sec.figure(rp.bars_figure([labels[c] for c in part], panels,
                                  title=part_title("Cross traffic goodput", i, len(parts), "cells part")),
                   "Goodput of each kind of cross traffic (all its flows together) per cell: the mean "
                   "over the runs, the bar's line their standard deviation.")
    return out
