"""The top-level latency API that `tcpdelay latency` and `tcpdelay evaluate` call."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tcpdelay.errors import ParameterError
from tcpdelay.model.latency import expected_latency_s, latency

KEYS = {
    "handshake_mean_s", "handshake_mean_approx_s", "handshake_failure_prob", "slow_start_segments",
    "slow_start_window", "slow_start_s", "first_loss_s", "remainder_s", "delayed_ack_s", "transfer_mean_s",
    "total_mean_s", "effective_throughput_bps", "steady_state_pftk_bps", "percentiles_s",
    "transfer_percentiles_s", "distribution_mean_s", "distribution_truncated_mass",
}


@pytest.mark.parametrize("rtt", [0.02, 0.1, 0.3])
@pytest.mark.parametrize("loss", [0.0, 0.001, 0.01, 0.05])
def test_default_grid_of_evaluate(rtt, loss):
    r = latency(100_000, rtt, loss)
    assert KEYS <= set(r)
    assert r["total_mean_s"] == pytest.approx(r["handshake_mean_s"] + r["transfer_mean_s"])
    assert r["total_mean_s"] == pytest.approx(expected_latency_s(100_000, rtt, loss))
    assert r["transfer_mean_s"] >= rtt * 0.99 * math.log(r["segments"] / 10 + 1, 2)
    p = r["percentiles_s"]
    assert r["handshake_mean_s"] < p["50"] <= p["90"] <= p["99"]
    assert r["distribution_truncated_mass"] < 1e-6


def test_vectorised_grid_matches_scalar_calls():
    sizes = np.array([1e3, 1e5, 1e7])[:, None, None]
    losses = np.array([0.0, 0.01, 0.05])[None, :, None]
    rtts = np.array([0.02, 0.3])[None, None, :]
    grid = expected_latency_s(sizes, rtts, losses, init_window=4, delayed_ack="bsd", max_window=64)
    assert grid.shape == (3, 3, 2)
    one = latency(1e5, 0.3, 0.05, init_window=4, delayed_ack="bsd", max_window=64)
    assert grid[1, 2, 1] == pytest.approx(one["total_mean_s"])


@settings(max_examples=150, deadline=None)
@given(size=st.floats(1.0, 1e9), p1=st.floats(0.0, 0.6), p2=st.floats(0.0, 0.6), r1=st.floats(1e-3, 2.0),
       r2=st.floats(1e-3, 2.0))
def test_total_latency_non_decreasing_in_loss_and_rtt(size, p1, p2, r1, r2):
    (pl, ph), (rl, rh) = sorted((p1, p2)), sorted((r1, r2))
    base = expected_latency_s(size, rl, pl)
    assert expected_latency_s(size, rl, ph) >= base * (1 - 1e-12)
    assert expected_latency_s(size, rh, pl) >= base * (1 - 1e-12)
    assert math.isfinite(expected_latency_s(size, rh, ph))


def test_huge_transfer_is_finite_and_fast():
    r = latency(1e15, 0.1, 0.01)
    assert all(math.isfinite(v) for v in r["percentiles_s"].values())
    # ~ d / R: 6.85e11 segments at PFTK's rate
    assert r["percentiles_s"]["50"] == pytest.approx(r["total_mean_s"], rel=1e-3)


def test_invalid_input():
    with pytest.raises(ParameterError):
        latency([1000, 2000], 0.1, 0.01)
    with pytest.raises(ParameterError):
        latency(1000, 0.1, 0.01, delayed_ack="linux")
    with pytest.raises(ParameterError):
        expected_latency_s(-1, 0.1, 0.01)
