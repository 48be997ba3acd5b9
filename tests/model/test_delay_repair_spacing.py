"""The repair law's transmissions: a window below f·RTT spaces the segments that reveal a loss
RTT/w apart (docs/models/delay.md, "Transmissions, not writes")."""

import numpy as np
import pytest

from tcpdelay.model.delay import repair
from tcpdelay.model.delay.params import DelayParams
from tcpdelay.model.delay.predict import solve_params
from tcpdelay.model.delay.stacks import RULES

F, RTT = 50.0, 0.3


def _law(stack, loss, **kw):
    m = repair.grid_substeps(F)
    return repair.repair_time_pmf(RULES[stack], loss=loss, rate_pps=F, rtt_s=RTT, t0_s=1.0, substeps=m, **kw)


def test_transmission_rate_is_the_packet_rate_or_the_window_per_round_trip():
    rate = repair.transmission_rate_pps([0, 1, 2, 7, 15, 40], rate_pps=F, rtt_s=RTT)
    assert rate == pytest.approx([1 / RTT, 1 / RTT, 2 / RTT, 7 / RTT, F, F])


@pytest.mark.parametrize("stack", ["linux", "classic"])
def test_the_packet_rate_is_the_default_law(stack):
    assert np.array_equal(_law(stack, 0.03, send_rate_pps=F), _law(stack, 0.03))


def test_rack_waits_for_the_next_segment_not_the_next_write():
    """Almost no loss: the packet after the lost one reveals it. Every 20 ms (a packet a segment)
    three SACKs inside RACK's 75-ms window end it at RTT + 60 ms; every 150 ms (a window of two
    segments at RTT 300 ms) the first SACK comes only at RTT + 150 ms."""
    step = 1 / (F * repair.grid_substeps(F))
    per_packet = _law("linux", 1e-4)
    two_segments = _law("linux", 1e-4, send_rate_pps=2 / RTT)
    assert np.argmax(per_packet) * step == pytest.approx(RTT + 0.060, abs=step)
    assert np.argmax(two_segments) * step == pytest.approx(RTT + 0.150, abs=step)


def test_dupacks_need_three_later_segments():
    step = 1 / (F * repair.grid_substeps(F))
    law = _law("classic", 1e-4, send_rate_pps=4 / RTT)
    assert np.argmax(law) * step == pytest.approx(RTT + 3 * RTT / 4, abs=step)


def test_a_lost_retransmission_waits_for_the_recovery_windows_next_segment():
    """With the first detection the same, a slower send rate after the retransmission moves only
    the lost retransmissions (mass p of the law) later."""
    fast = _law("linux", 0.05, send_rate_pps=2 / RTT, recovery_send_rate_pps=F)
    slow = _law("linux", 0.05, send_rate_pps=2 / RTT, recovery_send_rate_pps=2 / RTT)
    grid = np.arange(max(fast.size, slow.size))
    fast, slow = np.pad(fast, (0, grid.size - fast.size)), np.pad(slow, (0, grid.size - slow.size))
    assert np.dot(grid, slow) > np.dot(grid, fast)
    first = int(np.argmax(fast))        # the first detection's peak, the same in both
    assert slow[first] == pytest.approx(fast[first], rel=1e-9)


def _same_law(mix, expect):
    """``mix`` is ``expect`` up to the tail the mixture cuts (less than TAIL_TOL of the mass)."""
    n = max(mix.size, expect.size)
    a, b = np.pad(mix, (0, n - mix.size)), np.pad(expect, (0, n - expect.size))
    return mix.size <= expect.size and b[mix.size:].sum() < repair.TAIL_TOL and np.allclose(a, b, rtol=1e-9, atol=1e-12)


