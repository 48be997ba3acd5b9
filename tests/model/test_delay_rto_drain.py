"""After an RTO the packets PRR's stalled ACK clock held at the sender drain at the post-timeout
window, two segments a round trip, not as fast as they were written (docs/models/delay.md,
"The drain after an RTO")."""

import numpy as np
import pytest

from tcpdelay.model.delay import predict, repair
from tcpdelay.model.delay.stacks import RULES


def test_the_drain_stride_is_the_gap_between_writes_less_the_post_timeout_windows():
    m = repair.grid_substeps(50)
    assert m == 20      # a 1-ms grid at 50 packets/s
    # video (one packet a segment) at RTT 20 ms: 2 segments a round trip, 100/s against 50/s
    # written: the j-th packet behind the hold leaves j (20 - 10) ms earlier than it -> 10 steps
    assert repair.rto_drain_stride(RULES["linux"], rate_pps=50, rtt_s=0.02, packets_per_segment=1, substeps=m) == 10
    # nine VoIP packets a segment: 900/s, 20 - 1.1 ms = 18.9 ms -> 19 steps
    assert repair.rto_drain_stride(RULES["linux"], rate_pps=50, rtt_s=0.02, packets_per_segment=9, substeps=m) == 19
    # at RTT 100 ms two segments a round trip (20/s) do not keep up with 50/s: no stall to drain
    # there (the chain's windows carry that backlog)
    assert repair.rto_drain_stride(RULES["linux"], rate_pps=50, rtt_s=0.1, packets_per_segment=1, substeps=m) is None
    # classic's post-timeout windows are the same (1, then ssthresh = 2): the same stride
    assert repair.rto_drain_stride(RULES["classic"], rate_pps=50, rtt_s=0.02, packets_per_segment=1, substeps=m) == 10


def _laws(loss=0.05, rtt_s=0.02):
    m = repair.grid_substeps(50)
    part: list = []
    R = repair.repair_time_mixture(RULES["linux"], np.array([2, 3]), np.array([0.5, 0.5]), loss=loss,
                                   rate_pps=50, rtt_s=rtt_s, t0_s=rtt_s + 0.2, substeps=m, rto_part=part)
    return m, R, part[0]


def test_the_rto_part_is_the_repairs_the_timer_sent():
    m, R, rto = _laws()
    assert rto.shape == R.shape and np.all(rto >= 0) and np.all(rto <= R + 1e-15)
    # at r = 1 about half the lost retransmissions stall (p = 5 %): a few 1e-2 of the repairs,
    # none before the RTO (T0 = 220 ms after the retransmission, itself >= RTT after the loss)
    share = rto.sum() / R.sum()
    assert 0.005 < share < 0.05
    assert not rto[:240].any()
    # the law without the split is the same law
    plain = repair.repair_time_mixture(RULES["linux"], np.array([2, 3]), np.array([0.5, 0.5]), loss=0.05,
                                       rate_pps=50, rtt_s=0.02, t0_s=0.22, substeps=m)
    assert np.array_equal(plain, R)


def test_a_slower_drain_holds_more_packets_longer():
    m, R, rto = _laws()
    plain = repair.hol_pmf(R, loss=0.05, substeps=m)
    same = repair.hol_pmf(R, loss=0.05, substeps=m, rto_pmf=rto, rto_stride=m)
    slow = repair.hol_pmf(R, loss=0.05, substeps=m, rto_pmf=rto, rto_stride=m // 2)
    mean = lambda h: float(np.dot(np.arange(h.size), h))       # noqa: E731 (grid steps)
    # a drain as fast as the writes is the one-law product, to p^2 S_a S_b
    assert mean(same) == pytest.approx(mean(plain), rel=1e-3)
    # at half the stride the ramp behind an RTO is twice as long: the excess over 100 ms grows
    tail = lambda h: float(np.dot(np.arange(h.size)[100:], h[100:]))   # noqa: E731
    assert tail(slow) > 1.5 * tail(plain)
    assert mean(slow) > mean(plain)


def test_video_at_20_ms_waits_longer_than_voip_after_an_rto():
    # the same loss and rate: VoIP's held packets coalesce into one segment and leave together,
    # video's leave two a round trip, so video's mean delay is above VoIP's
    video = predict("video", rtt_s=0.02, loss=0.05, stack="linux")
    voip = predict("voip", rtt_s=0.02, loss=0.05, stack="linux")
    assert video.mean_s > voip.mean_s


def test_no_drain_stride_where_more_than_one_packet_is_written_a_round_trip():
    # VoIP at RTT 300 ms: 8 packets a segment, two segments a round trip (53/s) would just keep up
    # with 50/s, but the backlog then takes tens of rounds, over which the window grows: not this
    # law's regime (f RTT = 15 > 1), the one-law product stands
    m = repair.grid_substeps(50)
    assert repair.rto_drain_stride(RULES["linux"], rate_pps=50, rtt_s=0.3, packets_per_segment=8, substeps=m) is None
    assert repair.rto_drain_stride(RULES["linux"], rate_pps=50, rtt_s=0.021, packets_per_segment=1, substeps=m) is None


def test_classic_holds_the_writes_behind_a_stalled_lost_retransmission_at_the_sender_too():
    # classic resends every lost retransmission by the RTO (no RACK); where PRR's ACK clock stalled
    # behind it (at r = 1 about half the time, as for linux) the packets written meanwhile wait
    # at the sender and drain at the post-timeout window (ns-3 trace, docs/experiments/model-fidelity.md)
    m = repair.grid_substeps(50)
    windows, shares = np.array([2, 3]), np.array([0.5, 0.5])
    part: list = []
    R = repair.repair_time_mixture(RULES["classic"], windows, shares, loss=0.05, rate_pps=50, rtt_s=0.02,
                                   t0_s=0.22, substeps=m, rto_part=part)
    rto = part[0]
    assert rto.shape == R.shape and np.all(rto >= 0) and np.all(rto <= R + 1e-15)
    assert not rto[:220].any()                 # nothing before the RTO can fire
    # a part of the repairs the RTO sent, not all of them: the RTO repairs about p of the losses
    # (their retransmission lost), the stalled ones about half of those, plus every backed-off one
    after_rto = R[220:].sum() / R.sum()
    assert 0.3 * after_rto < rto.sum() / R.sum() < 0.8 * after_rto
    plain = repair.repair_time_mixture(RULES["classic"], windows, shares, loss=0.05, rate_pps=50,
                                       rtt_s=0.02, t0_s=0.22, substeps=m)
    assert np.array_equal(plain, R)
    # the drain lengthens video's delay at RTT 20 ms (one packet a segment) against the one-law product
    stride = repair.rto_drain_stride(RULES["classic"], rate_pps=50, rtt_s=0.02, packets_per_segment=1, substeps=m)
    mean = lambda h: float(np.dot(np.arange(h.size), h))       # noqa: E731 (grid steps)
    assert mean(repair.hol_pmf(R, loss=0.05, substeps=m, rto_pmf=rto, rto_stride=stride)) > \
        1.05 * mean(repair.hol_pmf(R, loss=0.05, substeps=m))
