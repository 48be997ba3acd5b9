"""ITU-T G.107 E-model: default rating, R-to-MOS, delay and loss impairments by hand."""

import math

import numpy as np
import pytest

from tcpdelay.errors import ParameterError
from tcpdelay.metrics import emodel

NAN = float("nan")


def test_default_values_give_r_93_2_and_mos_4_41():
    # G.107: with all parameters at their Table 3 defaults, R = 93.2
    r = emodel.r_factor()
    assert r == pytest.approx(93.2, abs=0.05)
    # Annex B: 1 + 0.035*93.2 + 93.2*(33.2)*(6.8)*7e-6 = 4.262 + 0.1473 = 4.409
    assert emodel.mos_from_r(r) == pytest.approx(4.41, abs=0.005)


def test_mos_from_r_annex_b():
    assert emodel.mos_from_r(-5) == 1.0
    assert emodel.mos_from_r(120) == 4.5
    # R = 50: 1 + 1.75 + 50 * (-10) * 50 * 7e-6 = 2.75 - 0.175 = 2.575
    assert emodel.mos_from_r(50) == pytest.approx(2.575)
    assert emodel.mos_from_r(np.array([0, 100])).tolist() == pytest.approx([1.0, 4.5])


def test_idd_by_hand():
    assert emodel.idd(100.0) == 0.0 and emodel.idd(50.0) == 0.0
    # Ta = 200 ms: X = log2(2) = 1;
    # Idd = 25 * ((1 + 1)^(1/6) - 3 * (1 + (1/3)^6)^(1/6) + 2)
    #     = 25 * (1.122462 - 3 * 1.000229 + 2) = 25 * 0.121776 = 3.0444
    expected = 25 * (2 ** (1 / 6) - 3 * (1 + (1 / 3) ** 6) ** (1 / 6) + 2)
    assert emodel.idd(200.0) == pytest.approx(expected)
    assert expected == pytest.approx(3.044, abs=0.001)


def test_ie_eff_by_hand():
    # G.711 with PLC, 1 % random loss: 0 + 95 * 1 / (1/1 + 25.1) = 95 / 26.1 = 3.6398
    assert emodel.ie_eff(0, 25.1, 1.0) == pytest.approx(95 / 26.1)
    # without PLC: 95 / (1 + 4.3) = 17.925
    assert emodel.ie_eff(0, 4.3, 1.0) == pytest.approx(95 / 5.3)
    # bursty (BurstR 2): 95 * 1 / (0.5 + 25.1)
    assert emodel.ie_eff(0, 25.1, 1.0, 2.0) == pytest.approx(95 / 25.6)
    with pytest.raises(ParameterError):
        emodel.ie_eff(0, 25.1, 150)


def test_burst_ratio_by_hand():
    # 4 of 10 lost in 2 bursts of 2: mean burst 2; random loss at 0.4 gives 1/(1-0.4) = 1.667
    # BurstR = 2 / 1.667 = 1.2
    assert emodel.burst_ratio([1, 1, 0, 0, 0, 0, 1, 1, 0, 0]) == pytest.approx(1.2)
    assert emodel.burst_ratio([0, 0, 0]) == 1.0
    assert emodel.burst_ratio([1, 0, 1, 0]) == 1.0  # isolated losses are never below random


def test_delay_lowers_r_beyond_100_ms_and_plc_helps():
    r = [emodel.r_factor(T=t, Ta=t, Tr=2 * t) for t in (0, 100, 150, 200, 300, 400)]
    assert all(a > b for a, b in zip(r, r[1:]))
    # delay alone, no loss: ~ 89.5 at 150 ms, under 70 at 400 ms (the G.114 curve shape)
    assert 88 < r[2] < 91 and r[5] < 70
    assert emodel.r_factor(Ppl=2, Bpl=25.1) > emodel.r_factor(Ppl=2, Bpl=4.3)


def test_voip_quality_counts_late_packets_as_lost():
    # 100 packets at 50 ms, except two at 130 ms (seq 10, 50) and one lost (seq 90)
    delay = np.full(100, 0.05)
    delay[[10, 50]] = 0.13
    delay[90] = NAN
    q = emodel.voip_quality(delay, 0.1, packetization_s=0.02, codec="g711-plc")
    # playout 100 ms: the 2 late and the lost one are unusable, isolated -> Ppl = 3 %, BurstR 1
    assert q["effective_loss"] == pytest.approx(0.03) and q["burst_r"] == 1.0
    assert q["mouth_to_ear_s"] == pytest.approx(0.12)
    assert q["ie_eff"] == pytest.approx(95 * 3 / (3 + 25.1))  # 10.14
    q2 = emodel.voip_quality(delay, 0.15, packetization_s=0.02)
    assert q2["effective_loss"] == pytest.approx(0.01)
    # 150 ms: Ie,eff falls from 10.1 to 3.6 while Id grows by less; 600 ms: Id dominates
    best = emodel.best_playout_delay(delay, [0.1, 0.15, 0.6])
    assert best["playout_delay_s"] == 0.15
    assert best["r"] == pytest.approx(q2["r"])
    with pytest.raises(ParameterError):
        emodel.voip_quality(delay, 0.1, codec="opus")


def test_unknown_e_model_parameter_is_an_error():
    with pytest.raises(ParameterError, match="unknown parameter"):
        emodel.r_factor(Foo=1)
