"""``tcpdelay latency`` as a user meets it: JSON keys and values, plots, one-line errors."""

import json
import math
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tcpdelay.cli import main
from tcpdelay.model.latency import latency

BASE = ["latency", "--size-bytes", "65536", "--rtt-s", "0.1", "--loss", "0.05"]


def tcpdelay(*args):
    """The installed command in a subprocess: exactly what a user runs."""
    return subprocess.run([sys.executable, "-m", "tcpdelay", *args], capture_output=True, text=True, timeout=120)


def run(capsys, *args):
    """The same entry point, tcpdelay.cli.main, in-process (fast): (exit code, stdout, stderr)."""
    with pytest.raises(SystemExit) as exc:
        main(list(args))
    out, err = capsys.readouterr()
    return exc.value.code, out, err


def test_json_keys_and_consistency():
    res = tcpdelay(*BASE, "--init-window", "1", "--acks-per-segment", "2", "--t0-s", "0.519",
                   "--delayed-ack", "bsd", "--loss-reverse", "0", "--json")
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    for key in ("handshake_mean_s", "handshake_mean_approx_s", "slow_start_s", "first_loss_s", "remainder_s",
                "delayed_ack_s", "transfer_mean_s", "total_mean_s", "percentiles_s"):
        assert key in doc, key
    assert set(doc["percentiles_s"]) == {"50", "90", "99"}
    assert doc["total_mean_s"] == pytest.approx(doc["handshake_mean_s"] + doc["transfer_mean_s"])
    assert doc["transfer_mean_s"] == pytest.approx(
        doc["slow_start_s"] + doc["first_loss_s"] + doc["remainder_s"] + doc["delayed_ack_s"])
    assert doc["delayed_ack_s"] == pytest.approx(0.1)
    assert doc["segments"] == 45 and doc["t0_s"] == 0.519 and doc["max_window"] is None
    # the same numbers as the library (test_transfer.py works these terms out by hand)
    lib = latency(65536, 0.1, 0.05, loss_reverse=0.0, t0_s=0.519, init_window=1, acks_per_segment=2,
                  delayed_ack="bsd")
    assert doc["slow_start_s"] == pytest.approx(0.5566688, rel=1e-6)
    assert doc["first_loss_s"] == pytest.approx(0.3396024, rel=1e-6)
    assert doc["total_mean_s"] == pytest.approx(lib["total_mean_s"])
    # handshake: SYN never lost (p_r = 0), SYN/ACK lost with 0.05, T_s = 1 s, 5 SYN/ACK retries:
    #   E[2^j | j <= 5] = 0.95 (1 - 0.1^6) / (0.9 (1 - 0.05^6)) = 1.0555545 -> 0.1 + 0.0555545
    assert doc["handshake_mean_s"] == pytest.approx(0.1555545, rel=1e-6)
    # eq (4): 0.1 + (1 + 0.95/0.9 - 2) = 0.1555556
    assert doc["handshake_mean_approx_s"] == pytest.approx(0.1555556, rel=1e-6)


def test_defaults_and_no_loss(capsys):
    doc = json.loads(run(capsys, "latency", "--size-bytes", "14600", "--rtt-s", "0.05", "--loss", "0", "--json")[1])
    # 10 segments, w1 = 10, b = 1: one round; handshake one RTT; no loss, no delayed ACK
    assert doc["transfer_mean_s"] == pytest.approx(0.05)
    assert doc["total_mean_s"] == pytest.approx(0.1)
    assert doc["first_loss_s"] == 0 and doc["remainder_s"] == 0
    assert doc["percentiles_s"]["99"] == pytest.approx(0.1)
    assert doc["t0_s"] == pytest.approx(0.25) and doc["init_window"] == 10


def test_approximation_is_null_when_undefined(capsys):
    doc = json.loads(run(capsys, *BASE[:-1], "0.6", "--json")[1])
    assert doc["handshake_mean_approx_s"] is None
    assert math.isfinite(doc["handshake_mean_s"]) and 0 < doc["handshake_failure_prob"] < 1


def test_human_output_and_numeric_delayed_ack(capsys):
    code, out, err = run(capsys, *BASE, "--delayed-ack", "0.04")
    assert code == 0, err
    assert "transfer (eq 25)" in out and "40.0 ms" in out


