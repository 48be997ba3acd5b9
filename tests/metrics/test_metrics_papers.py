"""The metrics of the HSPA audio study (jitter filter, Table I quality levels) and of
Papadimitriou & Tsaoussidis (RTPI, delayed packets rate, packet loss rate, goodput, Jain's
index), against hand-worked record sets."""

import numpy as np
import pytest

from tcpdelay.errors import ParameterError
from tcpdelay.metrics import fairness, jitter_filter as jf, quality, rtpi

NAN = float("nan")


def test_base_delay_is_the_minimum_in_the_2_s_before_the_cross_traffic():
    send = np.array([7.0, 8.5, 9.0, 9.9, 10.0, 11.0])
    delay = np.array([0.030, 0.060, NAN, 0.050, 0.020, 0.010])
    # window [8, 10): packets at 8.5 (60 ms) and 9.9 (50 ms); 9.0 was lost -> base 50 ms
    assert jf.base_delay_s(send, delay, cross_traffic_start_s=10.0) == pytest.approx(0.050)
    # no start known: the whole flow's minimum
    assert jf.base_delay_s(send, delay) == pytest.approx(0.010)
    with pytest.raises(ParameterError, match="no packet received"):
        jf.base_delay_s(send, delay, cross_traffic_start_s=30.0)


def test_classify_pure_and_delayed_losses():
    delay = [0.05, NAN, 0.09, 0.0901, 0.2]
    # base 50 ms + jitter buffer 40 ms = 90 ms: 90 ms is on time, 90.1 ms and 200 ms are delayed
    st = jf.classify(delay, 0.05, 0.04)
    assert st.tolist() == [jf.ON_TIME, jf.PURE_LOSS, jf.ON_TIME, jf.DELAYED_LOSS, jf.DELAYED_LOSS]
    s = jf.summarize(st)
    assert (s["pure_losses"], s["delayed_losses"]) == (1, 2)
    assert s["total_loss_rate"] == pytest.approx(3 / 5)


def test_table_i_levels_for_20_ms_packets():
    # loss periods of 1, 2, 3, 4, 5, 6, 9 and 10 packets of 20 ms, separated by played packets:
    # 20 ms -> 1; 40, 60 ms -> 2; 80, 100 ms -> 3; 120, 180 ms -> 4; 200 ms -> 5
    runs = [1, 2, 3, 4, 5, 6, 9, 10]
    pattern, expected = [], []
    for n, lvl in zip(runs, [1, 2, 2, 3, 3, 4, 4, 5]):
        pattern += [False] + [True] * n
        expected += [0] + [lvl] * n
    levels = quality.loss_period_levels(pattern, 0.020)
    assert levels.tolist() == expected
    s = quality.level_summary(levels)
    assert s["level_counts"] == {"0": 8, "1": 1, "2": 5, "3": 9, "4": 15, "5": 10}
    assert s["acceptable_fraction"] == pytest.approx(9 / 48)  # 8 played + 1 isolated loss
    assert s["worst_level"] == 5


def test_levels_for_30_ms_packets_use_the_table_ranges_as_upper_bounds():
    # 30 ms packets: 1 -> level 1; 2 (60 ms) -> 2; 3 (90 ms) -> 3; 4 (120 ms) -> 4;
    # 6 (180 ms) -> 4; 7 (210 ms) -> 5
    assert quality.level_of_period([1, 2, 3, 4, 6, 7], 0.030).tolist() == [1, 2, 3, 4, 4, 5]


def test_quality_over_time():
    t = np.array([0.00, 0.05, 0.10, 0.15, 0.20, 0.25])
    levels = np.array([0, 1, 3, 3, 0, 0])
    q = quality.quality_over_time(t, levels, bin_s=0.1)
    # bins [0, .1): levels 0, 1; [.1, .2): 3, 3; [.2, .3): 0, 0
    assert np.allclose(q["bin_start_s"], [0.0, 0.1, 0.2])
    assert q["worst_level"].tolist() == [1, 3, 0]
    assert q["mean_level"].tolist() == [0.5, 3.0, 0.0]
    assert q["acceptable_fraction"].tolist() == [1.0, 0.0, 1.0]
    # relative to a cross-traffic start at 0.1 s: the first bin is left out
    q2 = quality.quality_over_time(t, levels, bin_s=0.1, t0_s=0.1)
    assert q2["packets"].tolist() == [2, 2]


