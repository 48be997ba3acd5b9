"""``tcpdelay report DIR1 DIR2 …``: results side by side — committed sweeps (testbed against
ns-3 of one grid; a short and a long run of one scenario), sweeps written by hand with known
delays, and bad input."""

import json
from pathlib import Path

import pytest

from tcpdelay.report.compare import build_comparison, default_labels, load_sides
from tcpdelay.report.html import Report, Section

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "results"


class _KeptFigures(Section):
    """A report section that keeps the matplotlib figures it embeds, to look at their series."""

    def figure(self, fig, caption=""):
        self.figures.append(fig)
        return super().figure(fig, caption)


class _Report(Report):
    def section(self, title):
        sec = _KeptFigures(title)
        sec.figures = []
        self.sections.append(sec)
        return sec


def _series(fig) -> list[str]:
    """The legend's entries of the figure's (first) axes: one per series drawn."""
    ax = fig.axes[0]
    return [t.get_text() for t in ax.get_legend().get_texts()]


def test_two_committed_sweeps_one_series_and_one_column_per_directory():
    """droptail-5.3 (15 cells) against droptail-5.3-long (6 of the same cells, 10x longer):
    the 6 shared cells x 5 flows are the rows; every figure has a series per directory and
    every table a column per directory (and their difference)."""
    sides = load_sides([RESULTS / "droptail-5.3", RESULTS / "droptail-5.3-long"], ["short", "long"])
    report = _Report("cmp")
    doc = build_comparison(sides, report)
    assert doc["match"] == "parameters"
    assert [r["label"] for r in doc["results"]] == ["short", "long"]
    assert [r["matched_cells"] for r in doc["results"]] == [6, 6]
    assert len(doc["rows"]) == 30 and {r["flow"] for r in doc["rows"]} == {f"voip#{i}" for i in range(5)}
    # a row is one cell of each directory, with the same parameters
    by_id = [{c.id: c.overrides for c in s.results.cells} for s in sides]
    for r in doc["rows"]:
        a, b = r["cells"]
        assert by_id[0][a] == by_id[1][b]
    figs = [f for s in report.sections for f in s.figures]
    assert len(figs) == doc["figures"] > len(doc["metrics"])
    for f in figs:
        assert _series(f) == ["short", "long"]
    for m in doc["metrics"]:
        assert all(len(v) == 2 for v in m["values"]) and len(m["values"]) == 30
    tables = [t for s in report.sections[1:] for t in s.items if hasattr(t, "columns")]
    assert len(tables) == len(doc["metrics"])
    for t in tables:
        assert list(t.columns) == ["parameters", "flow", "short", "long", "long − short"] and len(t.rows) == 30
    # the long runs' mean delay of the first row is what the long sweep's own report says
    mean = next(m for m in doc["metrics"] if m["key"] == "delay_mean_s")
    cell = next(c for c in sides[1].results.cells if c.id == doc["rows"][0]["cells"][1])
    own = next(a for a in sides[1].aggs[cell.id] if a["name"] == doc["rows"][0]["flow"])
    assert mean["values"][0][1] == pytest.approx(own["delay"]["mean_s"])


