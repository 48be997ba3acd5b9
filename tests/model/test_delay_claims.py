"""The paper's claims (Brosh et al.; as listed in docs/models/delay.md) as tests.

Tolerances are stated per test. Where the model departs from a claim the test pins the
departure (so a change shows) and docs/models/delay.md says by how much and why. The claims
about mean-delay error against Linux 2.6 need the emulation testbed (experiments issue)."""

from __future__ import annotations

import functools

import numpy as np
import pytest

from tcpdelay.model.delay import predict
from tcpdelay.model.delay.playout import playout_advice
from tcpdelay.model.delay.region import working_region


# The paper's claims are claims about the paper's chain (Table 6): stack 'paper'.
predict = functools.partial(predict, stack="paper")
playout_advice = functools.partial(playout_advice, stack="paper")
working_region = functools.partial(working_region, stack="paper")

LOSSES = (0.001, 0.005, 0.01, 0.02, 0.03, 0.05, 0.10)


@pytest.fixture(scope="module")
def video_region():
    return working_region("video", workers=1)


@pytest.fixture(scope="module")
def voip_region():
    return working_region("voip", workers=1)


def _max_loss(region, rtt):
    return next(r["max_loss"] for r in region["max_loss_by_rtt"] if r["rtt_s"] == rtt)


def test_video_working_region_matches_paper(video_region):
    """Claim: video (delay <= 5 s; here the 99.9th percentile) works up to 3 % loss at RTT
    100 ms and 0.1 % at 300 ms. Tolerance: exact on the Section 5.1 grid."""
    assert _max_loss(video_region, 0.1) == 0.03
    assert _max_loss(video_region, 0.3) == 0.001
    cell = next(c for c in video_region["cells"] if c["rtt_s"] == 0.3 and c["loss"] == 0.005)
    assert not cell["ok"]  # the knee at 0.5 % / 300 ms (Section 6.1)


def test_voip_working_region_within_two_grid_steps(voip_region):
    """Claim (measured, Figure 14a): VoIP's 95th percentile <= 200 ms up to 2 % at 100 ms and
    5 % at 20 ms. Tolerance: two steps of the loss grid. The model is more optimistic at
    100 ms (5 %) and more pessimistic at 20 ms (3 %): see docs/models/delay.md."""
    for rtt, claimed in ((0.1, 0.02), (0.02, 0.05)):
        got = _max_loss(voip_region, rtt)
        assert got is not None
        assert abs(LOSSES.index(got) - LOSSES.index(claimed)) <= 2
    assert _max_loss(voip_region, 0.1) == 0.05   # the departure, pinned
    assert _max_loss(voip_region, 0.02) == 0.03


def _reduction(rtt, p, **kw):
    base = predict("video", rtt_s=rtt, loss=p).percentile_s(95)
    return 1 - predict("video", rtt_s=rtt, loss=p, **kw).percentile_s(95) / base


# Section 5.1 cells where video is stable and TCP adds delay at the 95th percentile
SPLIT_CELLS = [(0.1, 0.005), (0.1, 0.01), (0.1, 0.02), (0.1, 0.03), (0.3, 0.001), (0.3, 0.005)]


@pytest.mark.slow
def test_split2_lowers_video_p95_by_about_60_percent():
    """Claim (model, Figure 25): split-2 lowers video's 95th percentile by about 60 % on
    average. Tolerance: the average over the cells within 40-80 %."""
    red = [_reduction(rtt, p, split=2) for rtt, p in SPLIT_CELLS]
    assert all(r > 0 for r in red)
    assert 0.4 <= float(np.mean(red)) <= 0.8


def test_five_blind_connections():
    """Claim (model, Figure 27): five blind connections lower video's 95th percentile by about
    60 %. Tolerance 40-90 % at RTT 300 ms, where the model agrees. At RTT 100 ms (one packet
    per RTT per connection) the model predicts an *increase* at 1-3 % loss: windows of one
    segment recover by timeout (the effect the paper gives for VoIP); pinned here."""
    for p in (0.001, 0.005):
        assert 0.4 <= _reduction(0.3, p, connections=5) <= 0.9
    assert _reduction(0.1, 0.02, connections=5) < 0


def test_compare_heuristics_table():
    from tcpdelay.model.delay.heuristics import compare_heuristics

    t = compare_heuristics("video", rtt_s=0.3, loss=0.005, stack="paper")
    by = {(r["scheme"], r["n"]): r for r in t["rows"]}
    assert by[("plain", 1)]["reduction"] == 0.0
    assert by[("split", 2)]["reduction"] == pytest.approx(_reduction(0.3, 0.005, split=2))
    assert by[("connections", 5)]["reduction"] > 0.4


def test_playout_at_loss_recovery_latency():
    """Claim (Section 6.6): a playout delay of L + RTT + 3/f leaves at most 5 % late packets
    for VoIP at RTT <= 100 ms and loss <= 2 %, but does not mask video's delay at 300 ms."""
    for rtt in (0.02, 0.1):
        for p in (0.005, 0.01, 0.02):
            assert playout_advice("voip", rtt_s=rtt, loss=p)["late_fraction_at_recommended"] <= 0.05
    assert playout_advice("video", rtt_s=0.3, loss=0.005)["late_fraction_at_recommended"] > 0.5


def test_timeouts_are_rare_for_voip_windows():
    """Section 6.4: with limited transmit and the inflated (invalid) window, the timeout share
    of loss events stays low: below 0.1 % for VoIP at RTT 100 ms up to 5 % loss; without
    limited transmit it is higher."""
    for p in (0.01, 0.02, 0.05):
        assert predict("voip", rtt_s=0.1, loss=p).info["timeout_probability"] < 1e-3
    assert (predict("voip", rtt_s=0.1, loss=0.05, limited_transmit=False).info["timeout_probability"]
            > predict("voip", rtt_s=0.1, loss=0.05).info["timeout_probability"])


def test_delay_breakdown_voip_recovery_video_backlog():
    """Figure 17(b): VoIP's TCP delay is dominated by loss recovery, video's by backlog."""
    for p in (0.005, 0.01, 0.02):
        assert predict("voip", rtt_s=0.1, loss=p).info["backlog_share"] < 0.5
        assert predict("video", rtt_s=0.1, loss=p).info["backlog_share"] > 0.5
