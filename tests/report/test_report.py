"""``tcpdelay report``: a sweep laid out by hand from records with known delays (numbers worked
out by hand), and a real tiny run through the testbed."""

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tcpdelay.report.results import write_report
from tcpdelay.results import aggregate_cell, load_results


@pytest.fixture
def sweep_dir(tmp_path, make_run):
    """Cell a (loss 1 %): seed 1 = 100 packets at 50 ms; seed 2 = 100 packets, 90 at 50 ms and
    10 at 250 ms, seq 0 lost. Cell b (loss 5 %): seed 1 = 100 packets at 60 ms plus one failed
    seed 2 and one incomplete seed 3 (both left out of the numbers)."""
    out = tmp_path / "sweep"
    cells = [{"id": "aaaaaaaaaaaa", "index": 0, "overrides": {"path.loss.p": 0.01}, "label": "path.loss.p=0.01"},
             {"id": "bbbbbbbbbbbb", "index": 1, "overrides": {"path.loss.p": 0.05}, "label": "path.loss.p=0.05"}]
    out.mkdir()
    (out / "sweep.json").write_text(json.dumps({"name": "by-hand", "seeds": [1, 2], "cells": cells}))
    a = out / "cells" / "aaaaaaaaaaaa"
    make_run(a / "seed-1", [0.05] * 100)
    make_run(a / "seed-2", [0.05] * 90 + [0.25] * 10, lost={0})
    b = out / "cells" / "bbbbbbbbbbbb"
    make_run(b / "seed-1", [0.06] * 100)
    make_run(b / "seed-2", [0.06] * 100, status="failed")
    make_run(b / "seed-3", [0.06] * 100, status="incomplete")
    return out


def test_aggregate_pools_repetitions(sweep_dir):
    res = load_results(sweep_dir)
    assert res.kind == "sweep" and [c.id for c in res.cells] == ["aaaaaaaaaaaa", "bbbbbbbbbbbb"]
    a, b = (aggregate_cell(c) for c in res.cells)
    (fa,), (fb,) = a, b
    # 199 received delays: 189 at 50 ms, 10 at 250 ms
    assert fa["name"] == "voip" and fa["runs"] == 2 and fa["packets"] == 200 and fa["received"] == 199
    assert fa["delay"]["mean_s"] == pytest.approx((189 * 0.05 + 10 * 0.25) / 199)
    assert fa["delay"]["p95_s"] == pytest.approx(np.percentile([0.05] * 189 + [0.25] * 10, 95))
    assert fa["loss_rate"] == pytest.approx(1 / 200)
    late = dict(zip(fa["late"]["playout_delay_s"], fa["late"]["late_fraction"]))
    assert late[0.1] == pytest.approx(10 / 200) and late[0.3] == 0.0
    assert fa["run_mean_delay_s"]["min"] == pytest.approx(0.05)
    assert fa["run_mean_delay_s"]["max"] == pytest.approx((89 * 0.05 + 10 * 0.25) / 99)
    # the failed and the incomplete repetition of cell b are left out
    assert fb["runs"] == 1 and fb["delay"]["mean_s"] == pytest.approx(0.06) and fb["loss_rate"] == 0.0
    assert [r.status for r in res.cells[1].runs] == ["complete", "failed", "incomplete"]


