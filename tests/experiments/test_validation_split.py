"""The validation's pieces that had no test of their own: the RTT and loss read from what the
runs recorded (identical to the sweep's keys on every committed validation), the prose file, the
job's page callback, and the layering of ``experiments/`` (the validation and the main job
alike: neither imports ``report/`` or ``cli/``)."""

from __future__ import annotations

import ast
import json
import shutil
import tomllib
from pathlib import Path

import pytest

from tcpdelay.experiments.validation import evaluate_validation, recorded_path
from tcpdelay.experiments.validation import texts
from tcpdelay.results import CellData, RunData
from tcpdelay.results.layout import seed_dirs

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "results"
VALIDATIONS = sorted(p.name for p in RESULTS.iterdir() if (p / "validation.json").is_file())
EXPERIMENTS = ROOT / "src" / "tcpdelay" / "experiments"
PACKAGE = EXPERIMENTS / "validation"


def _cell(sweep: Path, cell: dict) -> CellData:
    runs = [RunData(None, d, "complete") for d in seed_dirs(sweep / "cells" / cell["id"])]
    return CellData(cell["id"], cell.get("label") or "-", dict(cell["overrides"]), runs)


def test_the_committed_validations_are_all_here():
    assert {"validate-reduced", "validate-wide", "validate-grid", "validate-boundary"} <= set(VALIDATIONS)


@pytest.mark.parametrize("name", VALIDATIONS)
def test_recorded_rtt_and_loss_are_the_committed_ones(name):
    """On every committed validation the RTT and drop probability read from the runs' own
    scenario (validate-wide's runs kept none: its cells' scenario) are the sweep's keys and the
    committed validation.json's, to the bit."""
    sweep = RESULTS / name
    committed = {p["cell_id"]: p for p in json.loads((sweep / "validation.json").read_text())["points"]}
    cells = json.loads((sweep / "sweep.json").read_text())["cells"]
    assert len(cells) == len(committed)
    for c in cells:
        rtt_s, loss = recorded_path(_cell(sweep, c), sweep / "cells" / c["id"])
        assert (rtt_s, loss) == (c["overrides"]["path.rtt_s"], c["overrides"]["path.forward.loss.p"]), (name, c)
        assert (rtt_s, loss) == (committed[c["id"]]["rtt_s"], committed[c["id"]]["loss"]), (name, c)


def _sweep_with_wrong_keys(tmp_path: Path, *, run_scenario: bool) -> Path:
    """A copy of one validate-reduced cell (p = 0.5 %, RTT 100 ms) whose sweep index claims
    p = 3 % and RTT 300 ms; with ``run_scenario`` false its run's scenario.toml is removed (as
    validate-wide's runs), leaving the cell's."""
    src = RESULTS / "validate-reduced"
    index = json.loads((src / "sweep.json").read_text())
    (cell,) = [c for c in index["cells"] if c["overrides"]["path.forward.loss.p"] == 0.005
               and c["overrides"]["flows[0].profile"] == "voip"
               and c["overrides"]["flows[0].tcp.preset"] == "newreno-2008"]
    out = tmp_path / "v"
    shutil.copytree(src / "cells" / cell["id"], out / "cells" / cell["id"])
    shutil.copy(src / "scenario.toml", out / "scenario.toml")
    cell["overrides"].update({"path.forward.loss.p": 0.03, "path.rtt_s": 0.3})
    (out / "sweep.json").write_text(json.dumps({**index, "cells": [cell]}))
    if not run_scenario:
        (out / "cells" / cell["id"] / "seed-1" / "scenario.toml").unlink()
    return out


@pytest.mark.parametrize("run_scenario", [True, False])
def test_the_point_takes_what_the_run_recorded_not_the_key(tmp_path, run_scenario):
    out = _sweep_with_wrong_keys(tmp_path, run_scenario=run_scenario)
    (p,) = evaluate_validation(out)["points"]
    assert (p["rtt_s"], p["loss"]) == (0.1, 0.005)
    assert p["model"]["one_way_s"] == pytest.approx(0.05)


def test_the_run_recorded_beats_the_cell(tmp_path):
    """The run's own scenario comes first: a cell scenario saying otherwise is not read."""
    out = _sweep_with_wrong_keys(tmp_path, run_scenario=True)
    (cell_dir,) = (out / "cells").iterdir()
    text = (cell_dir / "scenario.toml").read_text().replace("p = 0.005", "p = 0.05")
    assert tomllib.loads(text)["path"]["forward"]["loss"]["p"] == 0.05
    (cell_dir / "scenario.toml").write_text(text)
    (p,) = evaluate_validation(out)["points"]
    assert p["loss"] == 0.005


