"""``tcpdelay validate`` (Brosh et al. §5.1, model vs Linux TCP) and the main job's measured
check: the grids, the comparison on a sweep written by hand, and real tiny runs on the testbed."""

import json
import math
from pathlib import Path

import pytest

from tcpdelay.cli import main
from tcpdelay.errors import ParameterError
from tcpdelay.experiments.scenario import load_scenario
from tcpdelay.experiments.sweep import expand
from tcpdelay.cli.validate import evaluate_validation
from tcpdelay.experiments.validation import (
    TABLE_COLUMNS, claim_checks, model_point, relative_error, table_columns, table_rows, validation_scenario,
)
from tcpdelay.report.html import Report

REPO = Path(__file__).resolve().parents[2]


def test_grids():
    reduced = expand(validation_scenario())
    assert len(reduced) == 2 * 2 * 1 * 3
    assert {c.overrides["path.rtt_s"] for c in reduced} == {0.1}
    assert {c.overrides["path.forward.loss.p"] for c in reduced} == {0.005, 0.01, 0.02}
    full = validation_scenario(full=True)
    assert len(expand(full)) == 2 * 2 * 3 * 7 and full.duration_s == 300 and full.repetitions == 10
    # loss on the data direction only
    cell = expand(full)[-1].scenario
    assert cell.path.direction("forward").loss.p == 0.1 and cell.path.direction("reverse").loss.model == "none"


def test_shipped_file_is_the_full_size():
    shipped = load_scenario(REPO / "experiments" / "validate-5.1.toml")
    assert shipped.to_data() == validation_scenario(full=True).to_data()


@pytest.mark.parametrize("kwargs, message", [
    ({"duration_s": 0.5}, "duration_s"),
    ({"repetitions": 0}, "repetitions"),
    ({"grid": {"rtt": [0.1]}}, "grid: 'rtt'"),
    ({"grid": {"losses": [1.5]}}, "less than or equal to 1"),
])
def test_bad_sizes(kwargs, message):
    with pytest.raises(ParameterError, match=message):
        validation_scenario(**kwargs)


def test_cli_bad_input_one_line(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["validate", "--duration-s", "0"])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert "--duration-s" in err and len(err.splitlines()) == 1


def test_relative_error():
    assert relative_error(0.11, 0.1) == pytest.approx(0.1)
    assert relative_error(0.09, 0.1) == pytest.approx(-0.1)
    assert relative_error(None, 0.1) is None and relative_error(0.1, None) is None
    assert relative_error(math.inf, 0.1) is None and relative_error(0.1, 0.0) is None


def test_model_point_stable_and_unstable():
    v = model_point("voip", 0.1, 0.01)
    assert not v["unstable"] and v["one_way_s"] == pytest.approx(0.05)
    assert 0.05 <= v["mean_s"] <= v["p95_s"] and v["std_s"] > 0 and v["throughput_ratio"] > 2
    # video at RTT 300 ms, 5 % loss: PFTK throughput is below 573 kb/s
    u = model_point("video", 0.3, 0.05)
    assert u["unstable"] and u["mean_s"] is None and u["throughput_ratio"] < 1


def _hand_sweep(make_run, root: Path) -> Path:
    """A validation-shaped sweep with two points written by hand (records, not the testbed):
    voip newreno-2008 RTT 100 ms p = 1 %: delays 50 ms except every 20th at 250 ms; video
    linux-default p = 1 %: every delay 60 ms."""
    cells = [
        {"id": "111111111111", "index": 0, "label": "a", "overrides": {
            "flows[0].profile": "voip", "flows[0].tcp.preset": "newreno-2008", "path.rtt_s": 0.1,
            "path.forward.loss.p": 0.01}},
        {"id": "222222222222", "index": 1, "label": "b", "overrides": {
            "flows[0].profile": "video", "flows[0].tcp.preset": "linux-default", "path.rtt_s": 0.1,
            "path.forward.loss.p": 0.01}},
    ]
    root.mkdir()
    (root / "sweep.json").write_text(json.dumps({"name": "validate-5.1", "seeds": [1], "cells": cells}))
    (root / "scenario.toml").write_text('name = "validate-5.1"\nduration_s = 4.0\n')
    make_run(root / "cells" / "111111111111" / "seed-1", [0.25 if i % 20 == 0 else 0.05 for i in range(200)])
    make_run(root / "cells" / "222222222222" / "seed-1", [0.06] * 200)
    return root


