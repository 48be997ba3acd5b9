"""A run's plan without root: hosts, ports, seeds and placement from a scenario; cross-traffic
kinds and backends looked up by name (an unknown name refused with one line); and the record a
backend's outcome is written into, through a backend that needs no testbed."""

from __future__ import annotations

import json
import typing

import pyarrow.parquet as pq
import pytest

from tcpdelay.errors import ParameterError
from tcpdelay.experiments import record
from tcpdelay.experiments.backends import (
    BACKENDS, Backend, BackendJob, BackendOutcome, RunFailed, get_backend, part_name, register_backend,
)
from tcpdelay.experiments.plan import (
    CROSS_KINDS, CROSS_TCP_PORT, CROSS_UDP_PORT, LEAD_S, MEDIA_PORT, CrossPlan, cross_transport, derive_seed,
    plan_run, timed_link,
)
from tcpdelay.experiments.scenario import Cross, parse_scenario

SCENARIO = {
    "name": "plan", "duration_s": 20,
    "path": {"rtt_s": 0.04, "rate_bps": 5e6},
    "flows": [
        {"name": "voip", "profile": "voip", "count": 2, "tcp": {"preset": "newreno-2008"}},
        {"profile": "video", "direction": "reverse", "transport": "udp"},
        {"profile": "voip", "tcp": {"congestion_control": "cubic"}, "stop_s": 6},
    ],
    "cross": [
        {"kind": "bulk", "count": 2, "tcp": {"congestion_control": "cubic"}},
        {"kind": "udp", "rate_bps": 1e5, "count": 2},
        {"kind": "page_load", "direction": "reverse"},
        {"kind": "web_onoff", "start_s": 1, "start_spread_s": 2},
        {"kind": "udp", "rate_bps": 2e5, "direction": "reverse"},
    ],
}


def _plan(seed: int = 4):
    return plan_run(parse_scenario(SCENARIO), seed)


def test_hosts_group_senders_by_side_and_host_settings():
    plan = _plan()
    hosts = {h["name"]: (h["side"], h["tcp"]) for h in plan.hosts}
    assert list(hosts) == ["ltx0", "rrx", "rtx0", "lrx", "ltx1", "ltx2"]
    assert hosts["ltx0"][0] == "left" and hosts["ltx0"][1]["congestion_control"] == "reno"   # newreno-2008
    assert hosts["ltx1"] == ("left", {"congestion_control": "cubic"})   # the third flow and the bulk flows
    assert hosts["rtx0"] == ("right", {})           # UDP media and the reverse cross traffic: the kernel's
    assert hosts["rrx"] == ("right", {}) and hosts["lrx"] == ("left", {}) and hosts["ltx2"] == ("left", {})
    assert [(m.sender, m.receiver) for m in plan.media] == [("ltx0", "rrx"), ("ltx0", "rrx"), ("rtx0", "lrx"),
                                                           ("ltx1", "rrx")]
    by_name = {c.name: c for c in plan.cross}
    assert (by_name["cross0-bulk#0"].server, by_name["cross0-bulk#0"].client) == ("ltx1", "rrx")
    assert (by_name["cross2-page_load"].server, by_name["cross2-page_load"].client) == ("rtx0", "lrx")
    assert by_name["cross1-udp#1"].server == "ltx2"     # UDP cross traffic: no TCP settings, its own group


