"""The pure ranking of :mod:`tcpdelay.model.advice_ranking` on the papers' own cases (Brosh et
al., "The Delay-Friendliness of TCP for Real-Time Traffic", §6.6, §7, Figs 25 and 27)."""

from __future__ import annotations

import functools

import pytest

from tcpdelay.errors import ParameterError
from tcpdelay.model.advice_ranking import Budget, advise_model, fit, rank
from tcpdelay.model.delay import predict
from tcpdelay.model.delay.params import DelayParams
from tcpdelay.model.delay.predict import tcp_throughput_bps


# The ranking logic, checked on the paper's chain (its cases were chosen on it).
predict = functools.partial(predict, stack="paper")
advise_model = functools.partial(advise_model, stack="paper")


def _by_name(res):
    return {o["name"]: o for o in res["options"]}


def test_video_300ms_split_or_parallel_ranks_above_as_is():
    res = advise_model("video", rtt_s=0.3, loss=0.005, budget=Budget.from_percentile(99.9, 5.0))
    names = [o["name"] for o in res["options"]]
    as_is = names.index("as-is")
    better = [n for n in names[:as_is] if n.startswith("split-") or "connections (blind)" in n]
    assert better, names
    assert res["options"][0]["name"] in better
    assert _by_name(res)["as-is"]["meets_budget"] is False
    assert all(_by_name(res)[n]["meets_budget"] for n in better)


def test_voip_100ms_2pct_playout_rule_meets_5pct_budget():
    res = advise_model("voip", rtt_s=0.1, loss=0.02, budget=Budget(0.25, 0.05))
    opt = _by_name(res)["playout L+RTT+3/f"]
    assert opt["settings"]["playout_s"] == pytest.approx(0.05 + 0.1 + 3 * 0.02)
    assert opt["predicted"]["late_fraction"] <= 0.05
    assert opt["meets_budget"] is True
    assert opt["cost"]["added_delay_s"] == pytest.approx(0.21 - 0.25)


def test_playout_rule_beyond_the_delay_budget_does_not_meet_it():
    # the VoIP criterion (p95 <= 200 ms) is 10 ms short of L + RTT + 3/f = 210 ms
    res = advise_model("voip", rtt_s=0.1, loss=0.02, budget=Budget.from_percentile(95, 0.2))
    assert _by_name(res)["playout L+RTT+3/f"]["meets_budget"] is False


def test_rate_above_tcp_throughput_does_not_fit_with_the_bound():
    res = advise_model(rate_bps=3e6, packet_bytes=1448, rtt_s=0.3, loss=0.01, budget=Budget(0.4, 0.01))
    params = DelayParams(rate_pps=3e6 / 8 / 1448, packet_bytes=1448, rtt_s=0.3, loss=0.01)
    bound = tcp_throughput_bps(params)
    assert res["fit"]["fits"] is False
    assert res["fit"]["max_rate_bps"] == pytest.approx(bound)
    assert f"at most {bound / 1e3:.4g} kb/s" in res["fit"]["message"]
    tcp = [o for o in res["options"] if o["predicted"] and o["kind"] not in ("udp",)]
    assert all(o["predicted"]["unstable"] and o["meets_budget"] is False for o in tcp)


def test_bottleneck_bounds_the_fit():
    params = DelayParams(rate_pps=50, packet_bytes=174, rtt_s=0.1, loss=0.01)
    f = fit(69_600, params, bottleneck_bps=50_000)
    assert f["fits"] is False and f["max_rate_bps"] == 50_000 and "bottleneck" in f["message"]


def _check_options_equal_predict(res: dict, profile: str, **path) -> list:
    """Every option the model quantified has the numbers ``predict`` (``tcpdelay delay``) gives
    for the path and the option's settings; the (settings, prediction) pairs checked."""
    checked = []
    for o in res["options"]:
        if o["delay_args"] is None or o["predicted"] is None:
            continue
        kw = dict(o["settings"])
        kw.pop("playout_s", None)
        kw.pop("scheduler", None)
        pred = predict(profile, **{**path, **kw})
        assert o["predicted"]["mean_s"] == pred.mean_s
        assert o["predicted"]["p95_s"] == pred.percentile_s(95)
        assert o["predicted"]["p99_s"] == pred.percentile_s(99)
        assert o["predicted"]["late_fraction"] == float(pred.late_fraction(o["predicted"]["playout_s"]))
        checked.append((kw, pred))
    return checked


def test_every_quantified_option_equals_predict():
    budget = Budget(0.3, 0.05)
    res = advise_model("ivideo", rtt_s=0.1, loss=0.01, budget=budget, limited_transmit=False)
    checked = _check_options_equal_predict(res, "ivideo", rtt_s=0.1, loss=0.01, limited_transmit=False)
    assert len(checked) >= 8   # as-is, 2 playout, 2 split, 2 connections, queue, limited transmit


def test_rank_puts_unquantified_last_and_meeting_first():
    b = Budget(0.2, 0.05)
    opts = [{"name": "x", "kind": "tcp", "predicted": None, "meets_budget": None},
            {"name": "slow", "kind": "split", "meets_budget": False, "predicted": {"needed_playout_s": 0.3}},
            {"name": "fast", "kind": "split", "meets_budget": True, "predicted": {"needed_playout_s": 0.1}}]
    assert [o["name"] for o in rank(opts)] == ["fast", "slow", "x"]
    assert b.late_fraction == 0.05


@pytest.mark.parametrize("kw", [dict(playout_s=0), dict(playout_s=float("nan")), dict(late_fraction=1.0)])
def test_bad_budget(kw):
    args = {"playout_s": 0.2, "late_fraction": 0.05, **kw}
    with pytest.raises(ParameterError):
        Budget(**args)


def test_every_quantified_option_equals_predict_with_correlated_loss():
    """Issue 16's slow case, video at RTT 300 ms with 0.5 % correlated loss: its chains (up to
    52 013 recurrent states) take the iterative solve, and every option still has the numbers
    ``predict`` (``tcpdelay delay``) gives for its settings."""
    from tcpdelay.model.delay import solve as solve_mod

    budget = Budget(0.4, 0.01)
    res = advise_model("video", rtt_s=0.3, loss=0.005, budget=budget, loss_model="correlated")
    checked = _check_options_equal_predict(res, "video", rtt_s=0.3, loss=0.005, loss_model="correlated")
    for kw, pred in checked:
        if not kw:
            assert pred.info["recurrent_states"] >= solve_mod.ITERATIVE_MIN_STATES
            assert pred.info["residual"] <= solve_mod.ITERATIVE_RESIDUAL_TOL
    assert len(checked) >= 7   # as-is, 2 playout, 2 split, 2 connections