def test_comparison_on_a_hand_written_sweep(tmp_path, make_run):
    doc = evaluate_validation(_hand_sweep(make_run, tmp_path / "v"))
    voip, video = doc["points"]
    assert (voip["profile"], voip["stack"], voip["rtt_s"], voip["loss"]) == ("voip", "newreno-2008", 0.1, 0.01)
    assert voip["measured"]["mean_s"] == pytest.approx(0.05 + 0.2 / 20)
    model = model_point("voip", 0.1, 0.01)
    assert voip["model"]["mean_s"] == pytest.approx(model["mean_s"])
    assert voip["relative_error"]["mean_s"] == pytest.approx((model["mean_s"] - 0.06) / 0.06)
    assert voip["relative_error"]["tcp_level_mean_s"] == pytest.approx((model["mean_s"] - 0.05 - 0.01) / 0.01)
    assert video["measured"]["std_s"] == pytest.approx(0.0, abs=1e-9) and video["relative_error"]["std_s"] is None
    assert doc["duration_s"] == 4.0
    html = Path(doc["report_path"]).read_text()
    assert html.count("data:image/png;base64,") >= 5 and "RACK" in html
    # the claims table covers what was measured: voip at 100 ms up to 2 %
    (claim,) = [c for c in doc["claims"] if c["profile"] == "voip"]
    assert claim["points"] == 1 and claim["holds"] == (abs(voip["relative_error"]["mean_s"]) <= 0.10)


def test_hol_ramp_variant_side_by_side(tmp_path, make_run):
    """Every point carries the paper's model (unchanged) and the hol_ramp variant with the same
    statistics and errors; the claims stay the paper's model's, the variant's worst beside them."""
    doc = evaluate_validation(_hand_sweep(make_run, tmp_path / "v"))
    voip, video = doc["points"]
    paper, hol = model_point("voip", 0.1, 0.01), model_point("voip", 0.1, 0.01, hol_ramp=True)
    assert voip["model"]["mean_s"] == pytest.approx(paper["mean_s"])
    assert voip["model_hol_ramp"]["mean_s"] == pytest.approx(hol["mean_s"])
    assert voip["model_hol_ramp"]["p95_s"] == pytest.approx(hol["p95_s"])
    # the ramp adds held packets: at 100 ms, 1 % the variant's mean is above the paper's
    assert voip["model_hol_ramp"]["mean_s"] > voip["model"]["mean_s"] + 1e-3
    assert set(voip["model_hol_ramp"]) == set(voip["model"])
    assert set(voip["relative_error_hol_ramp"]) == set(voip["relative_error"])
    assert voip["relative_error_hol_ramp"]["mean_s"] == pytest.approx((hol["mean_s"] - 0.06) / 0.06)
    assert voip["relative_error_hol_ramp"]["tcp_level_mean_s"] == pytest.approx((hol["mean_s"] - 0.06) / 0.01)
    assert video["model_hol_ramp"]["mean_s"] == pytest.approx(model_point("video", 0.1, 0.01, hol_ramp=True)["mean_s"])
    # the claim is decided on the paper's model; the variant's worst error is reported beside it
    (claim,) = [c for c in doc["claims"] if c["profile"] == "voip"]
    assert claim["worst_relative_error"] == pytest.approx(voip["relative_error"]["mean_s"])
    assert claim["worst_relative_error_hol_ramp"] == pytest.approx(voip["relative_error_hol_ramp"]["mean_s"])
    assert claim["worst_loss_hol_ramp"] == 0.01
    assert any(line.startswith("voip on newreno-2008 with hol_ramp") for line in doc["interpretation"])
    # the HTML table: the variant's mean and error after the paper's, in ms as the other columns
    html = Path(doc["report_path"]).read_text()
    assert "mean ms model + hol_ramp" in html and f"{hol['mean_s'] * 1e3:.1f}" in html
    assert "hol_ramp: worst rel. err (at loss)" in html


