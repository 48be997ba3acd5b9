"""Issue 27, defect 6: the files --plot and --out write. A path whose folder is missing is one
line and creates nothing (``latency --plot /nonexistent/dir/x.png`` and ``report --out
/nonexist2/r.html`` made folders at the filesystem root); a suffix the writer cannot write is
refused before any work; every command that draws says where, in text and JSON."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MODEL = {
    "delay": ["delay", "--profile", "voip", "--rtt-s", "0.1", "--loss", "0.02"],
    "region": ["region", "--profile", "voip", "--rtts-s", "0.1", "--losses", "0.01,0.02"],
    "playout": ["playout", "--profile", "voip", "--rtt-s", "0.1", "--loss", "0.02"],
    "latency": ["latency", "--size-bytes", "100000", "--rtt-s", "0.1", "--loss", "0.02"],
}


def tcpdelay(*args):
    env = {**os.environ, "COLUMNS": "80"}
    return subprocess.run([sys.executable, "-m", "tcpdelay", *args], capture_output=True, text=True,
                          timeout=300, env=env, cwd=ROOT)


def _refused(res, line: str) -> None:
    assert res.returncode == 2, res.stderr
    assert res.stdout == ""
    assert res.stderr.splitlines() == [f"tcpdelay: error: {line}"]


@pytest.mark.parametrize("command", sorted(MODEL))
def test_plot_into_a_missing_folder_creates_nothing(tmp_path, command):
    target = tmp_path / "nonexistent" / "dir" / "x.png"
    _refused(tcpdelay(*MODEL[command], "--plot", str(target)),
             f"tcpdelay {command}: --plot: cannot write {target}: folder {target.parent} does not exist "
             "(create it first)")
    assert list(tmp_path.iterdir()) == []


def test_report_out_into_a_missing_folder_creates_nothing(tmp_path):
    target = tmp_path / "nonexist2" / "r.html"
    _refused(tcpdelay("report", "results/validate-reduced", "--out", str(target)),
             f"tcpdelay report: --out: cannot write {target}: folder {target.parent} does not exist "
             "(create it first)")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("name", ["x.txt", "r.png", "report"])
def test_report_out_must_be_html(tmp_path, name):
    target = tmp_path / name
    _refused(tcpdelay("report", "results/validate-reduced", "--out", str(target)),
             f"tcpdelay report: --out: {target} must end in one of .html, .htm")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("command", ["delay", "region", "playout"])
def test_model_commands_say_where_the_plot_went(tmp_path, command):
    """``delay``, ``region``, ``playout`` drew silently, and ``delay --json`` had no ``plot_path``."""
    target = tmp_path / f"{command}.svg"
    res = tcpdelay(*MODEL[command], "--plot", str(target))
    assert res.returncode == 0, res.stderr
    assert f"Plot written to {target}" in res.stdout.splitlines()
    assert target.stat().st_size > 1000
    target.unlink()
    res = tcpdelay(*MODEL[command], "--plot", str(target), "--json")
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["plot_path"] == str(target) and target.exists()
