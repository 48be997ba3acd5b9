"""Per-host access links (papers/004 Fig 1): a host with ``access`` reaches its side's router
through an emulator process of its own — its delay adds to the path, its loss is its own and
counted per host — and the processes and devices go with the testbed."""

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
        assert tb.spec.topology == "dumbbell" and set(tb.access) == {"ltx0", "rrx0"}
        pids = [link.pid for link in tb.access.values()]
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
    # the handshake's RTT: the bottleneck's 50 ms, rrx0's 40 ms and, for ltx0 alone, its own 20 ms
    assert rtt["ltx1"] >= 0.090 and rtt["ltx0"] >= 0.110
    assert rtt["ltx0"] - rtt["ltx1"] > 0.015
    down = counters["rrx0"]["b_to_a"]                 # router -> rrx0: where the loss is
    assert down["packets_in"] > 20 and 0 < down["drops"]["loss"] < down["packets_in"]
    assert counters["ltx0"]["a_to_b"]["drops"]["total"] == 0 and counters["rrx0"]["a_to_b"]["drops"]["total"] == 0
    assert set(tb.final_access_counters) == {"ltx0", "rrx0"}
    for pid in pids:                                   # the access emulators went with the testbed
        assert not nsutil.process_alive(pid)
    assert not [n for n in nsutil.list_netns() if tb.run_id in n]
