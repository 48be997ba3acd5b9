"""The testbed error section (tcpdelay.results.testbed_error): its verdict on hand-made sections,
the emulator's lateness read from both shapes of link counters, the bounded lateness histogram
the senders report it with, and the machine-load readings it is built from."""

from __future__ import annotations

import json
import random

import pytest

from tcpdelay.results import testbed_error as te
from tcpdelay.transport.lateness import LatenessHistogram


def _section(emulator=None, send=None, recv=None, smallest_delay_s=None) -> dict:
    return {"emulator_lateness_us": emulator or {}, "send_lateness_us": send or {}, "recv_lag_us": recv or {},
            "machine": None, "smallest_delay_s": smallest_delay_s}


def test_no_section_is_not_recorded_never_on_time():
    v = te.verdict(None, "some/run")
    assert not v.recorded and not v.late and v.component is None and v.run == "some/run"
    assert v.text() == "testbed error not recorded"
    assert te.warning_line("metrics", [v]) is None


def test_a_section_within_the_bound_is_recorded_and_not_late():
    v = te.verdict(_section({"bottleneck a_to_b": {"p99": 300.0, "max": 900.0}},
                            {"0": {"p99": 1100.0, "max": 2000.0, "count": 500}}))
    assert v.recorded and not v.late
    # the sender's 1.1 ms is nearer its 3 ms bound than the emulator's 0.3 ms is to 1 ms
    assert v.component == "sender of flow 0" and v.p99_us == 1100.0 and v.max_us == 2000.0
    assert v.bound_us == te.SEND_LATE_BOUND_US
    assert te.warning_line("run", [v]) is None


def test_a_sender_is_judged_against_its_own_bound_not_the_delays():
    sec = _section({"bottleneck a_to_b": {"p99": 30.0, "max": 90.0}}, {"0": {"p99": 1500.0, "max": 3000.0, "count": 9}},
                   smallest_delay_s=0.010)
    assert not te.verdict(sec).late            # 1.5 ms of send lateness: within the Python sender's own 2 ms
    sec["send_lateness_us"]["0"]["p99"] = 3500.0
    v = te.verdict(sec)
    assert v.late and v.component == "sender of flow 0" and v.bound_us == te.SEND_LATE_BOUND_US


def test_the_worst_component_is_named_with_its_value():
    sec = _section({"bottleneck a_to_b": {"p99": 40.0, "max": 90.0}, "access-h2 b_to_a": {"p99": 4200.0, "max": 9800.0}},
                   {"0": {"p99": 3500.0, "max": 3500.0, "count": 10}},
                   {"0": {"p99": 10.0, "max": 20.0, "count": 10}})
    v = te.verdict(sec, "r")
    assert v.late and v.component == "emulator access-h2 b_to_a" and v.p99_us == 4200.0
    assert v.text() == "emulator access-h2 b_to_a lateness p99 4.20 ms (max 9.80 ms) > bound 1.00 ms"
    line = te.warning_line("sweep", [v])
    assert line.count("\n") == 0 and line.startswith("tcpdelay sweep: warning: the testbed itself was late in the run")
    assert "emulator access-h2 b_to_a lateness p99 4.20 ms" in line


def test_a_receive_lag_is_a_component():
    v = te.verdict(_section(recv={"3": {"p99": 2500.0, "max": 2600.0, "count": 7}}))
    assert v.late and v.component == "receiver of flow 3" and "recv lag p99 2.50 ms" in v.text()


@pytest.mark.parametrize("smallest_s, bound", [(None, 1000.0), (0.0, 1000.0), (0.100, 1000.0), (0.020, 1000.0),
                                               (0.010, 500.0), (0.002, 250.0), (0.0001, 250.0)])
def test_the_bound_is_5_percent_of_the_smallest_delay_between_its_floor_and_1_ms(smallest_s, bound):
    assert te.bound_us(smallest_s) == pytest.approx(bound)


def test_a_short_path_is_judged_against_its_own_delay():
    sec = _section({"bottleneck a_to_b": {"p99": 600.0, "max": 700.0}})
    assert not te.verdict(sec).late                               # 0.6 ms on an unknown path: within 1 ms
    assert te.verdict({**sec, "smallest_delay_s": 0.010}).late    # 0.6 ms is 6 % of 10 ms
    assert not te.verdict({**sec, "smallest_delay_s": 0.050}).late


def test_missing_values_are_not_components():
    sec = _section({"bottleneck a_to_b": {"p99": None, "max": None}}, {"1": {"p99": None, "max": None, "count": 0}})
    v = te.verdict(sec)
    assert v.recorded and not v.late and v.component is None and v.text() == "no testbed error measured"


def test_worst_of_several_runs_and_the_count_in_the_line():
    a = te.verdict(_section({"bottleneck a_to_b": {"p99": 1200.0, "max": 2000.0}}), "cells/x/seed-1")
    b = te.verdict(_section({"bottleneck b_to_a": {"p99": 3000.0, "max": 5000.0}}), "cells/y/seed-1")
    c = te.verdict(_section({"bottleneck b_to_a": {"p99": 30.0, "max": 50.0}}), "cells/z/seed-1")
    d = te.verdict(None, "cells/old/seed-1")
    assert te.worst([a, b, c, d]) is b
    assert te.worst([c, d]) is c and te.worst([d]) is d and te.worst([]) is None
    line = te.warning_line("sweep", [a, b, c, d])
    assert "late in 2 of 4 runs" in line and "p99 3.00 ms" in line and "(cells/y/seed-1)" in line


