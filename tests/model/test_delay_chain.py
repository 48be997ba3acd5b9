"""Invariants of the delay chain (Brosh et al., Section 4, Table 6)."""

from __future__ import annotations

import functools

import math
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tcpdelay.errors import ParameterError
from tcpdelay.model.delay import DelayParams, predict
from tcpdelay.model.delay.chain import build_chain, random_loss_probs, random_loss_probs_al
from tcpdelay.model.delay.montecarlo import Walker
from tcpdelay.model.delay.solve import solve_chain


# Table 6's chain (stack 'paper'); the linux and classic stacks: test_delay_stacks.py.
predict = functools.partial(predict, stack="paper")

OPTION_SETS = [
    {},
    {"loss_model": "correlated"},
    {"queue": "bytes"},
    {"limited_transmit": False},
    {"al_fr_backlog": "eq4", "backlog_rounding": "nearest"},
    {"growth_requires_backlog": True, "backlog_rounding": "floor"},
    {"count_fresh_packets": True, "loss_model": "correlated", "queue": "bytes"},
]


@settings(max_examples=25, deadline=None)
@given(
    a=st.sampled_from([174, 724, 1000, 1448]),
    interval=st.sampled_from([0.02, 0.03, 0.045]),
    rtt=st.floats(0.01, 0.4),
    p=st.floats(0.0, 0.2),
    opts=st.sampled_from(OPTION_SETS),
)
def test_rows_are_stochastic(a, interval, rtt, p, opts):
    params = DelayParams(rate_pps=1 / interval, packet_bytes=a, rtt_s=rtt, loss=p, **opts)
    Q = build_chain(params).Q
    sums = np.asarray(Q.sum(axis=1)).ravel()
    np.testing.assert_allclose(sums, 1.0, atol=1e-12)
    assert Q.data.min() > 0


@pytest.mark.parametrize("opts", OPTION_SETS)
@pytest.mark.parametrize("src", [(50, 174, 0.1, 0.03), (50, 1448, 0.1, 0.02), (33.3, 724, 0.3, 0.01), (50, 174, 0.02, 0.08),
                                 (50, 1448, 0.1, 1e-7)])
def test_matrix_rows_match_independent_transitions(src, opts):
    """Every row of the vectorized matrix equals the scalar re-derivation of Table 6."""
    f, a, rtt, p = src
    params = DelayParams(rate_pps=f, packet_bytes=a, rtt_s=rtt, loss=p, **opts)
    chain = build_chain(params)
    walker = Walker(params)
    space = chain.space
    rng = random.Random(7)
    states = rng.sample(range(space.n), 300) + [int(space.index(max(1, math.ceil(params.r - 1e-9)), 0, 0))]
    Qd = chain.Q
    for s in states:
        w, B, l = (int(x) for x in space.decode(s))
        expect: dict[int, float] = {}
        for mv, _ in walker.transitions(w, B, l):
            b = mv.backlog
            if params.backlog_rounding == "split":
                lo = math.floor(b + 1e-9)
                frac = b - lo if b - lo > 1e-9 else 0.0
                targets = [(lo, 1 - frac), (lo + 1, frac)]
            elif params.backlog_rounding == "nearest":
                targets = [(math.floor(b + 0.5), 1.0)]
            else:
                targets = [(math.floor(b + 1e-9), 1.0)]
            for bb, share in targets:
                if share <= 0:
                    continue
                idx = int(space.index(mv.w, min(bb, space.Bm), mv.l))
                expect[idx] = expect.get(idx, 0.0) + mv.prob * share
        row = Qd.getrow(s)
        got = dict(zip(row.indices.tolist(), row.data.tolist()))
        keys = set(got) | {k for k, v in expect.items() if v > 1e-15}
        for key in keys:
            assert got.get(key, 0.0) == pytest.approx(expect.get(key, 0.0), rel=1e-9, abs=1e-15), (w, B, l, key)


def test_loss_probabilities_against_direct_enumeration():
    """Fast-retransmit probability with limited transmit, by enumerating every loss pattern of
    a round and simulating the duplicate-ACK mechanism (RFC 3042) on it."""
    p = 0.13
    for w in range(1, 9):
        ok, fr, to = random_loss_probs(np.array([w]), p, True)
        exact_fr = 0.0
        for mask in range(2 ** w):
            lost = [(mask >> i) & 1 for i in range(w)]
            nl = sum(lost)
            if nl == 0:
                continue
            pr = p**nl * (1 - p) ** (w - nl)
            dup = w - nl  # SACK: every arriving segment gives a duplicate ACK
            if dup >= 3:
                exact_fr += pr
            elif dup == 2:
                exact_fr += pr * (1 - p * p)      # two new segments, one must arrive
            elif dup == 1 and w > 1:
                exact_fr += pr * (1 - p) ** 2     # one new segment at a time, both must arrive
        assert fr[0] == pytest.approx(exact_fr, rel=1e-12, abs=1e-15)
        assert ok[0] + fr[0] + to[0] == pytest.approx(1.0)
        fr_al, to_al = random_loss_probs_al(np.array([w]), p, True)
        assert fr_al[0] + to_al[0] == pytest.approx(p)