def test_flow_ids_ports_times_and_seeds():
    plan = _plan()
    assert [m.name for m in plan.media] == ["voip#0", "voip#1", "flow1", "flow2"]
    assert [m.flow_id for m in plan.media] == [0, 1, 2, 3]
    assert [m.port for m in plan.media] == [MEDIA_PORT + i for i in range(4)]
    assert [(m.start_s, m.stop_s) for m in plan.media][-1] == (0.0, 6.0)
    assert [c.flow_id for c in plan.cross] == list(range(4, 11))
    assert [(c.kind, c.port) for c in plan.cross] == [
        ("bulk", CROSS_TCP_PORT), ("bulk", CROSS_TCP_PORT), ("udp", CROSS_UDP_PORT), ("udp", CROSS_UDP_PORT + 1),
        ("page_load", CROSS_TCP_PORT), ("web_onoff", CROSS_TCP_PORT), ("udp", CROSS_UDP_PORT + 2)]
    assert [m.seed for m in plan.media] == [derive_seed(4, "media", i) for i in range(4)]
    assert [c.seed for c in plan.cross][:2] == [derive_seed(4, "cross", 0, 0), derive_seed(4, "cross", 0, 1)]
    web = plan.cross[5]
    assert 1.0 <= web.start_s <= 3.0 and web.stop_s == 20
    assert [c.start_s for c in _plan().cross] == [c.start_s for c in plan.cross]        # fixed by the seed
    assert [c.start_s for c in _plan(5).cross] != [c.start_s for c in plan.cross]
    assert len({m.seed for m in plan.media} | {c.seed for c in plan.cross}) == 11        # one per process


def test_link_and_timed_link():
    sc = parse_scenario(SCENARIO)
    plan = plan_run(sc, 1)
    assert plan.link["a_to_b"]["rate_bps"] == 5e6 and plan.link["a_to_b"]["delay_s"] == pytest.approx(0.02)
    assert not timed_link(sc)
    outage = parse_scenario({**SCENARIO, "path": {"outages": [{"at_s": 3, "duration_s": 1}]}})
    assert timed_link(outage)
    assert plan_run(outage, 1).link["a_to_b"]["outages"] == [{"at_s": 3 + LEAD_S, "duration_s": 1}]
    # the plan carries what a backend needs of the scenario: it never reads the scenario
    assert (plan.timed_link, plan_run(outage, 1).timed_link) == (False, True)
    assert (plan.name, plan.seed, plan.duration_s, plan.lead_s) == (sc.name, 1, sc.duration_s, LEAD_S)


def test_every_scenario_cross_kind_is_registered_with_its_transport_and_a_testbed_starter():
    from tcpdelay.experiments.backends.testbed import CROSS_STARTERS

    scenario_kinds = {typing.get_args(m.model_fields["kind"].annotation)[0]
                      for m in typing.get_args(typing.get_args(Cross)[0])}
    assert scenario_kinds == set(CROSS_KINDS) == set(CROSS_STARTERS)
    assert {k: cross_transport(k) for k in CROSS_KINDS} == {"bulk": "tcp", "web_onoff": "tcp",
                                                            "page_load": "tcp", "transfers": "tcp", "udp": "udp"}
    assert {c.kind: c.transport for c in _plan().cross}["udp"] == "udp"


def test_unknown_kind_and_backend_names_are_refused_with_one_line(tmp_path):
    from tcpdelay.experiments.backends.testbed import cross_starter
    from tcpdelay.experiments.run import run_scenario

    with pytest.raises(ParameterError) as err:
        cross_transport("ftp")
    assert str(err.value) == "cross kind: 'ftp' is not one of bulk, page_load, transfers, udp, web_onoff"
    odd = CrossPlan(flow_id=0, name="x", kind="ftp", cross=None, server="ltx0", client="rrx", port=1,
                    start_s=0, stop_s=1, seed=0)
    with pytest.raises(ParameterError, match="cross kind: 'ftp' is not one of"):
        odd.transport
    with pytest.raises(ParameterError) as err:
        cross_starter("ftp")
    assert "\n" not in str(err.value) and "'ftp' has no starter on the testbed" in str(err.value)
    with pytest.raises(ParameterError) as err:
        get_backend("ns-4")
    assert str(err.value) == f"backend: 'ns-4' is not one of {', '.join(sorted(BACKENDS))}"
    with pytest.raises(ParameterError, match="backend: 'ns-4' is not one of"):
        run_scenario(parse_scenario(SCENARIO), 1, tmp_path / "run", backend="ns-4")
    assert not (tmp_path / "run").exists()      # refused before writing anything


def test_the_testbed_backend_is_found_by_name():
    backend = get_backend("testbed")
    assert isinstance(backend, Backend) and backend.name == "testbed"


