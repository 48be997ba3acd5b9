"""The commands' one warning line and the tables' mark of a cell whose testbed was itself late,
on a sweep laid out by hand with hand-made ``testbed_error`` sections (the real runs that make
one are tests/experiments/test_testbed_error_run.py); a run recorded before the section existed
prints nothing about it."""

from __future__ import annotations

import json

import pytest
from rich.console import Console

from tcpdelay.results.testbed_error import LATE_MARK, SECTION

WARNING = "warning: the testbed itself was late"


def _section(p99_us: float) -> dict:
    return {"emulator_lateness_us": {"bottleneck a_to_b": {"p99": p99_us, "max": 2 * p99_us},
                                     "bottleneck b_to_a": {"p99": 3.0, "max": 9.0}},
            "send_lateness_us": {"0": {"p99": 900.0, "max": 1500.0, "count": 100}}, "recv_lag_us": {},
            "machine": None, "smallest_delay_s": 0.05}


def _add_section(run_dir, sec: dict) -> None:
    meta = json.loads((run_dir / "run.json").read_text())
    meta[SECTION] = sec
    (run_dir / "run.json").write_text(json.dumps(meta))


@pytest.fixture
def sweep_dir(tmp_path, make_run):
    """Cell a: seed 1 recorded before the section existed, seed 2 late (emulator p99 4.2 ms);
    cell b: seed 1 on time."""
    out = tmp_path / "sweep"
    cells = [{"id": "aaaaaaaaaaaa", "index": 0, "overrides": {"path.loss.p": 0.01}, "label": "path.loss.p=0.01"},
             {"id": "bbbbbbbbbbbb", "index": 1, "overrides": {"path.loss.p": 0.05}, "label": "path.loss.p=0.05"}]
    out.mkdir()
    (out / "sweep.json").write_text(json.dumps({"name": "by-hand", "seeds": [1, 2], "cells": cells}))
    make_run(out / "cells" / "aaaaaaaaaaaa" / "seed-1", [0.05] * 100)
    make_run(out / "cells" / "aaaaaaaaaaaa" / "seed-2", [0.05] * 100)
    make_run(out / "cells" / "bbbbbbbbbbbb" / "seed-1", [0.06] * 100)
    _add_section(out / "cells" / "aaaaaaaaaaaa" / "seed-2", _section(4200.0))
    _add_section(out / "cells" / "bbbbbbbbbbbb" / "seed-1", _section(40.0))
    return out


def _warnings(text: str) -> list[str]:
    return [line for line in text.splitlines() if WARNING in line]


