"""``tcpdelay throughput``'s input checks (issue 27, defect 7): absurd values are one line naming
the flag and the allowed range, exit 2, nothing printed on stdout."""

from __future__ import annotations

import json

import pytest

from tcpdelay.cli import main


def run(capsys, *args):
    """The installed entry point, tcpdelay.cli.main, in-process: (exit code, stdout, stderr)."""
    with pytest.raises(SystemExit) as exc:
        main(list(args))
    out, err = capsys.readouterr()
    return exc.value.code, out, err


@pytest.mark.parametrize("args, line", [
    # printed "RTT inf ms" and throughputs of 1e-303 b/s
    (["--rtt-s", "1e308", "--loss", "0.01"],
     "tcpdelay throughput: --rtt-s: 1e+308 is not in the range 0.0<x<=3600.0."),
    (["--rtt-s", "0.1", "--loss", "0.01", "--t0-s", "1e300"],
     "tcpdelay throughput: --t0-s: 1e+300 is not in the range 0.0<x<=3600.0."),
    # was accepted: a 100 MB segment
    (["--rtt-s", "0.1", "--loss", "0.01", "--mss-bytes", "100000000"],
     "tcpdelay throughput: --mss-bytes: 100000000 is outside the range; give a whole number from 88 to 65495"),
    # was click's "'1e9' is not a valid integer range."
    (["--rtt-s", "0.1", "--loss", "0.01", "--mss-bytes", "1e9"],
     "tcpdelay throughput: --mss-bytes: 1e9 is outside the range; give a whole number from 88 to 65495"),
    (["--rtt-s", "0.1", "--loss", "0.01", "--mss-bytes", "1448.5"],
     "tcpdelay throughput: --mss-bytes: 1448.5 is not a whole number; give a whole number from 88 to 65495"),
    (["--rtt-s", "0.1", "--loss", "0.01", "--mss-bytes", "big"],
     "tcpdelay throughput: --mss-bytes: 'big' is not a number; give a whole number from 88 to 65495"),
    (["--rtt-s", "0.1", "--loss", "0.01", "--acks-per-segment", "inf"],
     "tcpdelay throughput: --acks-per-segment: inf is not allowed; give a finite number"),
])
def test_absurd_values_are_one_line_with_the_allowed_range(capsys, args, line):
    code, out, err = run(capsys, "throughput", *args)
    assert code == 2 and out == ""
    assert err.splitlines() == [f"tcpdelay: error: {line}"]


def test_a_whole_number_with_an_exponent_is_a_whole_number(capsys):
    code, out, err = run(capsys, "throughput", "--rtt-s", "0.1", "--loss", "0.01", "--mss-bytes", "1.46e3", "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["mss_bytes"] == 1460 and isinstance(doc["mss_bytes"], int)


def test_the_largest_rtt_allowed_prints_finite_numbers(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    code, out, _ = run(capsys, "throughput", "--rtt-s", "3600", "--loss", "0.01")
    assert code == 0
    assert "RTT 3.6e+06 ms" in out and "inf" not in out