def test_parts_are_named_in_words():
    plan = _plan()
    assert part_name("tx:0", plan) == "media sender of flow 0 'voip#0' (host ltx0)"
    assert part_name("rx:2", plan) == "media receiver of flow 2 'flow1' (host lrx)"
    assert part_name("cross:4", plan) == "cross-traffic client of flow 4 'cross0-bulk#0' (host rrx)"
    assert part_name("cross:6", plan) == "cross-traffic UDP sender of flow 6 'cross1-udp#0' (host ltx2)"
    assert part_name("sink:6", plan) == "cross-traffic UDP sink of flow 6 'cross1-udp#0' (host rrx)"
    assert part_name("server:ltx1", plan) == "cross-traffic server on host ltx1"


class _CannedBackend(Backend):
    """A backend that runs nothing: every part answers what it is told (the record's input)."""

    name = "canned"

    def __init__(self, lost: list[str] | None = None):
        self.lost = lost or []
        self.jobs: list[BackendJob] = []

    def check(self) -> None:
        pass

    def run(self, job: BackendJob) -> BackendOutcome:
        self.jobs.append(job)
        job.on_environment({"backend": self.name, "hosts_requested": job.plan.hosts})
        results: dict = {}
        for m in job.plan.media:
            results[f"tx:{m.flow_id}"] = {"status": "completed", "packets": 100, "elapsed_s": 2.0}
            results[f"rx:{m.flow_id}"] = [{"status": "completed", "received_packets": 99, "received_bytes": 5000}]
        for c in job.plan.cross:
            results[f"cross:{c.flow_id}"] = {"bytes": 1000, "packets": 10}
            if c.transport == "udp":
                results[f"sink:{c.flow_id}"] = {"bytes": 800, "packets": 8}
        counters = {"a_to_b": {"drops": {"total": 3}}, "b_to_a": {"drops": {"total": 0}}}
        return BackendOutcome(results=results, counters=counters, t0_monotonic_s=100.0,
                              link_start_monotonic_s=98.0, started_unix_s=1.5e9, lost=self.lost)


@pytest.fixture
def canned():
    backends = []

    def make(lost: list[str] | None = None) -> _CannedBackend:
        b = _CannedBackend(lost)
        backends.append(b)
        register_backend("canned", lambda: b)
        return b

    yield make
    BACKENDS.pop("canned", None)


def test_a_backend_by_name_gets_the_plan_and_its_outcome_is_recorded(tmp_path, canned):
    from tcpdelay.experiments.run import run_scenario

    backend = canned()
    sc = parse_scenario(SCENARIO)
    totals = run_scenario(sc, 4, tmp_path, backend="canned")
    (job,) = backend.jobs
    assert job.plan.seed == 4 and job.run_dir == tmp_path and [h["name"] for h in job.plan.hosts] == \
        [h["name"] for h in _plan().hosts]
    assert (tmp_path / record.SCENARIO_FILE).exists()
    assert json.loads((tmp_path / record.ENVIRONMENT_FILE).read_text())["backend"] == "canned"
    run = json.loads((tmp_path / "run.json").read_text())
    assert run["run"]["t0_monotonic_s"] == 100.0 and run["run"]["emulator_start_monotonic_s"] == 98.0
    assert run["cross_traffic_start_s"] == pytest.approx(100.0 + min(c.start_s for c in _plan().cross))
    assert run["run"]["totals"]["link_drops"] == {"a_to_b": {"total": 3}, "b_to_a": {"total": 0}}
    assert "failed" not in run["run"]
    flows = pq.read_table(tmp_path / record.FLOWS_FILE)
    assert flows.schema == record.FLOWS_SCHEMA and flows.num_rows == 11
    rows = flows.to_pylist()
    assert rows[0] == {"flow_id": 0, "name": "voip#0", "kind": "media", "direction": "forward", "transport": "tcp",
                       "start_s": 0.0, "packets_sent": 100, "packets_received": 99, "bytes_received": 5000,
                       "goodput_bps": 20000.0, "status": "completed"}
    assert [(r["kind"], r["transport"], r["bytes_received"]) for r in rows[4:7]] == [
        ("bulk", "tcp", 1000), ("bulk", "tcp", 1000), ("udp", "udp", 800)]
    assert totals["packets_sent"] == 400 and totals["packets_received"] == 396
    assert "metrics_error" in totals          # a canned backend writes no packet records to measure


