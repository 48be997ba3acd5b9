"""``tcpdelay advise --measure``'s "AQM at the bottleneck" (issue 29 item 5): the options the
model cannot rank (it has no AQM), run with FQ-CoDel / CoDel at the bottleneck, and the note that
says whether the path's queue, not TCP, is where the media's delay comes from."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

import pytest

from tcpdelay.cli import main
from tcpdelay.experiments.advice_measurement import _queue_note, advise, aqm_option_name, option_scenario
from tcpdelay.model.advice_ranking import Budget

FQ = aqm_option_name("FQ-CoDel")
CODEL = aqm_option_name("CoDel")


def tcpdelay(*args, timeout=900):
    return subprocess.run([sys.executable, "-m", "tcpdelay", *args], capture_output=True, text=True, timeout=timeout)


def tcpdelay_here(capsys, *args) -> tuple[int, str, str]:
    """``tcpdelay ARGS`` run in this process: (exit status, stdout, stderr). Its ns-3 runs go to
    this process's ns-3 worker, started once for the test session (a subprocess of the command
    would start its own: ~20 s of CPU to import ns-3 and compile tcpdelay's C++ parts, more
    than the runs themselves). The command's exit status as a process: the test above."""
    with pytest.raises(SystemExit) as exc:
        main(list(args))
    got = capsys.readouterr()
    return exc.value.code, got.out, got.err


def _advice(**kw):
    return advise("voip", rtt_s=0.1, loss=0.01, budget=Budget(playout_s=0.2, late_fraction=0.05), **kw)


def test_aqm_options_are_listed_measurement_only_and_run_the_discipline_at_the_bottleneck():
    adv = _advice(bottleneck_bps=3e6)
    opts = {o["name"]: o for o in adv["options"]}
    for name, discipline in ((FQ, "fq_codel"), (CODEL, "codel")):
        o = opts[name]
        assert o["kind"] == "aqm" and o["predicted"] is None and o["meets_budget"] is None
        assert o["source"].startswith("measurement only")
        sc = option_scenario(o, adv, duration_s=5, queue_size=100, cross_bulk=2, backend="ns3")
        fwd = sc["path"]["forward"]
        assert fwd["aqm"] == {"discipline": discipline} and fwd["queue_packets"] == 100 and fwd["rate_bps"] == 3e6
        assert "aqm" not in sc["path"]["reverse"] and "aqm" not in sc["flows"][0]["tcp"]
        # ns-3 has no RACK/TLP: the bulk cross flows run without them too
        assert sc["cross"][0]["tcp"] == {"preset": "linux-default", "rack": False, "tlp": False}
    as_is = option_scenario(opts["as-is"], adv, duration_s=5, queue_size=100)
    assert "aqm" not in as_is["path"]["forward"]


def _measured(name, kind, p95_s):
    return {"name": name, "kind": kind, "measured": {"p95_s": p95_s}}


def test_queue_note_says_the_queue_when_an_aqm_halves_the_delay_and_beats_every_sender_change():
    note = _queue_note([_measured("as-is", "as-is", 0.8), _measured("UDP", "udp", 0.4),
                        _measured(FQ, "aqm", 0.08), _measured(CODEL, "aqm", 0.39)])
    assert note.startswith("the path's queue, not TCP, is where the delay comes from")
    assert "800 ms to 80 ms" in note and "UDP: 400 ms" in note and "FQ-CoDel" in note
    # the AQM helps but a change to the sender helps more: not the queue
    note = _queue_note([_measured("as-is", "as-is", 0.8), _measured("UDP", "udp", 0.05), _measured(FQ, "aqm", 0.08)])
    assert note.startswith("the bottleneck's queue is not the main source")
    # the AQM barely changes the delay (it is TCP's recovery, not the queue): not the queue
    note = _queue_note([_measured("as-is", "as-is", 0.5), _measured(FQ, "aqm", 0.45)])
    assert note.startswith("the bottleneck's queue is not the main source") and "450 ms against 500 ms" in note
    # nothing to compare: no note
    assert _queue_note([_measured("as-is", "as-is", 0.5)]) is None
    assert _queue_note([_measured(FQ, "aqm", 0.05)]) is None


def test_aqm_without_a_bottleneck_is_one_line_exit_2():
    res = tcpdelay("advise", "--profile", "voip", "--rtt-s", "0.1", "--loss", "0.01", "--measure", "--backend", "ns3",
                   "--measure-option", CODEL)
    assert res.returncode == 2, res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "--bottleneck-bps" in lines[0] and "Traceback" not in res.stderr, res.stderr


@pytest.mark.ns3
def test_measure_in_ns3_finds_the_queue_behind_voip_beside_bulk_flows(capsys):
    """VoIP over TCP beside five bulk flows through a 3 Mb/s, 100-packet drop-tail queue (Brosh et
    al. §5.3's path): the measurement runs both AQM options, FQ-CoDel keeps the VoIP flow out of
    the bulk flows' queue, and advise says the queue is where the delay comes from."""
    if importlib.util.find_spec("ns") is None:    # not imported here: seconds of CPU, the worker does it
        pytest.skip("ns-3 (the [sim] extra) is not installed")
    args = ("advise", "--profile", "voip", "--rtt-s", "0.1", "--loss", "0.01", "--bottleneck-bps", "3e6",
            "--queue-size", "100", "--cross-bulk", "5", "--measure", "--backend", "ns3", "--measure-s", "10")
    code, out, err = tcpdelay_here(capsys, *args, "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["measurement"]["failed"] == []
    assert FQ in doc["measurement"]["measured"] and CODEL in doc["measurement"]["measured"]
    opts = {o["name"]: o for o in doc["options"]}
    assert opts[FQ]["source"] == "ns3" and opts[FQ]["measured"]["packets"] > 0
    assert opts[FQ]["measured"]["p95_s"] < opts["as-is"]["measured"]["p95_s"] / 2
    assert opts[FQ]["rank"] < opts["as-is"]["rank"]
    assert doc["queue_note"].startswith("the path's queue, not TCP, is where the delay comes from")
    # the human form says it too
    code, out, err = tcpdelay_here(capsys, *args)
    assert code == 0 and "the path's queue, not TCP" in " ".join(out.split()), err
