"""Queue disciplines at the ns-3 bottleneck (issue 29 item 3; docs/ns3.md, "Queue disciplines
and ECN"): a scenario's ``path.forward.aqm`` runs ns-3's CoDelQueueDisc, FqCoDelQueueDisc or
PieQueueDisc at the router's device, a flow's ``tcp.ecn`` is TcpSocketBase's UseEcn, and the
queue disc's drops and marks reach the run's link counters under the testbed's names. The
cases are the testbed's (tests/testbed/test_aqm.py): 10 Mb/s, a 1000-packet limit, 20 ms RTT.
What ns-3 cannot run as the emulator does is one line at plan time."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tcpdelay.experiments.run import run_scenario
from tcpdelay.experiments.scenario import parse_scenario
from tcpdelay.records import read_records
from tcpdelay.sim.aqm import queue_disc, unsupported
from tcpdelay.sim.job import host_tcp

RATE_BPS, LIMIT_PACKETS, RTT_S = 10e6, 1000, 0.02
ONE_WAY_S = RTT_S / 2
CODEL_TARGET_S = 0.005


def _path(aqm: dict | None) -> dict:
    forward = {"rate_bps": RATE_BPS, "queue_packets": LIMIT_PACKETS, **({"aqm": aqm} if aqm else {})}
    return {"rtt_s": RTT_S, "forward": forward}


def _run(data: dict, out: Path) -> tuple[dict, dict]:
    """The run's totals and its run.json."""
    totals = run_scenario(parse_scenario(data), 1, out, backend="ns3")
    assert totals["errors"] == [], totals["errors"]
    return totals, json.loads((out / "run.json").read_text())


#: Seconds of each run below (the tests print the figures that follow with ``pytest -s``). The bulk
#: flow's slow start overflows the 1000 packets early (a 4-s run already drops 1031) and each
#: discipline's steady state comes well before 5 s: at 5 s (15 s) drop-tail's median VoIP delay is
#: 1.08 s (0.60), CoDel's median sojourn 5.4 ms (5.4) and peak 113 packets (113), FQ-CoDel's VoIP
#: median and p99 11.9 and 12.8 ms (the same), PIE's median sojourn 10.3 ms (15.1). Every bound
#: below holds with at least the margin it had at 15 s, and ns-3 with seed 1 gives the same numbers
#: on any machine. The drop-tail run's ~11 s of CPU is ns-3 recovering from ~1000 losses in one
#: window (TcpTxBuffer walks its list of sent segments), whatever the duration; each other run
#: costs ~1.0 s of CPU at 5 s against ~1.7 s at 15 s.
BESIDE_BULK_S = 5


@pytest.fixture(scope="module")
def beside_bulk(worker, tmp_path_factory) -> dict:
    """VoIP over UDP beside one bulk Reno flow for BESIDE_BULK_S, under each discipline: by
    discipline, the VoIP packets' one-way delays (s) and the bottleneck's forward counters."""
    out = {}
    for name in ("drop_tail", "codel", "fq_codel", "pie"):
        data = {"name": f"aqm-{name}", "duration_s": BESIDE_BULK_S, "seed": 1,
                "path": _path(None if name == "drop_tail" else {"discipline": name}),
                "flows": [{"name": "voip", "profile": "voip", "transport": "udp"}],
                "cross": [{"kind": "bulk", "start_s": 0.0, "tcp": {"congestion_control": "reno"}}]}
        run_dir = tmp_path_factory.mktemp(name) / "run"
        _, run = _run(data, run_dir)
        r = read_records(run_dir, "received")
        delays = np.asarray(r["recv_time_s"]) - np.asarray(r["send_time_s"])
        # 50 packets/s, (nearly) all arrive (not those still in drop-tail's queue at the end)
        assert len(delays) > 0.9 * 50 * BESIDE_BULK_S
        out[name] = (delays, run["run"]["link_counters"]["a_to_b"])
    return out


@pytest.mark.ns3
def test_codel_keeps_the_queue_short_where_drop_tail_fills_the_buffer(beside_bulk):
    tail_delay, tail = beside_bulk["drop_tail"]
    codel_delay, codel = beside_bulk["codel"]
    print("drop-tail", np.median(tail_delay), tail["drops"], tail["peak_queue_packets"])
    print("codel", np.median(codel_delay), codel["drops"], codel["peak_queue_packets"], codel["sojourn_ms"])
    # drop-tail: the bulk flow fills the 1000 packets (1.2 s at 10 Mb/s) and overflows it
    assert tail["queue_discipline"] == "drop_tail" and "sojourn_ms" not in tail
    assert tail["peak_queue_packets"] == LIMIT_PACKETS and tail["drops"]["queue"] > 0 and tail["drops"]["aqm"] == 0
    # CoDel: its own drops (never the limit) hold the median sojourn near the 5-ms target
    assert codel["queue_discipline"] == "codel"
    assert codel["drops"]["aqm"] > 0 and codel["drops"]["queue"] == 0 and codel["ce_marks"] == 0
    assert codel["drops"]["total"] == codel["drops"]["aqm"]
    assert codel["sojourn_ms"]["p50"] < 2 * CODEL_TARGET_S * 1e3
    assert codel["peak_queue_packets"] < LIMIT_PACKETS / 5
    assert codel["packets_in"] == codel["packets_out"] + codel["drops"]["total"]
    # the media see it: the VoIP packets' median wait beyond propagation, a tenth of drop-tail's
    assert np.median(codel_delay) - ONE_WAY_S < (np.median(tail_delay) - ONE_WAY_S) / 10