def test_report_marks_the_late_cell_and_warns_once(sweep_dir, tmp_path, capsys, cli_exit):
    assert cli_exit(["report", str(sweep_dir), "--out", str(tmp_path / "r.html")]) == 0
    out, err = capsys.readouterr()
    (line,) = _warnings(err)
    assert line.startswith("tcpdelay report: warning: the testbed itself was late in 1 of 3 runs: worst "
                           "emulator bottleneck a_to_b lateness p99 4.20 ms (max 8.40 ms) > bound 1.00 ms")
    assert "aaaaaaaaaaaa/seed-2" in line
    rows = [row.split()[0] for row in out.splitlines() if row.startswith("loss=")]
    assert rows == [f"loss=1%{LATE_MARK}", "loss=5%"], out
    assert "When the testbed itself was late" in " ".join(out.split())       # the footnote
    html = (tmp_path / "r.html").read_text()
    assert LATE_MARK in html and "When the testbed itself was late" in html
    assert cli_exit(["report", str(sweep_dir), "--out", str(tmp_path / "r.html"), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["testbed_error"]["late_cells"] == ["aaaaaaaaaaaa"] and doc["testbed_error"]["runs_recorded"] == 2
    runs = {r["run_dir"].split("cells/")[1]: r["testbed_error"] for c in doc["cells"] for r in c["runs"]}
    assert runs["aaaaaaaaaaaa/seed-1"]["recorded"] is False and runs["aaaaaaaaaaaa/seed-1"]["section"] is None
    assert runs["aaaaaaaaaaaa/seed-2"]["late"] and runs["aaaaaaaaaaaa/seed-2"]["section"]["smallest_delay_s"] == 0.05
    assert runs["bbbbbbbbbbbb/seed-1"]["recorded"] and not runs["bbbbbbbbbbbb/seed-1"]["late"]


def test_metrics_warns_for_a_late_run_and_says_nothing_of_an_old_one(sweep_dir, capsys, cli_exit):
    late = sweep_dir / "cells" / "aaaaaaaaaaaa" / "seed-2"
    assert cli_exit(["metrics", str(late)]) == 0
    out, err = capsys.readouterr()
    assert len(_warnings(err)) == 1 and "testbed error: worst emulator bottleneck a_to_b" in " ".join(out.split())
    old = sweep_dir / "cells" / "aaaaaaaaaaaa" / "seed-1"
    assert cli_exit(["metrics", str(old)]) == 0
    out, err = capsys.readouterr()
    assert not _warnings(err) and "testbed" not in out
    assert cli_exit(["metrics", str(old), "--json"]) == 0
    te = json.loads(capsys.readouterr().out)["testbed_error"]
    assert te["recorded"] is False and te["late"] is False and te["section"] is None
    on_time = sweep_dir / "cells" / "bbbbbbbbbbbb" / "seed-1"
    assert cli_exit(["metrics", str(on_time)]) == 0
    out, err = capsys.readouterr()
    # its worst: the sender, nearest its own bound (0.9 of 3 ms) of all its parts
    assert not _warnings(err)
    assert "testbed error: worst sender of flow 0 lateness p99 0.90 ms (max 1.50 ms) <= bound 3.00 ms" in " ".join(out.split())


def test_the_sweep_table_marks_the_late_cell_with_a_footnote(sweep_dir, capsys):
    from tcpdelay.cli.experiments import _human, _warn_late
    from tcpdelay.cli.testbed_warning import describe

    rows = []
    for cell, seed, ov in (("aaaaaaaaaaaa", 1, 0.01), ("aaaaaaaaaaaa", 2, 0.01), ("bbbbbbbbbbbb", 1, 0.05)):
        rd = sweep_dir / "cells" / cell / f"seed-{seed}"
        rows.append({"cell_id": cell, "overrides": {"path.loss.p": ov}, "seed": seed, "run_dir": str(rd),
                     "status": "complete", "summary": {}, "testbed_error": describe(rd)})
    doc = {"command": "sweep", "scenario": "by-hand", "scenario_file": "x.toml", "out_dir": str(sweep_dir),
           "runs": rows, "ran": 0, "skipped": 3, "failed": [], "wall_s": 0.1}
    console = Console(record=True, width=100)
    _human(doc)(console)
    text = console.export_text()
    cells = [line.split()[0] for line in text.splitlines() if line.startswith("loss=")]
    assert cells == [f"loss=1%{LATE_MARK}", f"loss=1%{LATE_MARK}", "loss=5%"], text
    assert "When the testbed itself" in " ".join(text.split())
    _warn_late("sweep", doc)
    (line,) = _warnings(capsys.readouterr().err)
    assert line.startswith("tcpdelay sweep: warning: the testbed itself was late in 1 of 3 runs: worst emulator "
                           "bottleneck a_to_b lateness p99 4.20 ms")


def test_validate_marks_the_late_point_and_warns_once(tmp_path, make_run, capsys):
    """A validation-shaped sweep by hand, its voip point's run late: the point's JSON carries
    each run's verdict with its section, the table marks the point, one warning line."""
    from tcpdelay.cli.validate import _human, _warn_late
    from tcpdelay.cli.validate import evaluate_validation

    root = tmp_path / "v"
    cells = [{"id": "111111111111", "index": 0, "label": "a", "overrides": {
                 "flows[0].profile": "voip", "flows[0].tcp.preset": "newreno-2008", "path.rtt_s": 0.1,
                 "path.forward.loss.p": 0.01}},
             {"id": "222222222222", "index": 1, "label": "b", "overrides": {
                 "flows[0].profile": "video", "flows[0].tcp.preset": "linux-default", "path.rtt_s": 0.1,
                 "path.forward.loss.p": 0.01}}]
    root.mkdir()
    (root / "sweep.json").write_text(json.dumps({"name": "validate-5.1", "seeds": [1], "cells": cells}))
    (root / "scenario.toml").write_text('name = "validate-5.1"\nduration_s = 4.0\n')
    make_run(root / "cells" / "111111111111" / "seed-1", [0.05] * 200)
    make_run(root / "cells" / "222222222222" / "seed-1", [0.06] * 200)
    _add_section(root / "cells" / "111111111111" / "seed-1", _section(4200.0))
    doc = evaluate_validation(root)
    voip, video = doc["points"]
    assert voip["testbed_error"]["worst"]["late"] and voip["testbed_error"]["runs"][0]["section"]["smallest_delay_s"]
    assert video["testbed_error"]["worst"]["recorded"] is False and video["testbed_error"]["runs"][0]["section"] is None
    console = Console(record=True, width=200)
    _human(doc, "linux")(console)
    text = console.export_text()
    assert [line for line in text.splitlines() if LATE_MARK in line and "voip" in line]
    assert not [line for line in text.splitlines() if LATE_MARK in line and "video" in line]
    _warn_late(doc)
    (line,) = _warnings(capsys.readouterr().err)
    assert line.startswith("tcpdelay validate: warning: the testbed itself was late in 1 of 2 runs: worst emulator")