def test_testbed_against_ns3_of_the_same_grid(tmp_path, capsys, cli_exit):
    """validate-grid (84 cells: two stacks) against validate-grid-ns3 (the 42 newreno-2008
    cells): the 42 shared cells, labelled by --label, in one HTML page."""
    out = tmp_path / "cmp.html"
    assert cli_exit(["report", str(RESULTS / "validate-grid"), str(RESULTS / "validate-grid-ns3"),
                     "--label", "testbed", "--label", "ns-3", "--out", str(out), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [(r["label"], r["cells"], r["matched_cells"]) for r in doc["results"]] == [("testbed", 84, 42),
                                                                                      ("ns-3", 42, 42)]
    assert len(doc["rows"]) == 42 and all(r["parameters"]["flows[0].tcp.preset"] == "newreno-2008"
                                          for r in doc["rows"])
    # short labels (compact_labels): the parameters that differ between the rows only, in ms and %
    assert all("preset" not in r["label"] and "rtt=" in r["label"] for r in doc["rows"])
    html = out.read_text()
    assert doc["report_path"] == str(out) and html.count("data:image/png;base64,") == doc["figures"]
    assert "<th>testbed</th><th>ns-3</th>" in html


@pytest.fixture
def two_sweeps(tmp_path, make_run):
    """Sweep A: cells loss 1 % (voip at 50 ms) and 5 % (60 ms). Sweep B: the 5 % cell (80 ms,
    seq 0 lost) and a 10 % cell (90 ms) that A lacks."""
    def sweep(name, cells):
        out = tmp_path / name
        out.mkdir()
        index = [{"id": cid, "index": i, "overrides": {"path": {"loss": {"p": p}}}, "label": f"p={p}"}
                 for i, (cid, p, _, _) in enumerate(cells)]
        (out / "sweep.json").write_text(json.dumps({"name": name, "seeds": [1], "cells": index}))
        for cid, _, d, lost in cells:
            make_run(out / "cells" / cid / "seed-1", [d] * 50, lost=lost)
        return out
    a = sweep("a", [("a1", 0.01, 0.05, ()), ("a5", 0.05, 0.06, ())])
    b = sweep("b", [("b5", 0.05, 0.08, {0}), ("b10", 0.1, 0.09, ())])
    return a, b


def test_cells_matched_by_parameters_with_numbers_by_hand(two_sweeps, tmp_path, capsys, cli_exit):
    a, b = two_sweeps
    assert cli_exit(["report", str(a), str(b), "--out", str(tmp_path / "c.html"), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [r["label"] for r in doc["results"]] == ["a", "b"]  # the directories' names
    assert doc["match"] == "parameters"
    ((row),) = doc["rows"]  # only the 5 % cell is in both
    assert row["cells"] == ["a5", "b5"] and row["flow"] == "voip" and row["parameters"] == {"path.loss.p": 0.05}
    values = {m["key"]: m["values"][0] for m in doc["metrics"]}
    assert values["delay_mean_s"] == pytest.approx([0.06, 0.08])
    assert values["loss_rate"] == pytest.approx([0.0, 1 / 50])
    assert values["delay_p95_s"] == pytest.approx([0.06, 0.08])
    assert values["late_fraction_at_0.1_s"] == [0.0, 0.0]


def test_cells_matched_by_position_when_no_parameters_are_shared(tmp_path, make_run):
    """Two sweeps of different parameters and as many cells: cell i with cell i."""
    dirs = []
    for name, p in (("x", 0.01), ("y", 0.02)):
        out = tmp_path / name
        cells = [{"id": f"{name}{i}", "index": i, "overrides": {"path.rtt_s": r, "loss": p}, "label": "-"}
                 for i, r in enumerate((0.1, 0.2))]
        out.mkdir()
        (out / "sweep.json").write_text(json.dumps({"name": name, "seeds": [1], "cells": cells}))
        for c in cells:
            make_run(out / "cells" / c["id"] / "seed-1", [c["overrides"]["path.rtt_s"]] * 10)
        dirs.append(out)
    doc = build_comparison(load_sides(dirs), Report("t"))
    assert doc["match"] == "position"
    assert [r["cells"] for r in doc["rows"]] == [["x0", "y0"], ["x1", "y1"]]
    assert [r["label"] for r in doc["rows"]] == ["#1 rtt=100ms", "#2 rtt=200ms"]


def test_default_labels_tell_directories_apart(tmp_path):
    assert default_labels([tmp_path / "a" / "seed-1", tmp_path / "b" / "seed-1"]) == ["a/seed-1", "b/seed-1"]
    assert default_labels(["x/run", "y/other"]) == ["run", "other"]


@pytest.mark.parametrize("args, message", [
    (lambda a, b: [a, b, "--label", "only-one"], "1 label(s) for 2 RESULTS directories"),
    (lambda a, b: [a, b, "--label", "s", "--label", "s"], "labels must be non-empty and differ"),
    (lambda a, b: [a, str(Path(a) / "sweep.json")], "is not a directory"),
    (lambda a, b: [a, str(Path(a) / "cells")], "neither a sweep directory"),
    (lambda a, b: [a, a], "the same directory is given twice"),
    (lambda a, b: [a, str(RESULTS / "latency-cardwell-fig3")], "has no media flow to compare"),
    (lambda a, b: [a, str(RESULTS / "droptail-5.3-long")], "share no cell"),
    (lambda a, b: [a, "--label", "one"], "--label names the directories of a comparison"),
])
def test_bad_input_is_one_line_and_exit_2(two_sweeps, capsys, cli_exit, args, message):
    a, b = (str(p) for p in two_sweeps)
    assert cli_exit(["report", *args(a, b)]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1


def test_one_directory_is_todays_report(two_sweeps, tmp_path, capsys, cli_exit):
    a, _ = two_sweeps
    assert cli_exit(["report", str(a), "--out", str(tmp_path / "one.html"), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["kind"] == "sweep" and [c["id"] for c in doc["cells"]] == ["a1", "a5"]
    assert "rows" not in doc and "match" not in doc