@pytest.mark.ns3
def test_fq_codel_protects_a_sparse_voip_flow_beside_a_bulk_flow(beside_bulk):
    """RFC 8290 §4.2: the sparse flow's packets go ahead of the bulk flow's backlog, where CoDel's
    one FIFO makes them wait its standing queue."""
    fq_delay, fq = beside_bulk["fq_codel"]
    codel_delay, _ = beside_bulk["codel"]
    print("fq_codel", np.quantile(fq_delay, [0.5, 0.99]), "codel", np.quantile(codel_delay, [0.5, 0.99]), fq["drops"])
    assert fq["queue_discipline"] == "fq_codel" and fq["drops"]["aqm"] > 0 and fq["drops"]["queue"] == 0
    assert np.median(fq_delay) - ONE_WAY_S < (np.median(codel_delay) - ONE_WAY_S) / 2
    assert np.quantile(fq_delay, 0.99) - ONE_WAY_S < (np.quantile(codel_delay, 0.99) - ONE_WAY_S) / 2


@pytest.mark.ns3
def test_pie_drops_under_load_and_holds_the_delay_near_its_target(beside_bulk):
    pie_delay, pie = beside_bulk["pie"]
    tail_delay, _ = beside_bulk["drop_tail"]
    print("pie", np.median(pie_delay), pie["drops"], pie["sojourn_ms"])
    assert pie["queue_discipline"] == "pie" and pie["drops"]["aqm"] > 0 and pie["drops"]["queue"] == 0
    assert pie["sojourn_ms"]["p50"] < 2 * 15.0                      # its 15-ms reference, RFC 8033
    assert np.median(pie_delay) - ONE_WAY_S < (np.median(tail_delay) - ONE_WAY_S) / 10


def _tcp_bulk(aqm: dict, ecn: int) -> dict:
    """A TCP media flow of 1400-byte packets every ms (11.2 Mb/s: more than the link carries,
    so it runs as a bulk flow), Reno, the sender's tcp_ecn = ``ecn``."""
    return {"name": "aqm-ecn", "duration_s": 10, "seed": 1, "path": _path(aqm),
            "flows": [{"name": "bulk", "packet_size_bytes": 1400, "interval_s": 0.001, "transport": "tcp",
                       "tcp": {"congestion_control": "reno", "ecn": ecn}}]}


@pytest.mark.ns3
def test_with_ecn_codel_marks_instead_of_dropping_and_tcp_retransmits_nothing(worker, tmp_path):
    _, plain = _run(_tcp_bulk({"discipline": "codel"}, 0), tmp_path / "plain")
    _, ecn = _run(_tcp_bulk({"discipline": "codel", "ecn": True}, 1), tmp_path / "ecn")
    dropped, marked = plain["run"]["link_counters"]["a_to_b"], ecn["run"]["link_counters"]["a_to_b"]
    print("codel", dropped["drops"], dropped["ce_marks"], plain["tcp_stats"][0]["total_retrans"])
    print("codel+ecn", marked["drops"], marked["ce_marks"], ecn["tcp_stats"][0]["total_retrans"])
    assert dropped["drops"]["aqm"] > 0 and dropped["ce_marks"] == 0
    assert plain["tcp_stats"][0]["total_retrans"] >= dropped["drops"]["aqm"]
    assert marked["ce_marks"] > 0 and marked["drops"]["total"] == 0
    assert ecn["tcp_stats"][0]["total_retrans"] == 0
    # TCP backed off on the marks as on the drops: the queue stays near the target either way
    assert marked["sojourn_ms"]["p50"] < 2 * CODEL_TARGET_S * 1e3
    job = json.loads((tmp_path / "ecn" / "sim" / "job.json").read_text())
    assert sorted(h["tcp"]["ecn"] for h in job["hosts"]) == [1, 2]    # the receiver: Linux's default