def test_table_rows_with_and_without_hol_ramp():
    pts = [{"profile": "voip", "stack": "newreno-2008", "rtt_s": 0.3, "loss": 0.01, "runs": 1,
            "measured": {"mean_s": 0.175}, "model": {"mean_s": 0.1614, "unstable": False},
            "relative_error": {"mean_s": -0.08}, "model_hol_ramp": {"mean_s": 0.171, "unstable": False},
            "relative_error_hol_ramp": {"mean_s": -0.02}}]
    (plain,) = table_rows(pts)
    (wide,) = table_rows(pts, hol_ramp=True)
    # the default layout is unchanged (the CLI and the measured check index into it)
    assert len(plain) == len(TABLE_COLUMNS) and table_columns() == TABLE_COLUMNS
    cols = table_columns(hol_ramp=True)
    assert len(wide) == len(cols) == len(TABLE_COLUMNS) + 2
    row = dict(zip(cols, wide))
    assert row["mean ms model"] == "161.4" and row["mean ms model + hol_ramp"] == "171.0"
    assert row["rel. err (hol_ramp)"] == "-2 %" and row["rel. err TCP-level"] == "—"
    assert [c for c in cols if "hol_ramp" not in c] == TABLE_COLUMNS
    assert [v for c, v in zip(cols, wide) if "hol_ramp" not in c] == plain
    pts[0]["model_hol_ramp"]["unstable"] = True
    assert dict(zip(cols, table_rows(pts, hol_ramp=True)[0]))["mean ms model + hol_ramp"] == "unstable"


def test_rerun_on_a_complete_directory_recomputes_without_measuring(tmp_path, monkeypatch, make_run):
    """``tcpdelay validate`` on a directory whose runs are all complete measures nothing (and
    needs no testbed): it recomputes the model side, the hol_ramp variant included, and rewrites
    validation.json over an older one that lacked it."""
    import tcpdelay.experiments.run as run_mod
    from tcpdelay.experiments.sweep import expand, prepare, units
    from tcpdelay.cli.validate import run_validation

    grid = {"losses": (0.02,), "profiles": ("voip",), "stacks": ("linux-default",)}
    scenario = validation_scenario(duration_s=4, grid=grid)
    out = tmp_path / "v"
    out.mkdir()
    cells = expand(scenario)
    prepare(scenario, out, cells)
    (unit,) = units(cells, out)
    make_run(unit.run_dir, [0.25 if i % 25 == 0 else 0.05 for i in range(200)])
    assert unit.complete
    (out / "validation.json").write_text(json.dumps({"points": [{"model": {}}]}))  # an older file

    def must_not_measure(*args, **kwargs):
        raise AssertionError("a complete run was measured again")

    monkeypatch.setattr(run_mod, "run_scenario", must_not_measure)
    doc = run_validation(out, duration_s=4, grid=grid, progress=False)
    assert (doc["sweep"]["ran"], doc["sweep"]["skipped"], doc["sweep"]["failed"]) == (0, 1, [])
    (p,) = json.loads((out / "validation.json").read_text())["points"]
    hol = model_point("voip", 0.1, 0.02, hol_ramp=True)
    assert p["model"]["mean_s"] == pytest.approx(model_point("voip", 0.1, 0.02)["mean_s"])
    assert p["model_hol_ramp"]["mean_s"] == pytest.approx(hol["mean_s"])
    assert p["relative_error_hol_ramp"]["mean_s"] == pytest.approx((hol["mean_s"] - 0.058) / 0.058)
    assert "mean ms model + hol_ramp" in (out / "validation.html").read_text()


