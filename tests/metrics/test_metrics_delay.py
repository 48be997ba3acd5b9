"""Delay statistics, late fraction vs playout delay, RFC 3550 jitter and loss, worked by hand."""

import math

import numpy as np
import pytest

from tcpdelay.errors import ParameterError
from tcpdelay.metrics import delay as dl

NAN = float("nan")


def test_delay_stats_by_hand():
    s = dl.delay_stats([0.1, 0.2, 0.3, 0.4, NAN], percentiles=(50, 100))
    # 4 delays (the NaN is a lost packet): mean 0.25; deviations ±0.15, ±0.05:
    # std = sqrt((2 * 0.0225 + 2 * 0.0025) / 4) = sqrt(0.0125) = 0.1118
    assert s["count"] == 4
    assert s["mean_s"] == pytest.approx(0.25)
    assert s["std_s"] == pytest.approx(math.sqrt(0.0125))
    assert (s["min_s"], s["max_s"]) == (0.1, 0.4)
    assert s["p50_s"] == pytest.approx(0.25)  # linear interpolation between 0.2 and 0.3
    assert s["p100_s"] == pytest.approx(0.4)
    assert dl.delay_stats([NAN])["mean_s"] is None
    assert "p99_9_s" in dl.delay_stats([0.1])
    with pytest.raises(ParameterError):
        dl.delay_stats([0.1], percentiles=(101,))


def test_late_and_miss_fraction_by_hand():
    delays = [0.05, 0.10, 0.20, NAN]  # 4 packets sent, the last never arrived
    pd = [0.05, 0.10, 0.15, 0.30]
    # late = delay > d strictly: d=.05 -> {.10, .20} = 2/4; d=.10 -> {.20} = 1/4;
    # d=.15 -> {.20} = 1/4; d=.30 -> none
    assert dl.late_fraction(delays, pd).tolist() == [0.5, 0.25, 0.25, 0.0]
    # missed = late + the lost one (1/4)
    assert dl.miss_fraction(delays, pd).tolist() == [0.75, 0.5, 0.5, 0.25]
    assert dl.late_fraction(delays, 0.1) == 0.25  # scalar in, 0-d out


def test_playout_delay_for_a_target_late_fraction():
    delays = [0.01 * k for k in range(1, 101)]  # 10 ms ... 1 s, 100 packets
    # 1 % late = at most 1 packet later than d: d = 0.99 s (only the 1 s one is later)
    assert dl.playout_delay_for_late_fraction(delays, 0.01) == pytest.approx(0.99)
    assert dl.playout_delay_for_late_fraction(delays, 0.0) == pytest.approx(1.0)
    assert math.isnan(dl.playout_delay_for_late_fraction([NAN, NAN], 0.01))


def test_rfc3550_jitter_by_hand():
    send = [0.00, 0.02, 0.04, 0.06]
    recv = [0.10, 0.13, 0.14, 0.17]
    # transit = 0.10, 0.11, 0.10, 0.11 -> |D| = 0.01 each time
    # J1 = 0.01/16 = 0.000625
    # J2 = J1 + (0.01 - J1)/16 = 0.0012109375
    # J3 = J2 + (0.01 - J2)/16 = 0.00176025390625
    j = dl.interarrival_jitter(send, recv)
    assert j == pytest.approx([0.0, 0.000625, 0.0012109375, 0.00176025390625])


def test_rfc3550_jitter_uses_arrival_order_and_skips_lost():
    # packet 1 overtakes packet 0; packet 2 is lost
    send = [0.00, 0.02, 0.04, 0.06]
    recv = [0.15, 0.12, NAN, 0.18]
    # arrival order: p1 (transit .10), p0 (.15), p3 (.12): |D| = .05, .03
    # J = .05/16 = .003125; then .003125 + (.03 - .003125)/16 = .004804688
    j = dl.interarrival_jitter(send, recv)
    assert j[-1] == pytest.approx(0.003125 + (0.03 - 0.003125) / 16)


def test_loss_summary():
    lost = np.array([0, 1, 0, 0, 1, 0, 0, 0], bool)
    dropped = np.array([0, 0, 0, 1, 0, 0, 0, 0], bool)
    s = dl.loss_summary(lost, dropped)
    # 8 produced, 1 never on the wire: loss = 2 / 7; missing = 3 / 8
    assert s["packets_on_wire"] == 7
    assert s["loss_rate"] == pytest.approx(2 / 7)
    assert s["missing_rate"] == pytest.approx(3 / 8)