@pytest.mark.ns3
def test_pie_with_ecn_marks_only_while_its_probability_is_low(worker, tmp_path):
    """RFC 8033 §5.1: PIE marks an ECN-capable packet while drop_prob <= 10 % and drops above."""
    _, run = _run(_tcp_bulk({"discipline": "pie", "ecn": True}, 1), tmp_path / "pie")
    c = run["run"]["link_counters"]["a_to_b"]
    print("pie+ecn", c["drops"], c["ce_marks"])
    assert c["ce_marks"] > 0 and c["drops"]["aqm"] > 0 and c["drops"]["queue"] == 0


def test_the_keys_map_onto_ns3_attributes():
    codel = queue_disc({"rate_bps": 1e7, "queue_packets": 100,
                        "aqm": {"discipline": "codel", "target_s": 0.01, "interval_s": 0.2, "ecn": True}}, 1500)
    assert codel["type"] == "ns3::CoDelQueueDisc"
    assert codel["attributes"] == {"MaxSize": "100p", "UseEcn": "true", "Target": "10000000ns",
                                   "Interval": "200000000ns", "MinBytes": "1500"}
    assert codel["device_rate_bps"] == pytest.approx(1e7 * 1502 / 1500)
    fq = queue_disc({"queue_bytes": 50_000, "aqm": {"discipline": "fq_codel", "flows": 64, "quantum_bytes": 300}}, 1500)
    assert fq["type"] == "ns3::FqCoDelQueueDisc" and fq["quantum_bytes"] == 300 and fq["device_rate_bps"] is None
    assert fq["attributes"]["Flows"] == "64" and fq["attributes"]["DropBatchSize"] == "1"
    pie = queue_disc({"aqm": {"discipline": "pie", "t_update_s": 0.03, "max_burst_s": 0.0, "alpha": 0.5}}, 1500)
    assert pie["attributes"]["Tupdate"] == "30000000ns" and pie["attributes"]["MaxBurstAllowance"] == "0ns"
    assert pie["attributes"]["A"] == "0.5" and pie["attributes"]["MaxSize"] == "1000000p"
    assert queue_disc({"aqm": {"discipline": "drop_tail"}}, 1500) is None and queue_disc({}, 1500) is None
    assert host_tcp({}).ecn == 2 and host_tcp({"ecn": 1}).ecn == 1


def test_what_does_not_map_is_named():
    codel = {"discipline": "codel"}
    assert unsupported({"aqm": codel}) == [] and unsupported({"trace_file": "t"}) == []
    assert "trace bottleneck" in unsupported({"aqm": codel, "trace_file": "t"})[0]
    assert "outages" in unsupported({"aqm": codel, "outages": [{"at_s": 1, "duration_s": 1}]})[0]
    assert "not on an access link" in unsupported({"aqm": codel}, access=True)[0]


def test_an_unmappable_discipline_is_one_line_at_plan_time(tmp_path):
    scenario = tmp_path / "s.toml"
    scenario.write_text('duration_s = 5\n[path]\nrtt_s = 0.02\nrate_bps = 10e6\n'
                        '[path.forward]\naqm = {discipline = "codel", ecn = true}\n'
                        'outages = [{at_s = 1.0, duration_s = 0.5}]\n'
                        '[[flows]]\nprofile = "voip"\n')
    p = subprocess.run([sys.executable, "-m", "tcpdelay", "run", str(scenario), "--backend", "ns3", "--dry-run",
                        "--out", str(tmp_path / "o")], capture_output=True, text=True, timeout=120)
    assert p.returncode == 2, p.stderr
    assert len(p.stderr.strip().splitlines()) == 1 and "Traceback" not in p.stderr
    assert "a_to_b.aqm codel with outages" in p.stderr
    assert not (tmp_path / "o").exists()


def test_loss_beside_a_discipline_is_said_once_per_run():
    """ns-3 draws a direction's loss after its queue disc (the emulator before its queue): the
    run says so in its approximations, only for a direction with both."""
    from tcpdelay.experiments.backends.ns3 import Ns3Backend
    from tcpdelay.experiments.plan import plan_run

    def notes(forward: dict) -> list[str]:
        sc = parse_scenario({"duration_s": 5, "path": {"rtt_s": 0.02, "rate_bps": RATE_BPS, "forward": forward},
                             "flows": [{"profile": "voip"}]})
        return [n for n in Ns3Backend().notes(plan_run(sc, 1)) if "queue disc" in n]

    lossy = notes({"aqm": {"discipline": "pie"}, "loss": {"model": "bernoulli", "p": 0.01}})
    assert len(lossy) == 1 and lossy[0].startswith("link a_to_b: bernoulli loss is drawn after ns-3's queue disc")
    assert notes({"aqm": {"discipline": "pie"}}) == []
    assert notes({"loss": {"model": "bernoulli", "p": 0.01}}) == []