def test_rtpi_algorithm_1_by_hand():
    # 5 packets sent; arrivals 0, 20 ms, 200 ms (a 180 ms gap > 100 ms: delayed), 220 ms; 1 lost
    recv = [0.00, 0.02, 0.20, 0.22, NAN]
    r = rtpi.real_time_performance(recv, 5, threshold_s=0.1)
    # timely = received - delayed = 4 - 1 = 3; RTPI = 3/5; delayed rate 1/5; loss rate 1/5
    assert (r["received"], r["delayed"], r["timely"]) == (4, 1, 3)
    assert r["rtpi"] == pytest.approx(0.6)
    assert r["delayed_packets_rate"] == pytest.approx(0.2)
    assert r["packet_loss_rate"] == pytest.approx(0.2)
    assert r["rtpi"] == pytest.approx(1 - r["delayed_packets_rate"] - r["packet_loss_rate"])


def test_rtpi_uses_the_previous_arrival_not_the_previous_sequence_number():
    # packet 1 is lost: packet 2 is compared with packet 0's arrival (40 ms gap, timely)
    assert rtpi.delayed_mask([0.0, NAN, 0.04]).tolist() == [False, False, False]
    # reordering: arrivals sorted by time, gap 0.15 s before the 2nd arrival (seq 2)
    assert rtpi.delayed_mask([0.0, 0.16, 0.15]).tolist() == [False, False, True]


def test_goodput_by_hand():
    sizes = [112, 112, 112, 112]  # 100 payload bytes + 12-byte RTP header
    recv = [0.0, NAN, 0.5, 1.0]
    # 3 packets * 100 B * 8 / 1 s = 2400 b/s, over the arrivals' span or a given duration
    assert fairness.goodput_bps(sizes, recv) == pytest.approx(2400)
    assert fairness.goodput_bps(sizes, recv, duration_s=2.0) == pytest.approx(1200)
    # only what arrived within the connection time counts when it is placed on the clock
    late = np.append(np.asarray(recv, dtype=float), 9.0)
    more = np.append(np.asarray(sizes, dtype=float), 1000.0)
    assert fairness.goodput_bps(more, late, duration_s=2.0, start_s=float(np.nanmin(recv))) == pytest.approx(1200)
    assert fairness.goodput_bps(more, late, duration_s=2.0) > 1200


def test_jain_index_by_hand():
    assert fairness.jain_index([5, 5, 5]) == pytest.approx(1.0)
    assert fairness.jain_index([1, 0]) == pytest.approx(0.5)       # one flow gets all: 1/n
    assert fairness.jain_index([3, 1]) == pytest.approx(16 / 20)   # 4^2 / (2 * (9 + 1))
    assert np.isnan(fairness.jain_index([]))
    with pytest.raises(ParameterError):
        fairness.jain_index([-1, 2])


def test_rtpi_discounts_the_sources_own_silences():
    # 20 ms packets; a 1 s talk-spurt silence between the 2nd and 3rd packet
    send = np.array([0.00, 0.02, 1.04, 1.06])
    recv = send + np.array([0.05, 0.05, 0.05, 0.20])
    # raw inter-arrival: 1.02 s before the 3rd packet -> delayed under the literal algorithm
    assert rtpi.delayed_mask(recv).tolist() == [False, False, True, True]
    # discounting the silence beyond one interval (1.02 - 0.02 = 1.0 s): 3rd gap 0.02 s, timely;
    # 4th: arrival gap 0.17 s, send gap 0.02 s (no silence) -> still delayed
    m = rtpi.delayed_mask(recv, send_time_s=send, nominal_interval_s=0.02)
    assert m.tolist() == [False, False, False, True]


def test_rtpi_does_not_mistake_lost_packets_for_a_silence():
    # CBR 20 ms, packets 1..6 lost: arrival gap 0.14 s between packets 0 and 7 is a real gap
    send = np.arange(8) * 0.02
    recv = send + 0.05
    recv[1:7] = NAN
    m = rtpi.delayed_mask(recv, send_time_s=send, nominal_interval_s=0.02)
    assert m.tolist() == [False] * 7 + [True]