def test_report_html_and_json(sweep_dir, tmp_path, capsys, cli_exit):
    out = tmp_path / "r" / "report.html"
    out.parent.mkdir()
    assert cli_exit(["report", str(sweep_dir), "--out", str(out), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["runs"] == {"complete": 3, "failed": 1, "incomplete": 1}
    assert doc["report_path"] == str(out) and doc["figures"] >= 3
    assert doc["cells"][0]["flows"][0]["delay"]["count"] == 199
    html = out.read_text()
    # self-contained: every image embedded, nothing fetched from elsewhere
    assert html.count("data:image/png;base64,") == doc["figures"]
    assert not re.search(r"(src|href)=['\"](https?:|//)", html)
    # cells are labelled by what differs between them, in the unit a person reads
    assert "RuntimeError: boom" in html and "loss=5%" in html and "path.loss.p=0.05" not in html


@pytest.mark.parametrize("make, message", [
    (lambda p: p / "nothing-here", "does not exist"),
    (lambda p: (p / "f.txt").write_text("x") and p / "f.txt", "is not a directory"),
    (lambda p: p, "neither a sweep directory"),
])
def test_bad_results_one_line(tmp_path, capsys, make, message, cli_exit):
    target = make(tmp_path)
    assert cli_exit(["report", str(target)]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1


def test_single_run_and_run_directory(tmp_path, make_run):
    make_run(tmp_path / "r" / "seed-4", [0.03] * 50)
    doc = write_report(tmp_path / "r")
    assert doc["kind"] == "run" and doc["cells"][0]["runs"][0]["seed"] == 4
    assert (tmp_path / "r" / "report.html").is_file()
    one = write_report(tmp_path / "r" / "seed-4", tmp_path / "one.html")
    assert one["kind"] == "single" and one["cells"][0]["flows"][0]["delay"]["mean_s"] == pytest.approx(0.03)


def test_packets_file_reopens_a_run_without_its_records(tmp_path, capsys, make_run, cli_exit):
    """packets.parquet holds the records joined: with sent/ and received/ gone, the run's
    metrics come out the same (up to the microsecond the times are stored at)."""
    import shutil

    from tcpdelay.results.packets import PACKETS_FILE, read_run_packets, write_run_packets

    run_dir = tmp_path / "r" / "seed-1"
    make_run(run_dir, [0.05] * 90 + [0.25] * 10, lost={0, 7})
    before = load_results(tmp_path / "r").cells[0].runs[0]
    assert write_run_packets(run_dir) == run_dir / PACKETS_FILE
    shutil.rmtree(run_dir / "sent")
    shutil.rmtree(run_dir / "received")
    stored = read_run_packets(run_dir)
    assert stored.kind == "records" and [len(f) for f in stored.flows] == [100]
    after = load_results(tmp_path / "r").cells[0].runs[0]
    assert after.status == "complete" and after.packets == "records"
    (fb,), (fa,) = before.flows, after.flows
    np.testing.assert_allclose(fa.delay_s, fb.delay_s, atol=1e-6)
    assert np.isnan(fa.delay_s[[0, 7]]).all()
    for key in ("mean_s", "std_s", "p95_s", "max_s"):
        assert fa.metrics["delay"][key] == pytest.approx(fb.metrics["delay"][key], abs=1e-6)
    assert fa.metrics["packets"] == fb.metrics["packets"]
    assert fa.metrics["emodel"]["best"]["mos"] == pytest.approx(fb.metrics["emodel"]["best"]["mos"], rel=1e-4)
    # tcpdelay metrics reads it too
    capsys.readouterr()
    assert cli_exit(["metrics", str(run_dir), "--json"]) == 0
    (m,) = json.loads(capsys.readouterr().out)["flows"]
    assert m["packets"]["lost"] == 2 and m["delay"]["mean_s"] == pytest.approx(fb.metrics["delay"]["mean_s"], abs=1e-6)


def test_runs_known_only_by_their_metrics(tmp_path, make_run):
    """A complete run without records (measured before packets.parquet): its figures from
    metrics.json; with a delays-only packets file, its delays too; a cell mixing such runs is
    not pooled and says so."""
    import shutil

    from tcpdelay.results.packets import write_delay_packets

    out = tmp_path / "sweep"
    out.mkdir()
    cells = [{"id": "aaaaaaaaaaaa", "index": 0, "overrides": {"x": 1}, "label": "x=1"}]
    (out / "sweep.json").write_text(json.dumps({"name": "old", "seeds": [1, 2], "cells": cells}))
    runs = [out / "cells" / "aaaaaaaaaaaa" / f"seed-{s}" for s in (1, 2)]
    make_run(runs[0], [0.05] * 100)
    make_run(runs[1], [0.15] * 100, lost={3})
    from tcpdelay.results.runs import summarize_run

    for rd in runs:
        (rd / "metrics.json").write_text(json.dumps(summarize_run(rd)))
        shutil.rmtree(rd / "sent")
        shutil.rmtree(rd / "received")
    write_delay_packets(runs[0], np.zeros(100), np.full(100, 0.05), source="by hand")
    res = load_results(out)
    r1, r2 = res.cells[0].runs
    assert (r1.status, r1.packets, r2.status, r2.packets) == ("complete", "delays", "complete", "none")
    assert r2.flows[0].delay_s is None and r2.flows[0].metrics["packets"]["lost"] == 1
    (agg,) = aggregate_cell(res.cells[0])
    assert agg["pooled"] is False and agg["runs"] == 2 and agg["packets"] == 200 and agg["received"] == 199
    assert agg["delay"]["mean_s"] == pytest.approx((0.05 + 0.15) / 2)  # mean of the per-run means
    assert agg["late"]["late_fraction"] is None
    doc = write_report(out, tmp_path / "old.html")
    assert doc["runs"]["complete"] == 2 and doc["packets"] == {"records": 0, "delays": 1, "none": 1}
    assert "not the statistics of the pooled packets" in (tmp_path / "old.html").read_text()
    shutil.rmtree(runs[0])  # only the delays left of seed 1: the delay figures from them
    runs[0].mkdir()
    (runs[0] / "complete.json").write_text("{}")
    write_delay_packets(runs[0], np.zeros(4), np.array([0.01, 0.02, np.nan, 0.03]), source="by hand")
    f = load_results(out).cells[0].runs[0].flows[0]
    assert f.metrics["delay"]["mean_s"] == pytest.approx(0.02) and f.metrics["packets"]["loss_rate"] == 0.25


def _testbed_unavailable():
    from tcpdelay.testbed.netns import unavailable_reason

    return unavailable_reason()


@pytest.mark.slow
@pytest.mark.skipif(_testbed_unavailable() is not None, reason=f"needs the testbed: {_testbed_unavailable()}")
def test_report_of_a_real_tiny_run(tmp_path):
    """tcpdelay run (tiny form of the §5.1 scenario) then tcpdelay report, as a user would."""
    out = tmp_path / "run"
    exe = [sys.executable, "-m", "tcpdelay"]
    scenario = Path(__file__).resolve().parents[2] / "experiments" / "voip-random-loss.toml"
    run = subprocess.run([*exe, "run", str(scenario), "--tiny-s", "3", "--out", str(out),
                          "--json"], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    summary = json.loads(run.stdout)["runs"][0]["summary"]["flows"][0]
    rep = subprocess.run([*exe, "report", str(out), "--json"], capture_output=True, text=True, timeout=120)
    assert rep.returncode == 0, rep.stderr
    flow = json.loads(rep.stdout)["cells"][0]["flows"][0]
    assert flow["name"] == "voip" and flow["runs"] == 1
    # the report's numbers are the run's own (one repetition: pooled = the run)
    assert flow["delay"]["mean_s"] == pytest.approx(summary["delay_mean_s"], rel=1e-9)
    assert flow["delay"]["p95_s"] == pytest.approx(summary["delay_p95_s"], rel=1e-9)
    # the first cell of the scenario: RTT 20 ms, so no packet arrives before 10 ms
    assert flow["delay"]["min_s"] >= 0.010 and flow["packets"] >= 140
    assert (out / "report.html").stat().st_size > 10_000
    # what a committed result keeps (results/.gitignore leaves the record parts out): the
    # run's packets.parquet, written by the sweep, reopens to the same numbers
    import shutil

    run_dir = next(out.glob("seed-*"))
    assert (run_dir / "packets.parquet").is_file() and (run_dir / "complete.json").is_file()
    for parts in ("sent", "received", "flows"):
        shutil.rmtree(run_dir / parts, ignore_errors=True)
    again = subprocess.run([*exe, "report", str(out), "--json", "--out", str(tmp_path / "again.html")],
                           capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stderr
    doc = json.loads(again.stdout)
    assert doc["runs"]["complete"] == 1 and doc["packets"]["records"] == 1
    flow2 = doc["cells"][0]["flows"][0]
    assert flow2["packets"] == flow["packets"] and flow2["received"] == flow["received"]
    for key in ("mean_s", "p95_s", "std_s", "max_s"):
        assert flow2["delay"][key] == pytest.approx(flow["delay"][key], abs=1e-6)  # times kept at 1 µs
    assert flow2["mos"] == pytest.approx(flow["mos"], rel=1e-4)
