"""``tcpdelay advise`` as a user runs it (real subprocesses): the papers' own cases (Brosh et al.,
"The Delay-Friendliness of TCP for Real-Time Traffic", §6.6, §7), "does not fit", the numbers of
every option against ``tcpdelay delay``, bad input, and ``--measure`` in ns-3."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

import pytest

from tcpdelay.cli import main


def tcpdelay(*args, timeout=300):
    return subprocess.run([sys.executable, "-m", "tcpdelay", *args], capture_output=True, text=True, timeout=timeout)


def advise_json(*args):
    res = tcpdelay("advise", *args, "--json")
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


def test_video_300ms_half_percent_split_or_parallel_above_as_is():
    doc = advise_json("--profile", "video", "--rtt-s", "0.3", "--loss", "0.005")
    names = [o["name"] for o in doc["options"]]
    assert [o["rank"] for o in doc["options"]] == list(range(1, len(names) + 1))
    above = names[:names.index("as-is")]
    assert any(n.startswith("split-") or n.endswith("connections (blind)") for n in above), names
    for o in doc["options"]:
        assert {"name", "predicted", "cost", "meets_budget", "source"} <= set(o)
        assert {"extra_bps", "extra_connections", "fairness", "added_delay_s"} <= set(o["cost"])
        if o["predicted"] is None:   # what the model cannot quantify carries no number
            assert o["source"].startswith("measurement only") and o["meets_budget"] is None
        else:
            assert o["source"] == "model"
            assert {"mean_s", "p95_s", "p99_s", "late_fraction"} <= set(o["predicted"])
    assert {"2 connections (intelligent)", "RACK/TLP", "TCP variant bbr"} <= set(names)


def test_voip_100ms_2pct_playout_meets_a_5pct_late_budget():
    doc = advise_json("--profile", "voip", "--rtt-s", "0.1", "--loss", "0.02", "--late-budget", "0.05",
                      "--playout-s", "0.25")
    opt = next(o for o in doc["options"] if o["name"] == "playout L+RTT+3/f")
    assert opt["predicted"]["playout_s"] == pytest.approx(0.05 + 0.1 + 3 / 50)
    assert opt["predicted"]["late_fraction"] <= 0.05 and opt["meets_budget"] is True
    assert doc["budget"] == {"playout_s": 0.25, "late_fraction": 0.05}


def test_rate_above_throughput_does_not_fit_with_the_bound():
    args = ["--rate-bps", "3e6", "--packet-bytes", "1448", "--rtt-s", "0.3", "--loss", "0.01"]
    res = tcpdelay("advise", *args, "--json")
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    delay = json.loads(tcpdelay("delay", *args, "--json").stdout)
    bound = delay["tcp_throughput_bps"]
    assert doc["fit"]["fits"] is False and doc["fit"]["max_rate_bps"] == pytest.approx(bound)
    assert f"does not fit this path: at most {bound / 1e3:.4g} kb/s" in doc["fit"]["message"]
    assert "does not fit" in res.stderr
    human = tcpdelay("advise", *args)
    assert "does not fit this path: at most" in " ".join(human.stdout.split())


def delay_json_here(capsys, *args) -> dict:
    """``tcpdelay delay ARGS --json`` run in this process (a process each for a dozen options cost
    more CPU starting Python than computing; tests/cli/test_delay_cli.py runs the command as one)."""
    with pytest.raises(SystemExit) as exc:
        main(["delay", *args, "--json"])
    out, err = capsys.readouterr()
    assert exc.value.code == 0, err
    return json.loads(out)


@pytest.mark.parametrize("source", [["--profile", "voip"], ["--rate-bps", "115840", "--packet-bytes", "724"]])
def test_every_option_equals_tcpdelay_delay(source, capsys):
    path = ["--rtt-s", "0.1", "--loss", "0.02", "--no-limited-transmit"]
    doc = advise_json(*source, *path)
    checked = 0
    for o in doc["options"]:
        if o["delay_args"] is None:
            continue
        d = delay_json_here(capsys, *source, *path, *o["delay_args"])
        p = o["predicted"]
        assert (p["mean_s"], p["p95_s"], p["p99_s"]) == (d["mean_s"], d["p95_s"], d["p99_s"]), o["name"]
        dist = d["distribution"]
        on_time = sum(pr for x, pr in zip(dist["delay_s"], dist["probability"]) if x <= p["playout_s"] + 1e-12)
        assert p["late_fraction"] == pytest.approx(1 - on_time, abs=1e-12), o["name"]
        checked += 1
    assert checked >= 8


@pytest.mark.parametrize("args,fragment", [
    (["--rtt-s", "0.1", "--loss", "0.01"], "--profile"),
    (["--profile", "voip", "--rtt-s", "0.1", "--loss", "1"], "--loss"),
    (["--profile", "voip", "--rtt-s", "nan", "--loss", "0.01"], "--rtt-s"),
    (["--profile", "voip", "--rtt-s", "0.1", "--loss", "0.01", "--playout-s", "0.2", "--bound-s", "0.3"], "not both"),
    (["--profile", "voip", "--rtt-s", "0.1", "--loss", "0.01", "--late-budget", "0.05", "--percentile", "95"], "not both"),
    (["--profile", "voip", "--rtt-s", "0.1", "--loss", "0.01", "--cross-bulk", "2"], "--cross-bulk"),
    (["--profile", "voip", "--rtt-s", "0.1", "--loss", "0.01", "--measure", "--measure-option", "nope"],
     "--measure-option"),
    (["--profile", "voip", "--rtt-s", "0.1", "--loss", "0.01", "--backend", "ns4"], "--backend"),
])
def test_bad_input_one_line_exit_2(args, fragment):
    res = tcpdelay("advise", *args)
    assert res.returncode == 2, res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tcpdelay: error:") and fragment in lines[0], res.stderr
    assert "Traceback" not in res.stderr


@pytest.mark.ns3
def test_measure_in_ns3_confirms_the_top_options(capsys):
    """In this process: the runs go to the test session's ns-3 worker (a subprocess of the
    command would start its own, ~20 s of CPU to import ns-3 and compile tcpdelay's C++ parts,
    more than the four 4-s runs); the command's exit status as a process is the tests' above."""
    if importlib.util.find_spec("ns") is None:    # not imported here: seconds of CPU, the worker does it
        pytest.skip("ns-3 (the [sim] extra) is not installed")
    with pytest.raises(SystemExit) as exc:
        main(["advise", "--profile", "video", "--rtt-s", "0.3", "--loss", "0.005", "--measure",
              "--backend", "ns3", "--measure-s", "4", "--json"])
    out, err = capsys.readouterr()
    assert exc.value.code == 0, err
    doc = json.loads(out)
    m = doc["measurement"]
    assert m["backend"] == "ns3" and m["failed"] == []
    assert "as-is" in m["measured"] and len(m["measured"]) == 4
    measured = [o for o in doc["options"] if "measured" in o]
    for o in measured:
        assert o["source"] == "ns3"
        assert o["measured"]["packets"] > 0 and o["measured"]["mean_s"] > 0.15   # at least L
    # the playout options are the as-is run read at their playout delay
    as_is = next(o for o in doc["options"] if o["name"] == "as-is")
    rule = next(o for o in doc["options"] if o["name"] == "playout L+RTT+3/f")
    assert rule["measured"]["mean_s"] == as_is["measured"]["mean_s"]
    assert doc["ranking_note"]
    ranks = [o["rank"] for o in doc["options"]]
    assert ranks == sorted(ranks)


@pytest.mark.ns3
def test_measured_playout_for_the_budget_is_what_the_as_is_run_needed(capsys):
    """Issue 54, item 6: measured, the "playout for the budget" row said 144 ms (the model's
    playout delay for the budget) while the as-is row of the same run said the run needed 67 ms.
    A user sets the playout delay the measurement says: the row is now the as-is run read at the
    playout delay it needed, the model's kept beside it."""
    if importlib.util.find_spec("ns") is None:
        pytest.skip("ns-3 (the [sim] extra) is not installed")
    with pytest.raises(SystemExit) as exc:
        main(["advise", "--profile", "voip", "--rtt-s", "0.1", "--loss", "0.02", "--measure", "--backend", "ns3",
              "--measure-s", "8", "--json"])
    out, err = capsys.readouterr()
    assert exc.value.code == 0, err
    doc = json.loads(out)
    opts = {o["name"]: o for o in doc["options"]}
    as_is, row = opts["as-is"], opts["playout for the budget"]
    needed = as_is["measured"]["needed_playout_s"]
    assert row["settings"]["playout_s"] == row["measured"]["playout_s"] == needed
    assert row["measured"]["needed_playout_s"] == needed
    assert row["measured"]["late_fraction"] <= doc["budget"]["late_fraction"] and row["meets_budget"] is True
    assert row["model_playout_s"] == pytest.approx(row["predicted"]["playout_s"])
    assert row["model_playout_s"] != pytest.approx(needed, abs=1e-3)   # the case the row got wrong
    assert f"{needed * 1e3:.0f} ms (the model's: {row['model_playout_s'] * 1e3:.0f} ms)" in row["what"]
    assert row["cost"]["added_delay_s"] == pytest.approx(needed - doc["budget"]["playout_s"])


