"""Connection establishment (Cardwell et al. eqs 1-4): exact truncated distribution and mean,
the eq (4) approximation, the paper's Figs 3-4, hand-worked values and properties."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tcpdelay.errors import ParameterError
from tcpdelay.model import handshake as hs

probs = st.floats(min_value=0.0, max_value=0.95)


def test_defaults_are_rfc6298_and_linux():
    assert hs.DEFAULT_SYN_TIMEOUT_S == 1.0
    assert hs.DEFAULT_SYN_RETRIES == 6
    assert hs.DEFAULT_SYNACK_RETRIES == 5
    # Linux gives up after 1 + 2 + 4 + 8 + 16 + 32 + 64 = 127 s
    assert hs.handshake_failure_time_s() == 127.0


def test_no_loss_is_one_rtt():
    assert hs.handshake_mean_s(0.1, 0.0, 0.0) == pytest.approx(0.1)
    assert hs.handshake_mean_approx_s(0.1, 0.0, 0.0) == pytest.approx(0.1)
    lat, prob = hs.handshake_distribution(0.1, 0.0, 0.0)
    assert lat[np.argmax(prob)] == pytest.approx(0.1) and prob.max() == pytest.approx(1.0)


def test_exact_mean_by_hand():
    # p_f = p_r = 0.1, T_s = 1 s, RTT = 0.1 s, 6 SYN and 6 SYN/ACK retries:
    #   E[2^i | i <= 6] = (1-p)(1 - (2p)^7) / ((1 - 2p)(1 - p^7))
    #                   = 0.9 (1 - 1.28e-5) / (0.8 (1 - 1e-7)) = 1.1249857
    #   E[L_h] = RTT + T_s (2 * 1.1249857 - 2) = 0.1 + 0.2499714 = 0.3499714
    assert hs.handshake_mean_s(0.1, 0.1, 0.1, 1.0, 6, 6) == pytest.approx(0.3499714, rel=1e-6)
    # eq (4): 0.1 + (0.9/0.8 + 0.9/0.8 - 2) = 0.1 + 0.25 = 0.35
    assert hs.handshake_mean_approx_s(0.1, 0.1, 0.1, 1.0) == pytest.approx(0.35, rel=1e-12)


def test_exact_mean_equals_sum_over_eq1_eq2():
    # Direct double sum of eq (2) weighted by eq (1) over the retry limits, conditioned on success.
    rtt, pf, pr, ts, ns, na = 0.07, 0.3, 0.2, 3.0, 6, 5
    num = den = 0.0
    for i in range(ns + 1):
        for j in range(na + 1):
            w = pr**i * (1 - pr) * pf**j * (1 - pf)
            num += w * (rtt + (2**i + 2**j - 2) * ts)
            den += w
    assert hs.handshake_mean_s(rtt, pf, pr, ts, ns, na) == pytest.approx(num / den, rel=1e-12)
    assert hs.handshake_success_probability(pf, pr, ns, na) == pytest.approx(den, rel=1e-12)


def test_fig3_scenario():
    # Fig 3: RTT 70 ms, p_f = 0.3, p_r = 0.2, T_s = 3 s. eq (4):
    #   0.07 + 3 (0.8/0.6 + 0.7/0.4 - 2) = 0.07 + 3 * 1.083333 = 3.32 s
    assert hs.handshake_mean_approx_s(0.07, 0.3, 0.2, 3.0) == pytest.approx(3.32)
    exact = hs.handshake_mean_s(0.07, 0.3, 0.2, 3.0)
    # "Both the model and the approximation fit well" -- within 10 % of each other here.
    assert exact == pytest.approx(3.32, rel=0.1)
    # eq (3): the CDF at RTT is P(i = 0, j = 0 | success); first step at RTT + T_s.
    p00 = 0.8 * 0.7 / hs.handshake_success_probability(0.3, 0.2)
    assert hs.handshake_cdf(0.07, 0.07, 0.3, 0.2, 3.0) == pytest.approx(p00)
    assert hs.handshake_cdf(0.0699, 0.07, 0.3, 0.2, 3.0) == 0.0
    assert hs.handshake_cdf(3.0699, 0.07, 0.3, 0.2, 3.0) == pytest.approx(p00)
    assert hs.handshake_cdf(3.07, 0.07, 0.3, 0.2, 3.0) > p00


def test_fig4_approximation_tracks_then_diverges():
    # Fig 4: p_r = 0, 0 <= p_f <= 0.45. The approximation follows the exact mean at small loss
    # and diverges as p_f -> 0.5, where its unbounded-retry assumption fails.
    pf = np.array([0.01, 0.05, 0.1, 0.2, 0.3, 0.4, 0.45, 0.49])
    exact = hs.handshake_mean_s(0.1, pf, 0.0, 3.0)
    approx = hs.handshake_mean_approx_s(0.1, pf, 0.0, 3.0)
    rel = approx / exact - 1
    assert (rel[:3] < 0.01).all()
    assert (np.diff(rel) > 0).all()
    assert rel[-2] > 0.5 and rel[-1] > 3
    # undefined at and beyond 1/2; the exact mean stays finite
    assert math.isnan(hs.handshake_mean_approx_s(0.1, 0.5, 0.0))
    assert math.isnan(hs.handshake_mean_approx_s(0.1, 0.0, 0.7))
    assert math.isfinite(hs.handshake_mean_s(0.1, 0.7, 0.7))


def test_distribution_sums_and_failure_mass():
    lat, prob = hs.handshake_distribution(0.1, 0.4, 0.3, 1.0, 6, 5)
    assert prob.sum() == pytest.approx(1.0)
    assert (np.diff(lat) > 0).all()
    lat_u, prob_u = hs.handshake_distribution(0.1, 0.4, 0.3, 1.0, 6, 5, conditional=False)
    # (1 - 0.3^7)(1 - 0.4^6) = 0.9997813 * 0.995904 = 0.9956863
    assert prob_u.sum() == pytest.approx((1 - 0.3**7) * (1 - 0.4**6), rel=1e-12)
    assert prob_u.sum() == pytest.approx(0.9956863, rel=1e-6)
    # the largest latency: i = 6, j = 5: RTT + (64 + 32 - 2) T_s = 94.1 s
    assert lat[-1] == pytest.approx(94.1)
    # mean of the distribution is the exact mean
    assert np.dot(lat, prob) == pytest.approx(hs.handshake_mean_s(0.1, 0.4, 0.3, 1.0, 6, 5))


@settings(max_examples=150, deadline=None)
@given(p1=probs, p2=probs, q=probs, rtt=st.floats(1e-4, 2.0), ts=st.floats(0.1, 5.0),
       n=st.integers(0, 10))
def test_mean_non_decreasing_in_loss(p1, p2, q, rtt, ts, n):
    lo, hi = min(p1, p2), max(p1, p2)
    tol = 1e-12
    assert hs.handshake_mean_s(rtt, hi, q, ts, n, n) >= hs.handshake_mean_s(rtt, lo, q, ts, n, n) - tol
    assert hs.handshake_mean_s(rtt, q, hi, ts, n, n) >= hs.handshake_mean_s(rtt, q, lo, ts, n, n) - tol
    if hi < 0.5:
        assert hs.handshake_mean_approx_s(rtt, hi, q * 0.5, ts) >= hs.handshake_mean_approx_s(rtt, lo, q * 0.5, ts) - tol


@settings(max_examples=100, deadline=None)
@given(p=probs, q=probs, r1=st.floats(1e-4, 2.0), r2=st.floats(1e-4, 2.0))
def test_mean_non_decreasing_in_rtt_and_finite(p, q, r1, r2):
    lo, hi = min(r1, r2), max(r1, r2)
    a, b = hs.handshake_mean_s(lo, p, q), hs.handshake_mean_s(hi, p, q)
    assert math.isfinite(a) and math.isfinite(b) and b >= a
    # bounded by the slowest successful handshake
    assert b <= hi + (2**6 + 2**5 - 2) * 1.0 + 1e-9


def test_exact_and_approx_agree_with_many_retries():
    # With a large retry limit the truncation vanishes and eq (4) is exact.
    assert hs.handshake_mean_s(0.05, 0.2, 0.3, 1.0, 30, 30) == pytest.approx(
        hs.handshake_mean_approx_s(0.05, 0.2, 0.3, 1.0), rel=1e-6)


def test_vectorised():
    out = hs.handshake_mean_s(np.array([0.02, 0.1, 0.3])[:, None], np.array([0.0, 0.01, 0.05]), 0.01)
    assert out.shape == (3, 3)
    assert out[2, 1] == pytest.approx(hs.handshake_mean_s(0.3, 0.01, 0.01))


@pytest.mark.parametrize("call", [
    lambda: hs.handshake_mean_s(0.1, 1.0, 0.0),
    lambda: hs.handshake_mean_s(0.1, 0.1, -0.1),
    lambda: hs.handshake_mean_s(0.0, 0.1, 0.1),
    lambda: hs.handshake_mean_s(0.1, 0.1, 0.1, 0.0),
    lambda: hs.handshake_mean_s(0.1, 0.1, 0.1, 1.0, -1),
    lambda: hs.handshake_mean_s(0.1, 0.1, 0.1, 1.0, 2.5),
    lambda: hs.handshake_mean_s(0.1, 0.1, 0.1, 1.0, 6, 99),
    lambda: hs.handshake_distribution([0.1, 0.2], 0.1, 0.1),
])
def test_invalid_input_raises_parameter_error(call):
    with pytest.raises(ParameterError):
        call()