def test_emulator_lateness_from_a_runs_link_counters_and_from_the_links_shape():
    lat = lambda p99, mx: {"lateness_us": {"p99": p99, "max": mx, "p50": 1.0}}  # noqa: E731
    run_json_shape = {"a_to_b": lat(10.0, 50.0), "b_to_a": lat(20.0, 60.0), "elapsed_s": 3.0,
                      "access": {"h2": {"a_to_b": lat(300.0, 400.0), "b_to_a": lat(5.0, 6.0)}}}
    got = te.emulator_lateness_us(run_json_shape)
    assert list(got) == ["bottleneck a_to_b", "bottleneck b_to_a", "access-h2 a_to_b", "access-h2 b_to_a"]
    assert got["access-h2 a_to_b"] == {"p99": 300.0, "max": 400.0}
    assert te.worst_emulator_lateness_us(run_json_shape) == (300.0, 400.0)
    assert te.worst_emulator_lateness_us(run_json_shape, bottleneck_only=True) == (20.0, 60.0)
    links_shape = {"links": {"bottleneck": {"a_to_b": lat(1.0, 2.0)}, "access-h1": {"b_to_a": lat(7.0, 8.0)}}}
    assert te.emulator_lateness_us(links_shape) == {"bottleneck a_to_b": {"p99": 1.0, "max": 2.0},
                                                    "access-h1 b_to_a": {"p99": 7.0, "max": 8.0}}
    assert te.emulator_lateness_us(None) == {} and te.worst_emulator_lateness_us({}) is None


def test_section_takes_what_each_endpoint_reported():
    counters = {"a_to_b": {"lateness_us": {"p99": 3.0, "max": 4.0}}, "b_to_a": {"lateness_us": {"p99": 5.0, "max": 6.0}}}
    media = {0: ({"send_lateness_us": {"p99": 11.0, "max": 12.0, "count": 3}}, {"recv_lag_us": {"p99": 1.0, "max": 2.0, "count": 3}}),
             1: ({"status": "completed"}, {}),        # an endpoint that measures neither
             2: (None, None)}                          # a part that never answered
    sec = te.section(counters, media, {"span_s": 1.0})
    assert sec["send_lateness_us"] == {"0": {"p99": 11.0, "max": 12.0, "count": 3}}
    assert sec["recv_lag_us"] == {"0": {"p99": 1.0, "max": 2.0, "count": 3}}
    assert sec["emulator_lateness_us"]["bottleneck b_to_a"] == {"p99": 5.0, "max": 6.0}
    assert sec["machine"] == {"span_s": 1.0} and sec["smallest_delay_s"] is None
    json.dumps(sec)      # it goes into run.json as it is


def test_smallest_delay_is_recorded_into_a_runs_section(tmp_path):
    (tmp_path / "run.json").write_text(json.dumps({"run": {}, te.SECTION: _section()}))
    te.add_smallest_delay(tmp_path, {"flows": [{"delay": {"min_s": 0.031}}, {"delay": {"min_s": 0.012}},
                                               {"delay": {"min_s": None}}]})
    assert te.run_section(tmp_path)["smallest_delay_s"] == 0.012
    assert te.run_verdict(tmp_path).bound_us == pytest.approx(600.0)
    old = tmp_path / "old"
    old.mkdir()
    (old / "run.json").write_text(json.dumps({"run": {}}))
    te.add_smallest_delay(old, {"flows": [{"delay": {"min_s": 0.01}}]})      # a run without a section: untouched
    assert json.loads((old / "run.json").read_text()) == {"run": {}}
    assert not te.run_verdict(old).recorded and not te.run_verdict(tmp_path / "none").recorded


def test_lateness_histogram_quantile_within_its_resolution():
    rng = random.Random(7)
    values_us = [rng.expovariate(1 / 300.0) for _ in range(20_000)] + [50_000.0]
    h = LatenessHistogram()
    for v in values_us:
        h.add_ns(int(v * 1000))
    s = h.summary()
    exact = sorted(values_us)[int(0.99 * len(values_us)) - 1]
    assert s["count"] == len(values_us)
    assert s["max"] == pytest.approx(50_000.0, abs=0.001)
    assert exact * 0.96 <= s["p99"] <= exact * 1.04 + 1
    assert len(h.counts) < 400         # bounded, whatever the number of values


def test_lateness_histogram_small_and_empty():
    h = LatenessHistogram()
    assert h.summary() == {"p99": None, "max": None, "count": 0}
    for ns in (-5000, 0, 1500, 2500):        # early counts as 0
        h.add_ns(ns)
    assert h.summary() == {"p99": 2.5, "max": 2.5, "count": 4}


def test_machine_load_between_two_samples_has_its_parts():
    from tcpdelay.testbed import machine_load

    import os
    import time

    a = machine_load.sample({"me": os.getpid(), "gone": None})
    end = time.monotonic() + 0.05
    while time.monotonic() < end:
        pass
    b = machine_load.sample({"me": os.getpid(), "gone": None})
    got = machine_load.between(a, b)
    assert got["span_s"] >= 0.05
    if got["cpu_pressure"] is not None:          # PSI is there on this project's kernels
        p = got["cpu_pressure"]
        assert p["some_stall_us"] >= p["full_stall_us"] >= 0 and 0 <= p["some_fraction"]
    t = got["throttling"]
    assert set(t) == {"sched_rt_runtime_us", "sched_rt_period_us", "cgroup", "rt_throttled_cpus_seen", "processes"}
    assert "gone" not in t["processes"]
    me = t["processes"]["me"]
    assert me["runqueue_wait_us"] >= 0 and 0 <= me["runqueue_wait_fraction"]
