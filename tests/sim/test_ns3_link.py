"""The emulated link inside ns-3 (src/tcpdelay/sim/cpp/tcpdelay_sim.h, EmulatedChannel) behaves
as the Rust emulator's model (emulator/src/link.rs): delay, rate with the queue in packets or
bytes, outages that drop arrivals and hold the queue, Bernoulli and Gilbert-Elliott loss, a
Mahimahi trace. One UDP flow of hand-made packets through it; times are simulated seconds."""

from __future__ import annotations

import numpy as np
import pyarrow.compute as pc
import pytest

from tcpdelay.records import read_records

pytestmark = pytest.mark.ns3

IP_UDP = 28          # IP + UDP headers on top of the payload: what the link sees
ACCESS = 2 * 1e10    # two 10 Gb/s access links, each adding a 2-byte PPP header


def _cols(out, kind):
    return {k: np.asarray(v) for k, v in read_records(out, kind).to_pydict().items()}


def _delays(out):
    """(seqs sent, {seq: receive time} of those received, their delays in seq order)."""
    sent, got = _cols(out, "sent"), _cols(out, "received")
    order = np.argsort(got["seq"])
    recv = dict(zip(got["seq"][order].tolist(), got["recv_time_s"][order].tolist()))
    return sent["seq"], recv, (got["recv_time_s"] - got["send_time_s"])[order]


def test_loss_free_delivers_every_packet_at_the_one_way_delay_plus_serialization(simulate, udp_job, tmp_path):
    size = 1000
    at = np.arange(100) * 0.02           # 50 packets/s: never queued at 8 Mb/s
    link = {"a_to_b": {"delay_s": 0.05, "rate_bps": 8e6, "queue_packets": 10}, "b_to_a": {"delay_s": 0.05}}
    res, out = simulate(udp_job(tmp_path, "plain", link, at, [size] * 100))
    sent, got, delay = _delays(out)
    assert len(sent) == len(got) == 100
    expected = 0.05 + (size + IP_UDP) * 8 / 8e6
    assert np.all(np.abs(delay - expected) < (size + 30) * 8 / 1e10 * 3 + 1e-9)
    a = res["counters"]["a_to_b"]
    assert a["packets_in"] == a["packets_out"] == 100 and a["drops"]["total"] == 0 and a["peak_queue_packets"] == 0
    assert res["results"]["rx:0"][0]["received_packets"] == 100


def test_rate_queue_in_packets_drops_what_does_not_fit(simulate, udp_job, tmp_path):
    # 5 packets of 1500 bytes (IP) at once into 12 Mb/s with room for 2 waiting: the first is
    # sent at once, two wait, two are dropped (emulator: link.rs rate_plus_delay_and_queue_overflow)
    link = {"a_to_b": {"delay_s": 0.01, "rate_bps": 12e6, "queue_packets": 2}, "b_to_a": {}}
    res, out = simulate(udp_job(tmp_path, "burst", link, [0.0] * 5, [1500 - IP_UDP] * 5))
    sent, got, delay = _delays(out)
    assert list(got) == [0, 1, 2]
    assert np.allclose(delay, [0.011, 0.012, 0.013], atol=5e-6)
    a = res["counters"]["a_to_b"]
    assert a["drops"]["queue"] == 2 and a["peak_queue_packets"] == 2


def test_queue_in_bytes_admits_small_packets_when_big_ones_do_not_fit(simulate, udp_job, tmp_path):
    link = {"a_to_b": {"rate_bps": 12e6, "queue_bytes": 2000}, "b_to_a": {}}
    sizes = [1500 - IP_UDP] * 3 + [500 - IP_UDP]
    res, out = simulate(udp_job(tmp_path, "bytes", link, [0.0] * 4, sizes))
    assert list(read_records(out, "received")["seq"].to_pylist()) == [0, 1, 3]
    assert res["counters"]["a_to_b"]["drops"]["queue"] == 1