@pytest.mark.testbed
def test_measure_on_the_testbed_confirms_the_top_options():
    """The same on real Linux TCP in namespaces (the default backend): the measured numbers
    come from the testbed and say so."""
    from tcpdelay.testbed.netns import unavailable_reason

    if unavailable_reason() is not None:
        pytest.skip(str(unavailable_reason()))
    res = tcpdelay("advise", "--profile", "video", "--rtt-s", "0.3", "--loss", "0.005", "--measure",
                   "--measure-s", "4", "--json", timeout=600)
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    m = doc["measurement"]
    assert m["backend"] == "testbed" and m["failed"] == []
    assert "as-is" in m["measured"] and len(m["measured"]) == 4
    measured = [o for o in doc["options"] if "measured" in o]
    assert len(measured) >= 4
    for o in measured:
        assert o["source"] == "measured"
        assert o["measured"]["packets"] > 0 and o["measured"]["mean_s"] > 0.15   # at least L
    assert doc["ranking_note"]


@pytest.mark.parametrize("columns", [80, 140])
def test_the_table_keeps_every_number_whole_in_a_narrow_terminal(columns):
    """Ten columns do not fit 80: below 120 the costs follow the table as lines; no cell is cut."""
    import os

    env = {**os.environ, "COLUMNS": str(columns)}
    res = subprocess.run([sys.executable, "-m", "tcpdelay", "advise", "--profile", "voip", "--rtt-s", "0.1",
                          "--loss", "0.02"], capture_output=True, text=True, timeout=300, env=env)
    assert res.returncode == 0, res.stderr
    out = res.stdout
    assert "…" not in out
    assert max(len(line) for line in out.splitlines()) <= columns
    doc = advise_json("--profile", "voip", "--rtt-s", "0.1", "--loss", "0.02")
    for o in doc["options"]:
        if o["predicted"] is not None and not o["predicted"].get("unstable"):
            p95 = o["predicted"]["p95_s"]
            assert (f"{p95 * 1e3:.0f} ms" if p95 < 1 else f"{p95:.2f} s") in out
    if columns < 120:
        assert "\ncost:\n" in out and "split-2: +20.8 kb/s headers" in out
    else:
        assert "cost" in out.splitlines()[2] or any("┃ cost" in line for line in out.splitlines())