def test_extreme_loss_probabilities_are_finite():
    for p in (5e-324, 2.2250738585072014e-308, 1e-300, 0.5, 0.99):
        for w in (1, 2, 3, 4, 10, 200):
            ok, fr, to = random_loss_probs(np.array([w]), p, True)
            assert np.isfinite([ok[0], fr[0], to[0]]).all()
            assert ok[0] + fr[0] + to[0] == pytest.approx(1.0)


def test_zero_loss_every_packet_takes_one_way_delay():
    for prof in ("voip", "video", "ivideo-low"):
        pred = predict(prof, rtt_s=0.1, loss=0.0, one_way_s=0.037)
        assert pred.support_s.tolist() == [pytest.approx(0.037)]
        assert pred.mean_s == pytest.approx(0.037)
        assert pred.std_s == pytest.approx(0.0, abs=1e-12)
    tiny = predict("video", rtt_s=0.1, loss=1e-9)
    assert tiny.mean_s == pytest.approx(0.05, abs=1e-6)


@pytest.mark.parametrize("prof", ["voip", "video"])
@pytest.mark.parametrize("rtt", [0.02, 0.1, 0.3])
def test_delay_non_decreasing_in_loss(prof, rtt):
    prev_mean = prev_p95 = 0.0
    for p in (0.0, 0.001, 0.005, 0.01, 0.02, 0.03, 0.05):
        pred = predict(prof, rtt_s=rtt, loss=p)
        if pred.unstable:
            break
        assert pred.mean_s >= prev_mean - 1e-9
        assert pred.percentile_s(95) >= prev_p95 - 1e-9
        prev_mean, prev_p95 = pred.mean_s, pred.percentile_s(95)


@pytest.mark.parametrize("prof,p", [("voip", 0.01), ("voip", 0.03), ("video", 0.001), ("video", 0.005)])
def test_delay_non_decreasing_in_rtt(prof, p):
    prev_mean = prev_p95 = 0.0
    for rtt in (0.02, 0.05, 0.1, 0.2, 0.3):
        pred = predict(prof, rtt_s=rtt, loss=p)
        if pred.unstable:
            break
        assert pred.mean_s >= prev_mean - 1e-9
        assert pred.percentile_s(95) >= prev_p95 - 1e-9
        prev_mean, prev_p95 = pred.mean_s, pred.percentile_s(95)


def test_voip_beats_video_at_the_same_packet_rate():
    """Figure 17(a): same packets per second, VoIP's small packets see lower delay (RTT 100 ms)."""
    for p in (0.005, 0.01, 0.02, 0.03):
        v, m = predict("voip", rtt_s=0.1, loss=p), predict("video", rtt_s=0.1, loss=p)
        assert v.mean_s < m.mean_s
        assert v.percentile_s(95) <= m.percentile_s(95)
        assert v.info["backlog_share"] < m.info["backlog_share"]  # Figure 17(b)


def test_byte_queue_favours_small_packets():
    """Table 5 / Section 6.5: a byte-limited queue lowers VoIP's delay; for MSS-sized video
    packets it changes nothing."""
    for p in (0.01, 0.03, 0.05):
        pk = predict("voip", rtt_s=0.1, loss=p, queue="packets")
        by = predict("voip", rtt_s=0.1, loss=p, queue="bytes")
        assert by.mean_s < pk.mean_s
        assert by.percentile_s(99) <= pk.percentile_s(99)
        vpk = predict("video", rtt_s=0.1, loss=p / 3, queue="packets")
        vby = predict("video", rtt_s=0.1, loss=p / 3, queue="bytes")
        assert vby.mean_s == pytest.approx(vpk.mean_s, rel=1e-9)


def test_split_and_parallel_lower_video_p95():
    for rtt, p in ((0.3, 0.001), (0.3, 0.005), (0.1, 0.005)):
        base = predict("video", rtt_s=rtt, loss=p).percentile_s(95)
        assert predict("video", rtt_s=rtt, loss=p, split=2).percentile_s(95) < base
        assert predict("video", rtt_s=rtt, loss=p, connections=5).percentile_s(95) < base


