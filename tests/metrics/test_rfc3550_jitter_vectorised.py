"""The vectorised RFC 3550 jitter (:func:`tcpdelay.metrics.delay.interarrival_jitter`) against
the estimator's loop as RFC 3550 Appendix A.8 writes it (``J += (|D| - J) / 16`` per packet in
arrival order), on random flows of lengths around powers of two (the doubling's steps) and past
its last step (16384), with lost packets, reordering and the edge cases (no packet, one, two,
all lost)."""

import numpy as np
import pytest

from tcpdelay.metrics import delay as dl

NAN = float("nan")


def _reference_jitter_s(send_time_s, recv_time_s) -> np.ndarray:
    """RFC 3550 §6.4.1 / A.8, one packet at a time."""
    s = np.asarray(send_time_s, dtype=float)
    r = np.asarray(recv_time_s, dtype=float)
    ok = np.isfinite(r) & np.isfinite(s)
    s, r = s[ok], r[ok]
    order = np.argsort(r, kind="stable")
    transit = r[order] - s[order]
    out = np.zeros(transit.size)
    j = 0.0
    for i in range(1, transit.size):
        j += (abs(transit[i] - transit[i - 1]) - j) / 16.0
        out[i] = j
    return out


def _flow(rng, n: int, loss: float, spread_s: float):
    send = np.arange(n) * 0.02
    recv = send + 0.05 + rng.exponential(spread_s, n)  # large spread: packets overtake others
    recv[rng.random(n) < loss] = NAN
    return send, recv


@pytest.mark.parametrize("n", [0, 1, 2, 3, 127, 128, 129, 256, 257, 1000, 20_000])
def test_equals_the_loop_on_random_flows(n):
    rng = np.random.default_rng(n)
    for loss, spread_s in [(0.0, 0.01), (0.05, 0.01), (0.3, 0.5)]:
        send, recv = _flow(rng, n, loss, spread_s)
        got = dl.interarrival_jitter(send, recv)
        want = _reference_jitter_s(send, recv)
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)


def test_edge_cases():
    assert dl.interarrival_jitter([], []).shape == (0,)
    assert dl.interarrival_jitter([0.0], [0.1]).tolist() == [0.0]
    assert dl.interarrival_jitter([0.0, 0.02], [NAN, NAN]).shape == (0,)
    assert dl.interarrival_jitter([0.0, 0.02], [0.1, NAN]).tolist() == [0.0]
    # a lost send time counts as a lost packet too
    j = dl.interarrival_jitter([0.0, NAN, 0.04], [0.1, 0.13, 0.15])
    assert j.tolist() == pytest.approx([0.0, 0.01 / 16])
    # constant transit (times exact in binary): no jitter, exactly
    t = np.arange(1000) * 0.015625
    assert not dl.interarrival_jitter(t, t + 0.0625).any()


def test_a_long_flow_forgets_its_start():
    """The carry from block to block: a burst at the start decays as (15/16)^k, and a step
    in |D| converges to the step's size, as in the loop."""
    rng = np.random.default_rng(7)
    send = np.arange(5000) * 0.02
    recv = send + 0.05
    recv[:50] += rng.exponential(1.0, 50)
    recv[3000:] += 0.003 * (np.arange(2000) % 2)  # |D| = 3 ms from packet 3000 on
    got = dl.interarrival_jitter(send, recv)
    np.testing.assert_allclose(got, _reference_jitter_s(send, recv), rtol=0, atol=1e-12)
    assert got[-1] == pytest.approx(0.003, rel=1e-9)