@pytest.mark.parametrize("ext, magic", [(".png", b"\x89PNG"), (".svg", b"<?xml")])
def test_plot_writes_a_figure(capsys, tmp_path, ext, magic):
    path = tmp_path / f"fig{ext}"
    code, out, err = run(capsys, *BASE, "--plot", str(path), "--json")
    assert code == 0, err
    assert json.loads(out)["plot_path"] == str(path)
    assert path.read_bytes().startswith(magic) and path.stat().st_size > 5000


BAD = [
    (BASE + ["--delayed-ack", "sometimes"], "--delayed-ack"),
    (BASE + ["--delayed-ack", "-0.1"], "--delayed-ack"),
    (BASE + ["--plot", "fig.jpg"], "plot"),
    (["latency", "--size-bytes", "0", "--rtt-s", "0.1", "--loss", "0.01"], "--size-bytes"),
    (["latency", "--size-bytes", "100", "--rtt-s", "0.1", "--loss", "1"], "--loss"),
    (BASE + ["--init-window", "0.5"], "--init-window"),
    (BASE + ["--syn-retries", "-1"], "--syn-retries"),
    # issue 27, defect 7: absurd values and click's "is not a valid integer range"
    (["latency", "--size-bytes", "1e5", "--rtt-s", "1e308", "--loss", "0.01"], "--rtt-s: 1e+308 is not in the range"),
    (BASE + ["--mss-bytes", "1e9"], "--mss-bytes: 1e9 is outside the range; give a whole number from 88 to 65495"),
    (BASE + ["--mss-bytes", "100000000"], "--mss-bytes: 100000000 is outside the range"),
    (BASE + ["--syn-retries", "two"], "--syn-retries: 'two' is not a number; give a whole number from 0 to"),
]


def _one_line(err, fragment):
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("tcpdelay: error: ") and fragment in lines[0]
    assert "Traceback" not in err


def test_unwritable_plot_path_is_one_line(capsys, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    code, _, err = run(capsys, *BASE, "--plot", str(blocker / "fig.png"))
    assert code == 2
    _one_line(err, "cannot write")


def test_plot_into_a_missing_folder_is_refused_and_creates_nothing(capsys, tmp_path):
    """Issue 27, defect 6: --plot /nonexistent/dir/x.png made /nonexistent/dir. No folder is
    created now: a missing one is one line, before any work."""
    path = tmp_path / "missing" / "deeper" / "fig.png"
    code, out, err = run(capsys, *BASE, "--plot", str(path))
    assert code == 2 and out == ""
    _one_line(err, f"--plot: cannot write {path}: folder {path.parent} does not exist")
    assert list(tmp_path.iterdir()) == []
    code, out, err = run(capsys, *BASE, "--plot", str(tmp_path / "new" / "fig.png"))
    assert code == 2 and list(tmp_path.iterdir()) == []


def test_plot_into_an_existing_folder_says_where(capsys, tmp_path):
    path = tmp_path / "fig.svg"
    code, out, _ = run(capsys, *BASE, "--plot", str(path))
    assert code == 0 and path.stat().st_size > 1000
    assert f"Plot written to {path}" in " ".join(out.split())


@pytest.mark.parametrize("args, fragment", BAD)
def test_bad_input_is_one_line_and_exit_2(capsys, args, fragment):
    code, _, err = run(capsys, *args)
    assert code == 2
    _one_line(err, fragment)


def test_bad_input_from_the_installed_command():
    res = tcpdelay(*BASE, "--delayed-ack", "sometimes")
    assert res.returncode == 2
    _one_line(res.stderr, "--delayed-ack")


bad_numbers = st.one_of(st.floats(max_value=0.0), st.just(float("nan")), st.just(float("inf")))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(option=st.sampled_from(["--rtt-s", "--size-bytes", "--loss", "--t0-s", "--max-window", "--syn-timeout-s"]),
       value=st.one_of(bad_numbers, st.floats(min_value=1.0, max_value=1e9), st.text(min_size=1, max_size=5)))
def test_invalid_values_exit_2_with_one_line(capsys, option, value):
    # In-process (the installed entry point's main()): any rejected value -> exit 2, one line.
    args = ["latency", "--size-bytes", "1000", "--rtt-s", "0.1", "--loss", "0.01", option, str(value)]
    code, out, err = run(capsys, *args)
    if code == 0:  # a valid value after all (e.g. --rtt-s 5): it printed a result
        assert "total mean" in out
        return
    assert code == 2
    _one_line(err, "")
