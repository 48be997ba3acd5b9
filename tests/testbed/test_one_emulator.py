"""One emulator process for the whole testbed (issue 28): the bottleneck and every host's access
link are links of one ``tcpdelay-link`` (a ``links`` file), each with its own settings, seed and
counters. The file the testbed writes is read by the real emulator (``--check``, no namespaces);
then, on a real testbed, the one process serves every link and its death is reported naming it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time

import pytest

from tcpdelay.testbed import Testbed
from tcpdelay.testbed import netns as nsutil
from tcpdelay.testbed import emulator as emu
from tcpdelay.testbed.emulator import BOTTLENECK, access_link_name, emulator_config, find_binary, link_view
from tcpdelay.testbed.spec import parse_spec
from tcpdelay.testbed.testbed import EMULATOR_PRIORITY, REALTIME_PRIORITY

SPEC = {"seed": 7, "hosts": [
    {"name": "ltx0", "side": "left", "access": {"a_to_b": {"delay_s": 0.01, "rate_bps": 10e6}}},
    {"name": "ltx1", "side": "left"},
    {"name": "rrx0", "side": "right", "access_seed": 99, "access": {
        "b_to_a": {"delay_s": 0.02, "loss": {"model": "bernoulli", "p": 0.2}}}},
], "link": {"a_to_b": {"delay_s": 0.025, "rate_bps": 100e6, "queue_packets": 150}, "b_to_a": {"delay_s": 0.025}}}
ENDS = {"ltx0": (("ns-h0", "th0"), ("ns-l", "ta0")), "rrx0": (("ns-h2", "th2"), ("ns-r", "ta2"))}


def _check(cfg: dict, tmp_path) -> dict:
    path = tmp_path / "links.json"
    path.write_text(json.dumps(cfg))
    proc = subprocess.run([find_binary(), "--config", str(path), "--check"], capture_output=True, text=True,
                          timeout=30)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_the_testbed_file_names_every_link_and_the_emulator_reads_it(tmp_path):
    spec = parse_spec({**SPEC, "queue_file": str(tmp_path / "q.csv"), "events_file": str(tmp_path / "ev.csv")})
    cfg = emu.testbed_config(spec, ("ns-l", "tl"), ("ns-r", "tr"), ENDS, str(tmp_path))
    got = _check(cfg, tmp_path)
    links = {link["name"]: link for link in got["links"]}
    assert list(links) == [BOTTLENECK, access_link_name("ltx0"), access_link_name("rrx0")]
    bottleneck = links[BOTTLENECK]
    # the bottleneck is the single-link file's link: same settings, seed, events and queue trace
    single = emulator_config(spec, ("ns-l", "tl"), ("ns-r", "tr"), str(tmp_path))
    assert bottleneck["a"] == single["a"] and bottleneck["seed"] == 7
    assert bottleneck["a_to_b"]["rate_bps"] == 100e6 and bottleneck["a_to_b"]["queue_packets"] == 150
    assert bottleneck["events_file"] == spec.events_file and bottleneck["queue_file"] == spec.queue_file
    assert got["counters_file"] == single["counters_file"] and got["ready_file"] == single["ready_file"]
    # each access link: the host's end first, its own settings and seed, no events or queue trace
    h0, h2 = links["access-ltx0"], links["access-rrx0"]
    assert h0["a"] == {"netns": "ns-h0", "tun": "th0"} and h0["b"] == {"netns": "ns-l", "tun": "ta0"}
    assert h0["a_to_b"]["delay_s"] == 0.01 and h0["a_to_b"]["rate_bps"] == 10e6 and h0["b_to_a"]["delay_s"] == 0
    assert h2["b_to_a"]["loss"] == {"model": "bernoulli", "p": 0.2}
    assert (h0["seed"], h2["seed"]) == (7 + 1 + 0, 99)
    assert h0["events_file"] is None and h0["queue_file"] is None
    # no access link: the single-link file, as before
    alone = parse_spec({"link": SPEC["link"], "seed": 7})
    assert emu.testbed_config(alone, ("ns-l", "tl"), ("ns-r", "tr"), {}, "/s") == emulator_config(
        alone, ("ns-l", "tl"), ("ns-r", "tr"), "/s")


def test_link_view_cuts_a_link_out_in_the_single_link_shape():
    process = {"elapsed_s": 2.5, "realtime": True, "timing": {"realtime": True}, "pool_slots_allocated": 9,
               "links": {"bottleneck": {"a_to_b": {"packets_in": 5}, "b_to_a": {"packets_in": 4}, "seed": 7},
                         "access-h": {"a_to_b": {"packets_in": 1}, "b_to_a": {"packets_in": 0}, "seed": 8}}}
    assert link_view(process, "access-h") == {"a_to_b": {"packets_in": 1}, "b_to_a": {"packets_in": 0}, "seed": 8,
                                              "elapsed_s": 2.5, "realtime": True, "timing": {"realtime": True},
                                              "pool_slots_allocated": 9}
    assert link_view(process)["a_to_b"] == {"packets_in": 5}
    assert link_view(process, "access-x") is None
    single = {"a_to_b": {}, "b_to_a": {}, "seed": 1, "elapsed_s": 1.0}
    assert link_view(single) is single and link_view(single, "access-h") is None


@pytest.mark.testbed
def test_one_process_serves_every_link_and_its_death_is_named():
    spec = parse_spec(SPEC)
    with Testbed(spec) as tb:
        pid = tb.emulator_pid
        cfg = json.loads(open(os.path.join(tb.state_dir, "link.json")).read())
        assert [link["name"] for link in cfg["links"]] == ["bottleneck", "access-ltx0", "access-rrx0"]
        # the only tcpdelay-link of this run: no process per access link
        state = json.loads(open(os.path.join(tb.state_dir, "state.json")).read())
        assert [p["pid"] for p in state["processes"]] == [pid]
        counters = tb.access_counters()
        assert set(counters) == {"ltx0", "rrx0"} and tb.link_counters()["seed"] == 7
        assert counters["rrx0"]["seed"] == 99 and counters["ltx0"]["seed"] == 8
        assert tb.emulator_died() is None
        if tb.link_counters()["realtime"]:   # above the programs under measurement, never among them
            assert os.sched_getscheduler(pid) == os.SCHED_FIFO
            assert os.sched_getparam(pid).sched_priority == EMULATOR_PRIORITY > REALTIME_PRIORITY
        os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while tb.emulator_died() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        how = tb.emulator_died()
        assert how == "killed by SIGKILL (it served the bottleneck and 2 access links)", how
    assert not nsutil.process_alive(pid)
    assert not [n for n in nsutil.list_netns() if tb.run_id in n]