def test_without_scenario_files_the_keys_are_used(tmp_path, make_run):
    """A sweep written by hand (no scenario files in its cells) falls back to the sweep's keys."""
    out = tmp_path / "v"
    cell = {"id": "333333333333", "index": 0, "label": "c", "overrides": {
        "flows[0].profile": "voip", "flows[0].tcp.preset": "newreno-2008", "path.rtt_s": 0.3,
        "path.forward.loss.p": 0.02}}
    out.mkdir()
    (out / "sweep.json").write_text(json.dumps({"name": "validate-5.1", "seeds": [1], "cells": [cell]}))
    make_run(out / "cells" / cell["id"] / "seed-1", [0.2] * 100)
    (p,) = evaluate_validation(out)["points"]
    assert (p["rtt_s"], p["loss"]) == (0.3, 0.02)


def test_a_damaged_run_scenario_is_one_clear_error(tmp_path):
    from tcpdelay.errors import ParameterError

    out = _sweep_with_wrong_keys(tmp_path, run_scenario=True)
    (run_scenario,) = out.glob("cells/*/seed-1/scenario.toml")
    run_scenario.write_text("name = \n")
    with pytest.raises(ParameterError, match="scenario.toml"):
        evaluate_validation(out)


def test_the_job_writes_its_files_then_calls_the_page(tmp_path):
    out = _sweep_with_wrong_keys(tmp_path, run_scenario=True)
    plain = evaluate_validation(out)
    assert "report_path" not in plain and not (out / "validation.html").exists()
    assert Path(plain["delays_path"]) == out / "validation-delays.parquet"
    calls = []

    def page(out_dir, points, doc):
        assert Path(doc["delays_path"]).is_file()   # written before the page
        calls.append((out_dir, points, doc))
        return out_dir / "page.html"

    doc = evaluate_validation(out, page=page)
    ((out_dir, points, given),) = calls
    assert out_dir == out and given is doc and doc["report_path"] == str(out / "page.html")
    # the page gets the points with what only it needs: every packet's delay, the model's PMF
    (p,) = points
    assert p["_delays"].size == p["measured"]["packets"] and p["_prediction"] is not None
    assert {k for k in doc["points"][0] if k.startswith("_")} == set()


def test_texts_every_section_is_used_and_fills_in():
    used = set()
    for f in [*PACKAGE.glob("*.py"), ROOT / "src" / "tcpdelay" / "report" / "validation_page.py"]:
        for node in ast.walk(ast.parse(f.read_text())):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "text"
                    and node.args and isinstance(node.args[0], ast.Constant)):
                used.add(node.args[0].value)
    assert used == set(texts.names())
    assert "MSS 1448 bytes" in texts.text("what-this-is", mss_bytes=1448)
    with pytest.raises(KeyError):
        texts.text("what-this-is")


def test_texts_file_format():
    parsed = texts.parse_texts("preamble {x}\n## a\n\none\n  two {n}\n\n## b\nthree\n")
    assert parsed == {"a": "one two {n}", "b": "three"}
    with pytest.raises(ValueError, match="twice"):
        texts.parse_texts("## a\nx\n## a\ny\n")


def test_texts_ship_with_the_package():
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["tcpdelay"]
    assert "experiments/validation/" + texts.TEXTS_FILE in data
    assert (PACKAGE / texts.TEXTS_FILE).is_file()


def _imported(tree: ast.AST) -> list[str]:
    """Every module name an ``import`` or ``from ... import`` in ``tree`` names, the names a
    ``from`` imports included (``from tcpdelay import report`` gives ``tcpdelay.report``)."""
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            names += [node.module or ""] + [f"{node.module}.{a.name}" for a in node.names if node.module]
    return names


def _higher_floors(f: Path) -> list[str]:
    return [name for name in _imported(ast.parse(f.read_text()))
            if name.split(".")[:2] in (["tcpdelay", "report"], ["tcpdelay", "cli"])]


def test_the_science_imports_neither_report_nor_cli():
    """experiments/ (the validation, the main job, everything under it) never imports report/ or
    cli/: the pages are handed in (``page=``) by the CLI."""
    files = sorted(EXPERIMENTS.rglob("*.py"))
    assert PACKAGE / "job.py" in files and EXPERIMENTS / "evaluate.py" in files
    assert {f.relative_to(EXPERIMENTS).as_posix(): _higher_floors(f) for f in files if _higher_floors(f)} == {}


def test_the_import_check_sees_every_form(tmp_path):
    f = tmp_path / "m.py"
    f.write_text("import tcpdelay.cli.common\nfrom tcpdelay import report\nfrom tcpdelay.report.html import Report\n"
                 "from tcpdelay.results import load_results\nimport tcpdelay.reporting\n")
    assert _higher_floors(f) == ["tcpdelay.cli.common", "tcpdelay.report", "tcpdelay.report.html",
                                 "tcpdelay.report.html.Report"]