def test_claim_checks_take_the_worst_point():
    pts = [{"profile": "voip", "stack": "newreno-2008", "rtt_s": 0.1, "loss": p, "relative_error": {"mean_s": e}}
           for p, e in ((0.005, 0.02), (0.02, -0.15), (0.05, 0.9))]
    (c,) = claim_checks(pts)
    assert c["points"] == 2 and c["worst_loss"] == 0.02 and not c["holds"]


def _testbed_unavailable():
    from tcpdelay.experiments.measured_check import testbed_unavailable

    return testbed_unavailable()


needs_testbed = pytest.mark.skipif(_testbed_unavailable() is not None,
                                   reason=f"needs the testbed: {_testbed_unavailable()}")


@pytest.mark.slow
@pytest.mark.testbed
@needs_testbed
def test_validate_tiny_on_the_testbed_resumes(tmp_path):
    from tcpdelay.cli.validate import run_validation

    grid = {"losses": (0.02,), "profiles": ("voip",), "stacks": ("linux-default",)}
    doc = run_validation(tmp_path / "v", duration_s=3, grid=grid, progress=False)
    assert doc["sweep"]["ran"] == 1 and not doc["sweep"]["failed"]
    (p,) = doc["points"]
    m = p["measured"]
    # 3 s of 20 ms packets; RTT 100 ms: nothing arrives before L = 50 ms
    assert m["packets"] >= 140 and m["min_s"] >= 0.05 and m["mean_s"] >= m["min_s"]
    assert p["model"]["mean_s"] >= 0.05 and p["relative_error"]["mean_s"] is not None
    assert json.loads((tmp_path / "v" / "validation.json").read_text())["points"][0]["cell_id"] == p["cell_id"]
    again = run_validation(tmp_path / "v", duration_s=3, grid=grid, progress=False)
    assert (again["sweep"]["ran"], again["sweep"]["skipped"]) == (0, 1)
    assert again["points"][0]["measured"]["mean_s"] == pytest.approx(m["mean_s"])


def test_measured_check_says_plainly_when_it_cannot_run(monkeypatch):
    import os

    from tcpdelay.experiments.measured_check import run_measured_check, testbed_unavailable
    from tcpdelay.report.evaluation_page import measured_check_section

    # a real condition: the emulator binary named by TCPDELAY_LINK does not exist (without root
    # the missing root is reported first)
    monkeypatch.setenv("TCPDELAY_LINK", "/nonexistent/tcpdelay-link")
    report = Report("t")
    data = run_measured_check()
    measured_check_section(report, data)
    assert data["measured"] is False and data["points"] == []
    assert data["reason"] == testbed_unavailable()
    assert ("TCPDELAY_LINK" in data["reason"]) if os.geteuid() == 0 else ("root" in data["reason"])
    html = report.render()
    assert "Not measured" in html and data["reason"].split(":")[0] in html


@pytest.mark.slow
@pytest.mark.testbed
@needs_testbed
def test_measured_check_on_the_testbed():
    from tcpdelay.experiments.measured_check import DURATION_S, POINTS, run_measured_check
    from tcpdelay.report.evaluation_page import measured_check_section

    report = Report("t")
    data = run_measured_check()
    measured_check_section(report, data)
    assert data["measured"] is True and not data["failed"]
    assert len(data["points"]) == sum(len(l) for _, l in POINTS)
    for p in data["points"]:
        assert p["profile"] == "voip" and p["rtt_s"] == 0.1
        assert p["measured"]["packets"] >= 0.9 * DURATION_S / 0.02
        assert p["measured"]["min_s"] >= 0.05 and p["model"]["mean_s"] is not None
    # more loss, more delay (both sides, newreno-2008)
    nr = sorted((p for p in data["points"] if p["stack"] == "newreno-2008"), key=lambda p: p["loss"])
    assert nr[1]["model"]["mean_s"] > nr[0]["model"]["mean_s"]
    assert nr[1]["measured"]["mean_s"] > nr[0]["measured"]["mean_s"]
    # the runs really ran (each point measures DURATION_S), whatever the machine's speed
    assert data["wall_s"] >= DURATION_S * len(data["points"])
    assert "Model vs a short measurement" in report.render()
