"""Issue 27, defect 3: tables a person can read in a terminal of 80 columns, or piped (rich
draws 80 columns when stdout is not a terminal): rows told apart by short labels, titles broken
between phrases, row names in the unit shown, ``region`` split to fit."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tcpdelay.report.cell_labels import compact_labels, shared_params

ROOT = Path(__file__).resolve().parents[2]


def tcpdelay(*args, columns: int = 80):
    env = {**os.environ, "COLUMNS": str(columns)}
    return subprocess.run([sys.executable, "-m", "tcpdelay", *args], capture_output=True, text=True,
                          timeout=600, env=env, cwd=ROOT)


def _fits(text: str, width: int = 80) -> None:
    """Every line fits, but the one that gives a file's path (never broken, to be copied whole)."""
    for line in text.splitlines():
        if not line.startswith(("Report written to ", "Plot written to ")):
            assert len(line) <= width, f"{len(line)} columns: {line!r}"


def test_report_rows_of_a_sweep_are_told_apart_at_80_columns(tmp_path):
    """Every row was ``flows[0].profile='…``; now each cell is named by what differs."""
    res = tcpdelay("report", "results/validate-reduced", "--out", str(tmp_path / "r.html"))
    assert res.returncode == 0, res.stderr
    _fits(res.stdout)
    assert "…" not in res.stdout and "flows[0]" not in res.stdout and "'" not in res.stdout
    rows = [line for line in res.stdout.splitlines() if line.startswith("profile=")]
    labels = [re.split(r"\s{2,}", line)[0] for line in rows]
    assert len(labels) == 12 and len(set(labels)) == 12, labels
    assert "profile=voip preset=newreno-2008 loss=0.5%" in labels
    assert "every cell: rtt=100ms" in res.stdout      # what every cell shares, said once
    header = next(line for line in res.stdout.splitlines() if line.startswith("cell"))
    assert re.split(r"\s{2,}", header.strip())[1:] == ["loss %", "mean ms", "p95 ms", "std ms"]


def test_report_of_a_sweep_with_several_flows_per_cell_names_each_cell_once(tmp_path):
    res = tcpdelay("report", "results/droptail-5.3", "--out", str(tmp_path / "r.html"))
    assert res.returncode == 0, res.stderr
    _fits(res.stdout)
    labelled = [line for line in res.stdout.splitlines() if line.startswith("cross[1].count=")]
    assert len(labelled) == 15 and len(set(re.split(r"\s{2,}", x)[0] for x in labelled)) == 15
    assert "cross[1].count=0 queue=100pkt" in res.stdout and "cross[1].count=0 queue=50000B" in res.stdout


def test_labels_of_every_committed_sweep_are_distinct_and_plain():
    for sweep in sorted((ROOT / "results").glob("*/sweep.json")):
        overrides = [c["overrides"] for c in json.loads(sweep.read_text())["cells"]]
        labels = compact_labels(overrides)
        assert len(set(labels)) == len(labels), (sweep, labels)
        for label in labels:
            assert "{" not in label and "'" not in label, (sweep, label)


def test_label_forms():
    cc = [{"streams[0].tcp.congestion_control": {"name": "ccpd", "kd": 2000}},
          {"streams[0].tcp.congestion_control": {"name": "ccpd", "kd": 4000}},
          {"streams[0].tcp.congestion_control": "cubic"}]
    assert compact_labels(cc) == ["cc=ccpd(kd=2000)", "cc=ccpd(kd=4000)", "cc=cubic"]
    grid = [{"flows[0].profile": p, "path.rtt_s": r, "path.forward.loss.p": x}
            for p in ("voip", "video") for r in (0.1, 1.5) for x in (0.02,)]
    assert compact_labels(grid) == ["profile=voip rtt=100ms", "profile=voip rtt=1.5s",
                                    "profile=video rtt=100ms", "profile=video rtt=1.5s"]
    assert shared_params(grid) == "loss=2%"
    # two keys ending alike are told apart by the part before
    both = [{"path.forward.loss.p": 0.01, "access.right.loss.p": 0.0},
            {"path.forward.loss.p": 0.02, "access.right.loss.p": 0.05}]
    assert compact_labels(both) == ["forward.loss=1% right.loss=0%", "forward.loss=2% right.loss=5%"]
    assert compact_labels([{"flows[0].rate_bps": 9e5}, {"flows[0].rate_bps": 4e6}]) == ["rate=900kb/s", "rate=4Mb/s"]
    assert compact_labels([{}, {}]) == ["- #1", "- #2"]     # identical cells still differ
    assert compact_labels([{}]) == ["-"]


