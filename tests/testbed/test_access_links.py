"""Per-host access links (papers/004 Fig 1): a host with ``access`` reaches its side's router
through an emulated link of its own, served with the bottleneck by the testbed's one emulator
process — its delay adds to the path, its loss is its own and counted per host — and the
process and devices go with the testbed."""

from __future__ import annotations

import os
import sys

import pytest

from tcpdelay.testbed import Testbed
from tcpdelay.testbed import netns as nsutil
from tcpdelay.testbed.spec import parse_spec

pytestmark = pytest.mark.testbed

HANDSHAKES = """
import socket, sys, time
best = None
for _ in range(15):
    s = socket.socket(); s.settimeout(5); t = time.monotonic()
    try:
        s.connect((sys.argv[1], 8000)); took = time.monotonic() - t
        best = took if best is None else min(best, took)
    except OSError:
        pass
    s.close()
print(best)
"""


def test_each_host_reaches_the_bottleneck_through_its_own_emulated_link():
    spec = parse_spec({"hosts": [
        {"name": "ltx0", "side": "left", "access": {"a_to_b": {"delay_s": 0.01}, "b_to_a": {"delay_s": 0.01}}},
        {"name": "ltx1", "side": "left"},
        {"name": "rrx0", "side": "right", "access": {
            "a_to_b": {"delay_s": 0.02}, "b_to_a": {"delay_s": 0.02, "loss": {"model": "bernoulli", "p": 0.2}}}},
    ], "link": {"a_to_b": {"delay_s": 0.025}, "b_to_a": {"delay_s": 0.025}}})
    with Testbed(spec) as tb:
        assert tb.spec.topology == "dumbbell" and set(tb.access_links) == {"ltx0", "rrx0"}
        described = tb.describe()["access_links"]
        assert {d["emulator_pid"] for d in described.values()} == {tb.emulator_pid}   # one process
        pid = tb.emulator_pid
        server = tb.hosts["rrx0"].popen([sys.executable, "-c", (
            "import socket\ns = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
            "s.bind(('0.0.0.0', 8000)); s.listen(64)\nwhile True: s.accept()[0].close()")])
        try:
            rtt = {}
            for src in ("ltx0", "ltx1"):
                for _ in range(50):                  # until the server listens
                    out = tb.hosts[src].run([sys.executable, "-c", HANDSHAKES, tb.hosts["rrx0"].address])
                    if out.stdout.strip() != "None":
                        break
                rtt[src] = float(out.stdout)
        finally:
            server.kill()
        counters = tb.access_counters()
        bottleneck = tb.link_counters()
    # the handshake's RTT: the bottleneck's 50 ms, rrx0's 40 ms and, for ltx0 alone, its own 20 ms
    assert rtt["ltx1"] >= 0.090 and rtt["ltx0"] >= 0.110
    assert rtt["ltx0"] - rtt["ltx1"] > 0.015
    down = counters["rrx0"]["b_to_a"]                 # router -> rrx0: where the loss is
    assert down["packets_in"] > 20 and 0 < down["drops"]["loss"] < down["packets_in"]
    assert counters["ltx0"]["a_to_b"]["drops"]["total"] == 0 and counters["rrx0"]["a_to_b"]["drops"]["total"] == 0
    # each link counted its own packets: ltx1's handshakes crossed the bottleneck, not ltx0's link
    assert bottleneck["a_to_b"]["packets_in"] > counters["ltx0"]["a_to_b"]["packets_in"] > 0
    assert set(counters["ltx0"]) == set(bottleneck)     # the shape of a lone link's counters
    assert counters["ltx0"]["seed"] != counters["rrx0"]["seed"] != bottleneck["seed"]
    assert set(tb.access_counters()) == {"ltx0", "rrx0"}   # the last ones, after close
    assert not nsutil.process_alive(pid)                # the emulator went with the testbed
    assert not [n for n in nsutil.list_netns() if tb.run_id in n]