def test_limited_transmit_lowers_timeouts():
    with_lt = predict("voip", rtt_s=0.1, loss=0.03)
    without = predict("voip", rtt_s=0.1, loss=0.03, limited_transmit=False)
    assert with_lt.info["timeout_probability"] < without.info["timeout_probability"]
    assert with_lt.mean_s <= without.mean_s


def test_unstable_guard():
    pred = predict("video", rtt_s=0.3, loss=0.01)
    assert pred.unstable
    d = pred.to_dict()
    assert d["unstable"] is True and d["mean_s"] is None and d["p95_s"] is None and d["distribution"] is None
    assert d["throughput_ratio"] < 1
    assert pred.late_fraction(10.0) == 1.0
    assert math.isinf(pred.quantile(0.5))
    forced = predict("video", rtt_s=0.3, loss=0.01, force=True)
    assert forced.unstable and forced.info["truncated_mass"] > 0.01


def test_truncation_bound_grows_until_negligible():
    pred = predict("video", rtt_s=0.3, loss=0.001, backlog_bound_packets=16)
    assert pred.info["backlog_bound_packets"] > 16
    assert pred.info["truncated_mass"] <= 1e-5
    ref = predict("video", rtt_s=0.3, loss=0.001, backlog_bound_packets=400)
    assert pred.mean_s == pytest.approx(ref.mean_s, rel=1e-3)
    assert pred.percentile_s(99) == pytest.approx(ref.percentile_s(99), abs=0.021)


def test_distribution_api():
    pred = predict("video", rtt_s=0.1, loss=0.02)
    assert pred.pmf.sum() == pytest.approx(1.0)
    assert np.all(np.diff(pred.support_s) > 0)
    assert pred.cdf(pred.support_s[-1]) == pytest.approx(1.0)
    assert pred.cdf(pred.support_s[0] - 1e-6) == 0.0
    for q in (0.5, 0.95, 0.99):
        x = pred.quantile(q)
        assert pred.cdf(x) >= q - 1e-12
        below = pred.support_s[pred.support_s < x]
        if below.size:
            assert pred.cdf(below[-1]) < q
    assert pred.late_fraction(pred.quantile(0.95)) <= 0.05 + 1e-12
    d = pred.to_dict()
    for key in ("mean_s", "std_s", "p50_s", "p95_s", "p99_s", "p999_s", "max_s", "truncated_mass",
                "backlog_share", "states", "unstable", "solve_s", "timeout_probability", "mean_window",
                "mean_backlog_packets", "distribution"):
        assert key in d
    assert d["p999_s"] == pred.quantile(0.999)
    assert 0 <= d["backlog_share"] <= 1


def test_packet_accounting_choice():
    """The paper counts only packets backlogged at a round's start; count_fresh_packets also
    counts those that arrive and leave within the round, bringing the counted packet rate to
    the source's rate (within the whole-packet rounding of the backlog)."""
    from tcpdelay.model.delay.chain import build_chain

    for a in (174, 1448):
        rates = {}
        for fresh in (False, True):
            params = DelayParams(rate_pps=50, packet_bytes=a, rtt_s=0.1, loss=0.02, count_fresh_packets=fresh)
            chain = build_chain(params)
            pi, _ = solve_chain(chain)
            e = chain.edges
            ew = pi[e.src] * e.prob
            rates[fresh] = float((ew * e.n).sum() / (ew * e.time_s).sum())
        assert rates[False] < 0.9 * 50
        assert rates[True] == pytest.approx(50, rel=0.06)


@pytest.mark.parametrize("kwargs,match", [
    (dict(rtt_s=-1, loss=0.01), "rtt_s"),
    (dict(rtt_s=0.1, loss=1.0), "loss"),
    (dict(rtt_s=0.1, loss=0.01, loss_model="bursty"), "loss_model"),
    (dict(rtt_s=0.1, loss=0.01, queue="cells"), "queue"),
    (dict(rtt_s=0.1, loss=0.01, split=0), "split"),
    (dict(rtt_s=0.1, loss=0.01, bogus=3), "unknown"),
])
def test_bad_parameters(kwargs, match):
    with pytest.raises(ParameterError, match=match):
        predict("voip", **kwargs)
    with pytest.raises(ParameterError, match="profile"):
        predict("skype", rtt_s=0.1, loss=0.01)
    with pytest.raises(ParameterError, match="exceeds mss"):
        predict(rate_bps=1e6, packet_bytes=3000, rtt_s=0.1, loss=0.01)