def test_titles_break_between_phrases_not_inside_one():
    """``Throughput: RTT 100 ms, loss 0.01,\\nT0 0.3 s, MSS 1460 B`` was cut at the table's width
    (``loss 0.01,`` / ``T0 0.3 s``, ``w1`` / ``10``)."""
    res = tcpdelay("throughput", "--rtt-s", "0.1", "--loss", "0.01", columns=40)
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert lines[:2] == ["Throughput: RTT 100 ms, loss 0.01,", "T0 0.3 s, MSS 1460 B"]
    res = tcpdelay("latency", "--size-bytes", "100000", "--rtt-s", "0.1", "--loss", "0.02")
    assert res.stdout.splitlines()[0] == "Latency: 100000 B (69 segments), RTT 100 ms, loss 0.02, T0 0.3 s, w1 10"
    res = tcpdelay("latency", "--size-bytes", "100000", "--rtt-s", "0.1", "--loss", "0.02", columns=50)
    assert res.stdout.splitlines()[:2] == ["Latency: 100000 B (69 segments), RTT 100 ms,",
                                           "loss 0.02, T0 0.3 s, w1 10"]



def test_advise_title_breaks_between_phrases():
    """``Advice: … budget: at most 5 %`` / ``later than 200.0 ms`` was the table title cut at any
    space at 80 columns."""
    res = tcpdelay("advise", "--profile", "voip", "--rtt-s", "0.1", "--loss", "0.02")
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines()[:2] == ["Advice: voip (69.6 kb/s), RTT 100 ms, loss 2 % (random);",
                                           "budget: at most 5 % later than 200.0 ms"]
    _fits(res.stdout)

def test_delay_rows_are_named_in_the_unit_shown():
    """``mean_s`` stood beside ``60.6 ms``."""
    res = tcpdelay("delay", "--profile", "voip", "--rtt-s", "0.1", "--loss", "0.02")
    assert res.returncode == 0, res.stderr
    _fits(res.stdout)
    assert "_s " not in res.stdout
    names = [line.split("│")[1].strip() for line in res.stdout.splitlines() if line.startswith("│")]
    assert names[:7] == ["mean", "std", "p50", "p95", "p99", "p99.9", "max"]


def test_region_with_many_losses_and_rtts_fits_80_columns():
    losses = "0.001,0.002,0.003,0.005,0.01,0.015,0.02,0.03,0.04,0.05,0.07,0.1,0.15"
    rtts = "0.01,0.02,0.03,0.04,0.05,0.06,0.07,0.08,0.09"
    res = tcpdelay("region", "--profile", "voip", "--stack", "paper", "--losses", losses, "--rtts-s", rtts)
    assert res.returncode == 0, res.stderr
    _fits(res.stdout)
    assert "…" not in res.stdout
    out = res.stdout.splitlines()
    headers = [line for line in out if line.startswith("loss ")]
    assert len(headers) == 2  # the RTTs go on in a second table
    assert [f"RTT {r} ms" for r in range(10, 100, 10)] == re.findall(r"RTT \d+ ms", " ".join(headers))
    for x in losses.split(","):   # every loss rate a row, in both tables
        assert sum(line.startswith(f"{float(x) * 100:g} %") for line in out) == 2, x
    assert sum(bool(re.match(r"max loss\s{2,}\S", line)) for line in out) == 2
    assert out[0].startswith("Working region: voip, p95 ≤ 200.0 ms, stack paper")


def test_region_writes_no_blank_line_before_an_error():
    res = tcpdelay("region", "--profile", "voip", "--rtts-s", "1e20", "--losses", "0")
    assert res.returncode == 2
    assert res.stdout == ""
    assert len(res.stderr.splitlines()) == 1 and res.stderr.startswith("tcpdelay: error: tcpdelay region: --rtts-s:")


@pytest.mark.ns3
def test_run_table_names_each_flow(tmp_path):
    """The run's "delay mean / p95 per flow" listed numbers without flow names. A run already
    complete in --out is skipped (nothing simulated), and the table printed."""
    cell = ROOT / "results" / "validate-reduced" / "cells" / "7860bf0864a5" / "seed-1"
    shutil.copytree(cell, tmp_path / "seed-1")
    res = tcpdelay("run", str(cell / "scenario.toml"), "--backend", "ns3", "--out", str(tmp_path))
    assert res.returncode == 0, res.stderr
    _fits(res.stdout)
    row = next(line for line in res.stdout.splitlines() if line.startswith("1 "))
    assert re.split(r"\s{2,}", row.strip()) == ["1", "complete", "1000 / 1000", "media 52.7 / 54.1", "a→b 4, b→a 0"]
    assert "0 ran, 1 already complete" in res.stdout
