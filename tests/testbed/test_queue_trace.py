"""The bottleneck's queue over time (papers/004 Tables 1-2, Figs 24-26): a burst of N packets
into a rate-limited link queues N - 1 of them, which leave one per serialization time; the
emulator's time-average and its sampled trace both match that schedule, and a scenario run keeps
the trace as ``link_queue`` records, as ns-3 does."""

from __future__ import annotations

import json
import socket

import numpy as np
import pytest

from tcpdelay.testbed import LinkSpec, Testbed, TestbedSpec
from tcpdelay.testbed.emulator import read_queue_trace

pytestmark = pytest.mark.testbed

N, PAYLOAD, RATE_BPS = 40, 1000, 2e5       # 41 ms a packet: a burst that takes milliseconds to arrive is one burst
WIRE = PAYLOAD + 28                              # IP + UDP headers, as the TUN sees the packet
SERIALIZATION_S = WIRE * 8 / RATE_BPS            # 41.12 ms


def burst(address: str) -> None:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    for _ in range(N):
        s.sendto(b"x" * PAYLOAD, (address, 9))
    s.close()


def test_a_burst_queues_and_drains_as_hand_computed(tmp_path):
    trace = tmp_path / "queue.csv"
    spec = TestbedSpec(link=LinkSpec.symmetric(rate_bps=RATE_BPS), queue_file=str(trace), queue_sample_s=0.005)
    with Testbed(spec) as tb:
        tb.hosts["left0"].call(burst, tb.hosts["right0"].address)
        import time

        time.sleep(N * SERIALIZATION_S + 0.2)
        c = tb.link_counters()["a_to_b"]
        elapsed_s = tb.link_counters()["elapsed_s"]
    assert c["packets_out"] == N and c["peak_queue_packets"] == N - 1
    # N - 1 queued, one leaving every serialization time: the area under the queue length is
    # (N - 1 + N - 2 + ... + 1) serialization times (less the microseconds the burst took to arrive)
    area_s = SERIALIZATION_S * (N - 1) * N / 2
    assert c["mean_queue_packets"] * elapsed_s == pytest.approx(area_s, rel=0.03)
    cols = read_queue_trace(str(trace))
    fwd = np.array([d == "a_to_b" for d in cols["direction"]])
    t, packets = cols["time_s"][fwd], cols["packets"][fwd]
    assert np.all(np.diff(t) == pytest.approx(0.005, abs=1e-6)) and t[0] == 0.0
    assert packets.max() == N - 1
    assert packets.sum() * 0.005 == pytest.approx(area_s, rel=0.03)        # the trace's area: the same
    # once it starts draining, the length falls by one per serialization time
    start = t[np.argmax(packets)]
    for k in (5, 10, 20, 30):
        at = start + (k + 0.5) * SERIALIZATION_S
        assert packets[np.searchsorted(t, at)] == pytest.approx(N - 1 - k, abs=1)
    assert np.all(cols["packets"][~fwd] == 0)


def test_a_scenario_run_keeps_the_queue_trace_as_link_queue_records(tmp_path):
    from tcpdelay.experiments.run import run_scenario
    from tcpdelay.experiments.scenario import parse_scenario
    from tcpdelay.records import read_records

    sc = parse_scenario({"name": "q", "duration_s": 3, "tcp_state_period_s": 0.05,
                         "path": {"rtt_s": 0.05, "rate_bps": 2e6, "queue_packets": 30},
                         "flows": [{"name": "v", "profile": "voip", "transport": "udp"}],
                         "cross": [{"kind": "bulk", "count": 1}]})
    run_scenario(sc, 1, tmp_path)
    rows = read_records(tmp_path, "link_queue").to_pydict()
    assert not (tmp_path / "link_queue.csv").exists()
    fwd = [p for d, p in zip(rows["direction"], rows["packets"]) if d == "a_to_b"]
    times = [x for d, x in zip(rows["direction"], rows["time_s"]) if d == "a_to_b"]
    assert np.allclose(np.diff(times), 0.05) and max(fwd) > 5 and max(fwd) <= 30   # bulk fills the queue
    counters = json.loads((tmp_path / "run.json").read_text())["run"]["link_counters"]["a_to_b"]
    assert counters["peak_queue_packets"] <= 30 and counters["mean_queue_packets"] > 1
    queue = json.loads((tmp_path / "metrics.json").read_text())["queue"]["a_to_b"]   # over the run's window
    assert 1 < queue["mean_packets"] <= queue["max_packets"] <= 30 and queue["samples"] >= 55