def test_a_lost_part_fails_the_run_after_the_record_is_written(tmp_path, canned):
    from tcpdelay.experiments.run import run_scenario

    canned(lost=["media sender of flow 0 'voip#0' (host ltx0) was killed by SIGKILL"])
    with pytest.raises(RunFailed) as err:
        run_scenario(parse_scenario(SCENARIO), 4, tmp_path, backend="canned")
    assert str(err.value) == "the run lost a part: media sender of flow 0 'voip#0' (host ltx0) was killed by SIGKILL"
    run = json.loads((tmp_path / "run.json").read_text())
    assert run["run"]["failed"] == err.value.reasons
    assert (tmp_path / record.FLOWS_FILE).exists() and not (tmp_path / record.METRICS_FILE).exists()


def test_run_keeps_the_names_importers_use():
    from tcpdelay.experiments import plan as plan_mod
    from tcpdelay.experiments import run

    for name in ("CROSS_TCP_PORT", "LEAD_S", "MEDIA_PORT", "derive_seed", "host_tcp_settings", "media_source",
                 "plan_run"):
        assert getattr(run, name) is getattr(plan_mod, name)
    assert run.RunFailed is RunFailed and run.part_name is part_name


def test_access_links_give_every_flow_hosts_and_links_of_their_own():
    """papers/004 Fig 1: each source and sink reaches the bottleneck through its own link; the
    [access] keys apply to every host, [access.left]/[access.right] override per side, both ways."""
    sc = parse_scenario({
        "name": "a", "duration_s": 10, "path": {"rtt_s": 0.05, "rate_bps": 1e7},
        "access": {"delay_s": 0.01, "rate_bps": 1e7, "right": {"rate_bps": 1e6,
                                                                "loss": {"model": "bernoulli", "p": 0.01}}},
        "flows": [{"profile": "voip", "count": 3, "transport": "udp"}],
        "cross": [{"kind": "bulk", "count": 1}]})
    plan = plan_run(sc, 7)
    senders = {m.sender for m in plan.media} | {c.server for c in plan.cross}
    sinks = {m.receiver for m in plan.media} | {c.client for c in plan.cross}
    assert len(senders) == 4 and len(sinks) == 4 and len(plan.hosts) == 8
    for h in plan.hosts:
        up, down = h["access"]["a_to_b"], h["access"]["b_to_a"]
        assert up == down and up["delay_s"] == 0.01
        if h["side"] == "left":
            assert up["rate_bps"] == 1e7 and up["loss"] == {"model": "none"}
        else:
            assert up["rate_bps"] == 1e6 and up["loss"] == {"model": "bernoulli", "p": 0.01}
    assert len({h["access_seed"] for h in plan.hosts}) == 8
    assert plan_run(sc, 7).hosts == plan.hosts and plan_run(sc, 8).hosts != plan.hosts
    spec = plan.testbed_spec(7)                     # the testbed reads them back
    assert spec.topology == "dumbbell" and all(h.access is not None for h in spec.hosts)


def test_access_outages_make_a_timed_link_and_without_access_nothing_changes():
    base = {"name": "a", "duration_s": 10, "path": {"rtt_s": 0.05}, "flows": [{"profile": "voip", "count": 2}]}
    plain = plan_run(parse_scenario(base), 1)
    assert len(plain.hosts) == 2 and all("access" not in h for h in plain.hosts) and not plain.timed_link
    handoffs = parse_scenario({**base, "access": {"right": {"outages": [{"at_s": 2.0, "duration_s": 1.0}]}}})
    plan = plan_run(handoffs, 1)
    assert plan.timed_link
    sink = next(h for h in plan.hosts if h["side"] == "right")
    assert sink["access"]["b_to_a"]["outages"] == [{"at_s": 2.0 + plan.lead_s, "duration_s": 1.0}]


