"""``tcpdelay delay``, ``region`` and ``playout`` as a user runs them (real subprocesses)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest


def tcpdelay(*args):
    return subprocess.run([sys.executable, "-m", "tcpdelay", *args], capture_output=True, text=True, timeout=300)


def test_delay_json_keys_and_plot(tmp_path):
    plot = tmp_path / "cdf.png"
    res = tcpdelay("delay", "--profile", "voip", "--rtt-s", "0.1", "--loss", "0.02", "--json", "--plot", str(plot))
    assert res.returncode == 0, res.stderr
    d = json.loads(res.stdout)
    for key in ("mean_s", "std_s", "p50_s", "p95_s", "p99_s", "p999_s", "max_s", "truncated_mass",
                "backlog_share", "states", "unstable", "solve_s"):
        assert key in d, key
    assert d["unstable"] is False
    assert d["p50_s"] <= d["p95_s"] <= d["p99_s"] <= d["p999_s"] <= d["max_s"]
    assert sum(d["distribution"]["probability"]) == pytest.approx(1.0)
    assert plot.stat().st_size > 5000


def test_delay_custom_source_split_connections_and_options():
    res = tcpdelay("delay", "--rate-bps", "579200", "--packet-bytes", "1448", "--rtt-s", "0.3", "--loss", "0.005",
                   "--split", "2", "--connections", "2", "--queue", "bytes", "--loss-model", "correlated",
                   "--no-limited-transmit", "--al-fr-backlog", "eq4", "--json")
    assert res.returncode == 0, res.stderr
    d = json.loads(res.stdout)
    assert d["split"] == 2 and d["connections"] == 2
    assert d["params"]["packet_bytes"] == 724 and d["params"]["rate_pps"] == pytest.approx(50)


def test_delay_unstable_warns_and_prints_no_numbers():
    res = tcpdelay("delay", "--profile", "video", "--rtt-s", "0.3", "--loss", "0.01", "--json")
    assert res.returncode == 0
    d = json.loads(res.stdout)
    assert d["unstable"] is True and d["mean_s"] is None and d["p95_s"] is None
    assert "warning: unstable" in res.stderr
    human = tcpdelay("delay", "--profile", "video", "--rtt-s", "0.3", "--loss", "0.01")
    assert "unstable" in human.stdout and "grows without bound" in human.stdout


@pytest.mark.parametrize("args,fragment", [
    (["delay", "--rtt-s", "0.1", "--loss", "0.01"], "--profile"),
    (["delay", "--profile", "voip", "--rate-bps", "1e5", "--rtt-s", "0.1", "--loss", "0.01"], "not both"),
    (["delay", "--profile", "skype", "--rtt-s", "0.1", "--loss", "0.01"], "--profile"),
    (["delay", "--profile", "voip", "--rtt-s", "0.1", "--loss", "1"], "--loss"),
    (["delay", "--rate-bps", "1e6", "--packet-bytes", "3000", "--rtt-s", "0.1", "--loss", "0.01"], "--mss-bytes"),
    (["region", "--profile", "voip", "--rtts-s", "0.1,abc"], "--rtts-s"),
    (["region", "--profile", "voip", "--losses", "0.01,2"], "losses"),
    (["playout", "--profile", "voip", "--rtt-s", "0", "--loss", "0.01"], "--rtt-s"),
])
def test_bad_input_one_line_exit_2(args, fragment):
    res = tcpdelay(*args)
    assert res.returncode == 2
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tcpdelay: error: ") and fragment in lines[0], res.stderr


def test_region_json_and_plot(tmp_path):
    plot = tmp_path / "region.png"
    res = tcpdelay("region", "--profile", "video", "--rtts-s", "0.1,0.3", "--losses", "0.001,0.005,0.03",
                   "--stack", "paper", "--json", "--plot", str(plot))   # the paper's regions (§6.1)
    assert res.returncode == 0, res.stderr
    d = json.loads(res.stdout)
    assert d["percentile"] == 99.9 and d["bound_s"] == 5.0
    assert {(c["rtt_s"], c["loss"]) for c in d["cells"]} == {(r, p) for r in (0.1, 0.3) for p in (0.001, 0.005, 0.03)}
    assert d["max_loss_by_rtt"] == [{"rtt_s": 0.1, "max_loss": 0.03}, {"rtt_s": 0.3, "max_loss": 0.001}]
    assert plot.stat().st_size > 5000


def test_playout_json_and_plot(tmp_path):
    plot = tmp_path / "late.png"
    res = tcpdelay("playout", "--profile", "voip", "--rtt-s", "0.1", "--loss", "0.02", "--json", "--plot", str(plot))
    assert res.returncode == 0, res.stderr
    d = json.loads(res.stdout)
    assert d["recommended_playout_s"] == pytest.approx(0.05 + 0.1 + 3 / 50)
    lf = d["curve"]["late_fraction"]
    assert all(a >= b - 1e-12 for a, b in zip(lf, lf[1:]))  # non-increasing in the playout delay
    assert 0 <= d["masked_tcp_delay_fraction"] <= 1
    assert plot.stat().st_size > 5000


@pytest.mark.parametrize("args, prefix", [
    (["delay", "--profile", "voip", "--rtt-s", "0.1", "--loss", "0.01", "--plot", "{dir}/x.xyz"],
     "tcpdelay delay: --plot: {dir}/x.xyz must end in one of .png, .svg, .pdf"),
    (["region", "--profile", "voip", "--rtts-s", "0.1", "--losses", "0.01", "--plot", "{dir}/r.jpg"],
     "tcpdelay region: --plot: {dir}/r.jpg must end in one of"),
    (["playout", "--profile", "voip", "--rtt-s", "0.1", "--loss", "0.01", "--plot", "{dir}"],
     "tcpdelay playout: --plot: {dir} is a directory"),
    (["delay", "--profile", "voip", "--rtt-s", "1e308", "--loss", "0.01"], "tcpdelay delay: --rtt-s: 1e+308 is too large"),
    (["delay", "--profile", "voip", "--rtt-s", "1e20", "--loss", "0"], "tcpdelay delay: --rtt-s: 1e+20 s at 50 packets/s"),
    (["delay", "--profile", "voip", "--rtt-s", "0.1", "--loss", "0.01", "--t0-s", "1e308"], "tcpdelay delay: --t0-s: 1e+308"),
    (["delay", "--rate-bps", "1", "--packet-bytes", "1e-300", "--rtt-s", "0.1", "--loss", "0.01"],
     "tcpdelay delay: --packet-bytes: 1e-300 is below one byte"),
    (["delay", "--profile", "voip", "--rtt-s", "0.1", "--loss", "0.01", "--connections", "99999999999999999999999"],
     "tcpdelay delay: --connections: "),
    (["delay", "--profile", "voip", "--rtt-s", "0.1", "--loss", "0.01", "--split", "99999999999999999999"],
     "tcpdelay delay: --split: "),
    (["delay", "--profile", "voip", "--rtt-s", "0.1", "--loss", "0.01", "--one-way-s", "1e308"],
     "tcpdelay delay: --one-way-s: "),
    (["delay", "--profile", "voip", "--rtt-s", "0.1", "--loss", "0.01", "--mss-bytes", "nan"],
     "tcpdelay delay: --mss-bytes: NaN is not allowed"),
])
def test_bad_values_are_one_line_naming_command_and_flag(tmp_path, args, prefix):
    """Each was a traceback (matplotlib's ValueError after the solve, OverflowError in
    DelayParams, MemoryError in the mixture) or a line without the flag."""
    args = [a.replace("{dir}", str(tmp_path)) for a in args]
    res = tcpdelay(*args, "--json")
    assert "Traceback" not in res.stderr, res.stderr
    assert res.returncode == 2, res.stderr
    lines = res.stderr.splitlines()
    assert len(lines) == 1, res.stderr
    assert lines[0].startswith("tcpdelay: error: " + prefix.replace("{dir}", str(tmp_path))), lines[0]
    assert res.stdout == ""  # refused before anything was solved or printed
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("args, line", [
    # issue 27, defect 7: click said "'two' is not a valid integer range."
    (["delay", "--profile", "voip", "--rtt-s", "0.1", "--loss", "0.01", "--connections", "two"],
     "tcpdelay delay: --connections: 'two' is not a number; give a whole number from 1 to 64"),
    (["delay", "--profile", "voip", "--rtt-s", "0.1", "--loss", "0.01", "--mss-bytes", "1e9"],
     "tcpdelay delay: --mss-bytes: 1e9 is outside the range; give a whole number from 88 to 65495"),
    # --mss-bytes too small for the profile's packets blamed --packet-bytes, which was not given
    (["delay", "--profile", "voip", "--rtt-s", "0.1", "--loss", "0.01", "--mss-bytes", "100"],
     "tcpdelay delay: --mss-bytes: 100 is smaller than one packet of profile voip (174 bytes); give at least "
     "174, or cut the packets with --split N"),
    (["playout", "--profile", "video", "--rtt-s", "0.1", "--loss", "0.01", "--mss-bytes", "1000"],
     "tcpdelay playout: --mss-bytes: 1000 is smaller than one packet of profile video (1448 bytes); give at "
     "least 1448"),
    (["region", "--profile", "video", "--rtts-s", "0.1", "--losses", "0.01", "--mss-bytes", "1000"],
     "tcpdelay region: --mss-bytes: 1000 is smaller than one packet of profile video (1448 bytes); give at "
     "least 1448"),
    (["delay", "--rate-bps", "1e5", "--packet-bytes", "300", "--mss-bytes", "200", "--rtt-s", "0.1", "--loss", "0.01"],
     "tcpdelay delay: --packet-bytes: 300 exceeds --mss-bytes 200; a packet must fit in one segment: give a "
     "smaller --packet-bytes or a larger --mss-bytes, or cut the packets with --split N"),
    # region dropped the empty entry, and solved a repeated value twice (two identical rows)
    (["region", "--profile", "voip", "--rtts-s", "0.1,,0.2", "--losses", "0.01"],
     "tcpdelay region: --rtts-s: '0.1,,0.2' has an empty entry (number 2); give numbers separated by "
     "single commas (e.g. '0.02,0.1,0.3')"),
    (["region", "--profile", "voip", "--rtts-s", "0.1", "--losses", "0.01,"],
     "tcpdelay region: --losses: '0.01,' has an empty entry (number 2); give numbers separated by single "
     "commas (e.g. '0.02,0.1,0.3')"),
    (["region", "--profile", "voip", "--rtts-s", "0.1,0.2,0.1", "--losses", "0.01"],
     "tcpdelay region: --rtts-s: 0.1 given more than once; give each value once"),
    (["region", "--profile", "voip", "--rtts-s", "0.1", "--losses", "0.01,0.02,0.010"],
     "tcpdelay region: --losses: 0.01 given more than once; give each value once"),
])
def test_input_checks_name_the_right_option_and_the_allowed_values(args, line):
    res = tcpdelay(*args)
    assert res.returncode == 2 and res.stdout == ""  # no blank line from the progress bar either
    assert res.stderr.splitlines() == [f"tcpdelay: error: {line}"]


def test_region_takes_spaces_after_commas():
    res = tcpdelay("region", "--profile", "voip", "--rtts-s", "0.1, 0.3", "--losses", "0.01", "--json")
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["rtts_s"] == [0.1, 0.3]


def test_the_library_refuses_what_would_overflow():
    from tcpdelay.errors import ParameterError
    from tcpdelay.model.delay import predict
    from tcpdelay.model.delay.params import DelayParams

    with pytest.raises(ParameterError, match=r"^rtt_s: 1e\+308 is too large"):
        DelayParams(rate_pps=50, packet_bytes=200, rtt_s=1e308, loss=0.01)
    with pytest.raises(ParameterError, match=r"^connections: .* must be an integer in \[1, 64\]"):
        predict("voip", rtt_s=0.1, loss=0.01, connections=10**23)
    with pytest.raises(ParameterError, match=r"^rtt_s: 1e\+20 s at 50 packets/s needs a window bound"):
        predict("voip", rtt_s=1e20, loss=0.0)


def test_the_backlog_rows_agree_and_a_number_keeps_its_unit():
    """Issue 54, item 6: ``delay`` printed "mean backlog (packets) 0.00" beside "backlog share of
    TCP delay 8.7 %" (the chain's backlog is what a round leaves; the share counts waits within
    rounds), and its footer broke "11 %" across two lines at 80 columns."""
    res = subprocess.run([sys.executable, "-m", "tcpdelay", "delay", "--profile", "voip", "--rtt-s", "0.1",
                          "--loss", "0.02"], capture_output=True, text=True, timeout=300, env={**os.environ, "COLUMNS": "80"})
    assert res.returncode == 0, res.stderr
    rows = {cells[0]: cells[1] for line in res.stdout.splitlines()
            if len(cells := [c.strip() for c in line.strip("│ ").split("│")]) == 2}
    doc = json.loads(tcpdelay("delay", "--profile", "voip", "--rtt-s", "0.1", "--loss", "0.02", "--json").stdout)
    wait_s = doc["backlog_share"] * (doc["mean_s"] - 0.05)
    assert doc["backlog_share"] > 0.05 and doc["mean_backlog_packets"] == 0
    from tcpdelay.cli.common import fmt_s

    assert rows["backlog share of TCP delay"] == f"{doc['backlog_share'] * 100:.1f} % ({fmt_s(wait_s)} a packet)"
    assert rows["backlog left after a round"] == "0 packets"
    assert "mean backlog (packets)" not in rows
    res = subprocess.run([sys.executable, "-m", "tcpdelay", "delay", "--profile", "video", "--rtt-s", "0.3",
                          "--loss", "0.001"], capture_output=True, text=True, timeout=300, env={**os.environ, "COLUMNS": "80"})
    lines = res.stdout.splitlines()
    footer = lines[next(i for i, line in enumerate(lines) if line.startswith("model error")):]
    assert "(the measured means there are themselves uncertain by up to 11 %" in " ".join(footer)
    for a, b in zip(footer, footer[1:]):
        assert not (a[-1:].isdigit() and b.split(" ")[0] in ("%", "ms", "s")), (a, b)
    assert all(len(line) <= 80 for line in lines)


def test_phrase_lines_keep_a_number_with_its_unit():
    from tcpdelay.cli.text_layout import phrase_lines

    text = "p95 within 28 % (the measured means there are themselves uncertain by up to 11 %, one standard error)"
    lines = phrase_lines(text, 80)
    assert lines == ["p95 within 28 % (the measured means there are themselves uncertain by up to",
                     "11 %, one standard error)"]
    assert phrase_lines("a delay of 20 ms and 3 s", 20) == ["a delay of 20 ms and", "3 s"]