def test_an_outage_drops_arrivals_and_holds_the_queue(simulate, udp_job, tmp_path):
    # link clock = simulated time; flows start at t0 = 1 s. Outage 1.005-1.008 s (link.rs
    # outage_drops_arrivals_and_holds_the_queue, shifted by t0)
    link = {"a_to_b": {"rate_bps": 12e6, "outages": [{"at_s": 1.005, "duration_s": 0.003}]}, "b_to_a": {}}
    at = [0.0] * 6 + [0.006, 0.008]
    res, out = simulate(udp_job(tmp_path, "outage", link, at, [1500 - IP_UDP] * 8))
    sent, recv, delay = _delays(out)
    assert 6 not in recv                                       # arrived during the outage
    assert recv[5] == pytest.approx(1.009, abs=5e-6)           # waited for the link: sent 8-9 ms
    assert recv[7] == pytest.approx(1.010, abs=5e-6)
    assert res["counters"]["a_to_b"]["drops"]["outage"] == 1


@pytest.mark.parametrize("loss, ratio", [
    ({"model": "bernoulli", "p": 0.05}, 0.05),
    ({"model": "gilbert_elliott", "p": 0.01, "r": 0.25}, 0.01 / 0.26),
])
def test_random_loss_has_its_stationary_ratio_and_depends_on_the_seed(simulate, udp_job, tmp_path, loss, ratio):
    n = 20_000
    link = {"a_to_b": {"loss": loss}, "b_to_a": {}}
    at = np.arange(n) * 0.0005
    lost = []
    for seed in (1, 1, 2):
        res, out = simulate(udp_job(tmp_path, f"{loss['model']}-{seed}-{len(lost)}", link, at, [100] * n, seed=seed))
        got = set(read_records(out, "received")["seq"].to_pylist())
        lost.append(sorted(set(range(n)) - got))
        assert res["counters"]["a_to_b"]["drops"]["loss"] == len(lost[-1])
    assert lost[0] == lost[1] and lost[0] != lost[2]          # the seed fixes the pattern
    assert len(lost[0]) / n == pytest.approx(ratio, rel=0.25)
    if loss["model"] == "gilbert_elliott":                     # in bursts of 1/r = 4 on average
        runs = np.diff(np.flatnonzero(np.diff(lost[0]) != 1))
        assert np.mean(runs) > 2


def test_a_mahimahi_trace_delivers_at_its_opportunities(simulate, udp_job, tmp_path):
    trace = tmp_path / "t.trace"
    trace.write_text("10\n20\n")      # two 1500-byte opportunities every 20 ms, at 10 and 20 ms
    link = {"a_to_b": {"trace_file": str(trace), "delay_s": 0.001}, "b_to_a": {}}
    res, out = simulate(udp_job(tmp_path, "trace", link, [0.0, 0.0, 0.0], [1500 - IP_UDP] * 3, t0_s=0.0))
    sent, recv, delay = _delays(out)
    assert [recv[i] for i in range(3)] == pytest.approx([0.011, 0.021, 0.031], abs=5e-6)


def test_queue_length_over_time_is_recorded(simulate, udp_job, tmp_path):
    link = {"a_to_b": {"rate_bps": 1.2e6, "queue_packets": 50}, "b_to_a": {}}
    res, out = simulate(udp_job(tmp_path, "queue", link, [0.0] * 20, [1500 - IP_UDP] * 20))
    q = read_records(out, "link_queue")
    fwd = {k: np.asarray(v) for k, v in q.filter(pc.equal(q["direction"], "a_to_b")).to_pydict().items()}

    def at(t):
        return fwd["packets"][np.argmin(np.abs(fwd["time_s"] - t))]
    # 19 wait at first (one is being sent), one leaves every 10 ms
    assert at(1.005) == 19 and at(1.105) == 9
    assert res["counters"]["a_to_b"]["peak_queue_packets"] == 19
