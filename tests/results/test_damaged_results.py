"""Damaged or partial results (issue 27, defect 10), on copies of committed results: a run whose
``metrics.json`` is not a JSON object (garbage, ``[]``, ``null``) is named by the loader — and by
``report`` — while every other run of the sweep is still read and reported."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tcpdelay.errors import ParameterError
from tcpdelay.results.load import load_results
from tcpdelay.results.runs import read_metrics, read_metrics_checked

ROOT = Path(__file__).resolve().parents[2]
STREAMS = ROOT / "results" / "video-tcp-variants-5a-reduced"     # metrics.json is all these runs have
DAMAGE = {"garbage": "{not json", "list": "[]", "null": "null"}


@pytest.fixture
def damaged_sweep(tmp_path):
    """A copy of a committed sweep with three runs' metrics.json damaged; returns (path, damaged
    run directories by kind of damage)."""
    out = tmp_path / STREAMS.name
    shutil.copytree(STREAMS, out, ignore=shutil.ignore_patterns("report.html"))
    runs = sorted(out.glob("cells/*/seed-*"))
    damaged = {}
    for (kind, text), rd in zip(DAMAGE.items(), runs):
        (rd / "metrics.json").write_text(text)
        damaged[kind] = rd
    return out, damaged


def test_the_loader_names_each_damaged_metrics_json_and_reads_the_others(damaged_sweep):
    out, damaged = damaged_sweep
    res = load_results(out)
    runs = {r.run_dir: r for c in res.cells for r in c.runs}
    assert len(runs) == len(list(STREAMS.glob("cells/*/seed-*")))
    for kind, rd in damaged.items():
        r = runs[rd]
        assert r.status == "failed" and str(rd / "metrics.json") in r.error, (kind, r.error)
    others = [r for d, r in runs.items() if d not in damaged.values()]
    assert others and all(r.status == "complete" and r.streams for r in others)
    stored = json.loads((others[0].run_dir / "metrics.json").read_text())["streams"]
    assert others[0].streams == stored


@pytest.mark.parametrize("kind", sorted(DAMAGE))
def test_read_metrics_checked_names_the_file(tmp_path, kind):
    (tmp_path / "metrics.json").write_text(DAMAGE[kind])
    with pytest.raises(ParameterError, match="metrics.json"):
        read_metrics_checked(tmp_path)
    assert read_metrics(tmp_path) is None
    (tmp_path / "metrics.json").unlink()
    assert read_metrics_checked(tmp_path) is None    # no file: nothing to say


def test_report_of_a_sweep_with_damaged_runs_reports_the_others(damaged_sweep, tmp_path):
    out, damaged = damaged_sweep
    proc = subprocess.run([sys.executable, "-m", "tcpdelay", "report", str(out), "--out", str(tmp_path / "r.html"),
                           "--json"], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    doc = json.loads(proc.stdout)
    errors = [r.get("error") or "" for c in doc["cells"] for r in c["runs"]]
    for rd in damaged.values():
        assert any(str(rd / "metrics.json") in e for e in errors), (rd, errors)
    complete = [r for c in doc["cells"] for r in c["runs"] if r.get("status") == "complete"]
    assert len(complete) == len(list(STREAMS.glob("cells/*/seed-*"))) - len(damaged)


def test_metrics_of_a_run_with_a_damaged_metrics_json_says_so(damaged_sweep, capsys):
    from tcpdelay.cli import main

    _, damaged = damaged_sweep
    with pytest.raises(SystemExit) as ex:
        main(["metrics", str(damaged["list"])])
    assert ex.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "metrics.json" in err[0], err