def test_the_testbed_starts_many_flows_later_after_a_timed_links_start_and_shifts_its_outages_alike():
    # 80 flows took 11.2 s to start on the testbed, past the fixed 2-s lead: the run failed.
    from tcpdelay.experiments.backends.testbed import TestbedBackend

    def scenario(n):
        return parse_scenario({"name": "a", "duration_s": 10, "path": {"rtt_s": 0.05},
                               "access": {"right": {"outages": [{"at_s": 2.0, "duration_s": 1.0}]}},
                               "flows": [{"profile": "voip", "transport": "udp", "count": n}]})

    tb = TestbedBackend()
    assert tb.programs_lead_s(plan_run(scenario(2), 1)) == LEAD_S             # few programs: as before
    few, many = plan_run(scenario(10), 1), plan_run(scenario(80), 1)
    assert tb.programs_lead_s(few) == LEAD_S
    lead = tb.programs_lead_s(many)
    assert lead == pytest.approx(80 * 2 * TestbedBackend.LEAD_PER_PROGRAM_S) and lead > 11.2
    assert lead <= tb.lead_s(many) <= 5 * lead                                # longer on a busy machine
    later = plan_run(scenario(80), 1, lead_s=lead)
    sink = next(h for h in later.hosts if h["side"] == "right")
    assert later.lead_s == lead and sink["access"]["b_to_a"]["outages"] == [{"at_s": 2.0 + lead, "duration_s": 1.0}]


def test_a_busy_machine_stretches_the_start_margin_by_its_load_per_cpu(monkeypatch):
    """A run's programs must all be up before its start instant; on a machine with more runnable
    work than CPUs the margin grows with the load per CPU, from 1 (idle) to at most 5."""
    import os

    from tcpdelay.experiments.backends import testbed

    cpus = os.cpu_count()
    monkeypatch.setattr(testbed, "cpu_pressure_pct", lambda: 90.0)   # tasks waiting for a CPU
    for load, factor in ((0.1, 1.0), (cpus * 1.0, 1.0), (cpus * 3.5, 3.5), (cpus * 40.0, 5.0)):
        monkeypatch.setattr(testbed.os, "getloadavg", lambda load=load: (load, 0.0, 0.0))
        assert testbed.busy_factor() == pytest.approx(factor)
    monkeypatch.setattr(testbed.os, "getloadavg", lambda load=cpus * 3.5: (load, 0.0, 0.0))
    # the load average lags by a minute: with no task waiting for a CPU in the last 10 s the
    # machine is not busy now, whatever it was; in between, in proportion
    for pressure, factor in ((0.0, 1.0), (testbed.BUSY_PRESSURE_PCT / 2, 2.25), (None, 3.5)):
        monkeypatch.setattr(testbed, "cpu_pressure_pct", lambda p=pressure: p)
        assert testbed.busy_factor() == pytest.approx(factor)
    plan = plan_run(parse_scenario({"name": "a", "duration_s": 10, "path": {"rtt_s": 0.05},
                                    "flows": [{"profile": "voip", "transport": "udp"}]}), 1)
    assert testbed.TestbedBackend().lead_s(plan) == pytest.approx(3.5 * LEAD_S)


def test_the_cpu_pressure_is_read_from_the_kernel(tmp_path, monkeypatch):
    from tcpdelay.experiments.backends import testbed

    psi = tmp_path / "cpu"
    psi.write_text("some avg10=12.34 avg60=5.00 avg300=1.00 total=123\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n")
    monkeypatch.setattr(testbed, "CPU_PRESSURE_FILE", str(psi))
    assert testbed.cpu_pressure_pct() == 12.34
    psi.write_text("nothing here\n")
    assert testbed.cpu_pressure_pct() is None
    monkeypatch.setattr(testbed, "CPU_PRESSURE_FILE", str(tmp_path / "absent"))
    assert testbed.cpu_pressure_pct() is None
