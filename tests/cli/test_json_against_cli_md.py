"""The JSON the commands print says what docs/cli.md says it does (issue 27, defects 7 and 8):
a dry run names the engine that would run; numbers carry no rounding noise of the arithmetic
(0.1 + 0.2 is written 0.3) while measured values keep every digit; a flag that needs another
says which one."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import pytest

from tcpdelay.jsonio import jsonable, short_float

ROOT = Path(__file__).resolve().parents[2]


def _run(cli_exit, capsys, *args) -> tuple[int, str, str]:
    code = cli_exit(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.parametrize("engine", ["local", "ray"])
def test_a_dry_run_names_its_engine(engine, cli_exit, capsys, tmp_path):
    code, out, err = _run(cli_exit, capsys, "sweep", str(ROOT / "experiments" / "voip-random-loss.toml"),
                          "--dry-run", "--engine", engine, "--out", str(tmp_path / "o"), "--json")
    assert code == 0, err
    assert json.loads(out)["engine"] == engine


def test_the_throughput_json_has_no_rounding_noise(cli_exit, capsys):
    """T0 = RTT + 200 ms at RTT 100 ms is 0.3 s (the double sum is 0.30000000000000004)."""
    code, out, _ = _run(cli_exit, capsys, "throughput", "--rtt-s", "0.1", "--loss", "0.01", "--json")
    assert code == 0
    assert '"t0_s": 0.3,' in out and "0000000000" not in out


def test_a_dry_runs_estimate_has_no_rounding_noise(cli_exit, capsys, tmp_path):
    """A sum of twenty ns-3 estimates (412.4000000000001 before) is written to the millisecond."""
    code, out, err = _run(cli_exit, capsys, "sweep", str(ROOT / "experiments" / "mpeg4-4.2-wired.toml"),
                          "--backend", "ns3", "--dry-run", "--out", str(tmp_path / "o"), "--json")
    assert code == 0, err
    est = json.loads(out)["estimate"]
    for key in ("busy_s", "wall_s"):
        assert est[key] == round(est[key], 3) and len(repr(est[key])) <= 12, est


@pytest.mark.parametrize("noisy, clean", [(0.1 + 0.2, 0.3), (3 * 0.1, 0.3), (1.1 * 1.1, 1.21), (0.7 + 0.1, 0.8),
                                          (100 * 1.1, 110.0), (0.3 - 0.1, 0.2), (23.369999999999997, 23.37)])
def test_arithmetic_noise_is_taken_off(noisy, clean):
    assert noisy != clean                       # the noise is there
    assert short_float(noisy) == clean and repr(jsonable(noisy)) == repr(clean)
    assert json.dumps(jsonable({"x": [noisy]})) == '{"x": [%r]}' % clean


def test_measured_values_keep_their_precision():
    """No value moves by more than one ulp; a value that came from a decimal of up to 15 digits
    (a time in ns, a rate) is that decimal; one that is not near a short decimal is unchanged."""
    rng = random.Random(27)
    for _ in range(20_000):
        x = rng.uniform(-1e6, 1e6) * 10 ** rng.randint(-9, 3)
        y = short_float(x)
        assert abs(y - x) <= math.ulp(x)
        assert len(repr(y)) <= len(repr(x))
    for ns in (1, 999_999_999, 123_456_789_012, 7_654_321_000_123):
        assert short_float(ns / 1e9) == ns / 1e9
    assert short_float(1 / 3) == 1 / 3 and short_float(math.pi) == math.pi
    assert short_float(2.0 ** -1074) == 2.0 ** -1074 and short_float(1.7976931348623157e308) == 1.7976931348623157e308
    assert jsonable(float("nan")) is None and jsonable(-0.0) == 0.0


def test_advise_out_without_measure_says_it_needs_measure(cli_exit, capsys, tmp_path):
    code, out, err = _run(cli_exit, capsys, "advise", "--profile", "voip", "--rtt-s", "0.1", "--loss", "0.01",
                          "--out", str(tmp_path / "runs"))
    assert code == 2 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "--out" in lines[0] and "needs --measure" in lines[0], err
    assert "--rtt-s" not in lines[0]
    assert not (tmp_path / "runs").exists()