def test_the_mixture_weighs_each_windows_law_by_its_share():
    m = repair.grid_substeps(F)
    kw = dict(loss=0.05, rate_pps=F, rtt_s=RTT, t0_s=1.0, substeps=m)
    # windows whose cut (⌊0.7·w⌋ ≥ 15) still carries a packet a segment: the packet-by-packet law
    only_large = repair.repair_time_mixture(RULES["linux"], np.array([22, 30]), np.array([0.3, 0.7]), **kw)
    assert _same_law(only_large, _law("linux", 0.05))
    mix = repair.repair_time_mixture(RULES["linux"], np.array([2, 22]), np.array([1.0, 3.0]), **kw)
    two = _law("linux", 0.05, send_rate_pps=2 / RTT, recovery_send_rate_pps=2 / RTT)  # ⌊0.7·2⌋ → 2
    n = max(two.size, _law("linux", 0.05).size)
    expect = 0.25 * np.pad(two, (0, n - two.size)) + 0.75 * np.pad(_law("linux", 0.05), (0, n - _law("linux", 0.05).size))
    assert _same_law(mix, expect)
    with pytest.raises(ValueError):
        repair.repair_time_mixture(RULES["linux"], np.array([2]), np.array([0.0]), **kw)


@pytest.mark.parametrize("stack", ["linux", "classic"])
def test_windows_that_share_the_rounds_after_a_retransmission_mix_as_their_laws(stack):
    """Windows 3 and 4 are cut to the same 2 segments (one spacing after a retransmission) but
    reveal the first loss at different spacings: RACK's rounds run once for both (their first
    retransmissions' laws summed), the RTO's once each; either way the mixture is the weighted
    laws, up to the cut tail."""
    m = repair.grid_substeps(F)
    kw = dict(loss=0.05, rate_pps=F, rtt_s=RTT, t0_s=1.0, substeps=m)
    mix = repair.repair_time_mixture(RULES[stack], np.array([3, 4]), np.array([0.4, 0.6]), **kw)
    three = _law(stack, 0.05, send_rate_pps=3 / RTT, recovery_send_rate_pps=2 / RTT)
    four = _law(stack, 0.05, send_rate_pps=4 / RTT, recovery_send_rate_pps=2 / RTT)
    n = max(three.size, four.size)
    expect = 0.4 * np.pad(three, (0, n - three.size)) + 0.6 * np.pad(four, (0, n - four.size))
    assert not np.allclose(np.pad(three, (0, n - three.size)), np.pad(four, (0, n - four.size)))
    assert _same_law(mix, expect)


def test_the_mixture_cuts_the_backed_off_tail_below_tail_tol():
    """A one-segment window at 5 % backs lost retransmissions off to T0·2^k: the law reaches
    minutes out with a vanishing mass there; the mixture keeps everything but the last
    TAIL_TOL of it."""
    m = repair.grid_substeps(F)
    kw = dict(loss=0.05, rate_pps=F, rtt_s=RTT, t0_s=1.0, substeps=m)
    one = _law("linux", 0.05, send_rate_pps=1 / RTT, recovery_send_rate_pps=2 / RTT)  # cut to 2 segments
    mix = repair.repair_time_mixture(RULES["linux"], np.array([1]), np.array([1.0]), **kw)
    assert mix.size < one.size and 1 - 1e-12 <= mix.sum() <= 1 + 1e-12   # the rounds cut < 1e-12 too
    assert _same_law(mix, one)


def test_voip_at_300_ms_repairs_slower_than_one_transmission_a_packet_interval():
    """VoIP at RTT 300 ms, 5 %: the chain's windows are 2-8 segments for 15 packets a round
    trip, so the prediction's mean repair time is above the packet-by-packet law's."""
    pred = solve_params(DelayParams(rate_pps=F, packet_bytes=174, rtt_s=RTT, loss=0.05, stack="linux"))
    m = repair.grid_substeps(F)
    params = DelayParams(rate_pps=F, packet_bytes=174, rtt_s=RTT, loss=0.05, stack="linux")
    per_packet = repair.repair_time_pmf(RULES["linux"], loss=0.05, rate_pps=F, rtt_s=RTT, t0_s=params.t0_s,
                                        substeps=m)
    step = 1 / (F * m)
    per_packet_mean = float(np.dot(np.arange(per_packet.size) * step, per_packet))
    assert pred.info["repair_mean_s"] > per_packet_mean + 0.02
