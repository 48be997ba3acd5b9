"""The ``hol_ramp`` option of the delay model: the packets held at the receiver behind each fast
retransmit (docs/models/delay.md, "The head-of-line ramp")."""

from __future__ import annotations

import functools

import importlib.util
import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tcpdelay.errors import ParameterError
from tcpdelay.model.delay import DelayParams, get_profile, predict
from tcpdelay.model.delay.chain import build_chain
from tcpdelay.model.delay.montecarlo import walk
from tcpdelay.model.delay.predict import solve_params


# hol_ramp is an option of the paper's chain (stack 'paper').
predict = functools.partial(predict, stack="paper")

ROOT = Path(__file__).resolve().parents[2]
VOIP_F = get_profile("voip").rate_pps


def _ramp_area_s(rtt_s: float, f: float) -> float:
    """Summed excess delay of one ramp from an application-limited state: m = floor(f·RTT)
    packets at RTT - q/f, q = 0..m-1."""
    m = math.floor(f * rtt_s + 1e-9)
    return m * rtt_s - m * (m - 1) / (2 * f)


@pytest.mark.parametrize("kw", [
    dict(profile="voip", rtt_s=0.3, loss=0.01),
    dict(profile="voip", rtt_s=0.1, loss=0.1, loss_model="correlated"),
    dict(profile="video", rtt_s=0.1, loss=0.02, count_fresh_packets=True),
])
def test_default_is_the_option_off(kw):
    """Omitting hol_ramp and hol_ramp=False give the same distribution, bit for bit; the
    default chain has no packets below L + RTT on the retransmission lattice, and its eq (3)
    mean recomputed edge by edge from the solved chain is the prediction's."""
    base = predict(**kw)
    off = predict(**kw, hol_ramp=False)
    assert np.array_equal(base.support_s, off.support_s) and np.array_equal(base.pmf, off.pmf)
    assert base.info["params"]["hol_ramp"] is False
    params = DelayParams(**{k: v for k, v in base.info["params"].items() if k != "rate_bps"})
    chain = build_chain(params)
    assert chain.edges.j0.min() >= 0
    from tcpdelay.model.delay.solve import solve_chain
    pi, _ = solve_chain(chain)
    e = chain.edges
    ew = pi[e.src] * e.prob
    excess = e.n * e.c * params.rtt_s + (e.n * e.j0 + e.jstep * e.n * (e.n - 1) / 2) / params.rate_pps
    assert base.mean_s == pytest.approx(params.one_way_s + ew @ excess / (ew @ e.n), rel=1e-9)


def test_ramp_changes_no_transition():
    """The ramp adds packets, not dynamics: Q and every real edge are count_fresh_packets'."""
    kw = dict(rate_pps=VOIP_F, packet_bytes=174, rtt_s=0.3, loss=0.05)
    a = build_chain(DelayParams(**kw, count_fresh_packets=True))
    b = build_chain(DelayParams(**kw, hol_ramp=True))
    assert (a.Q != b.Q).nnz == 0
    ra, rb = a.edges.time_s > 0, b.edges.time_s > 0
    for name in ("src", "prob", "n", "j0", "c"):
        assert np.array_equal(getattr(a.edges, name)[ra], getattr(b.edges, name)[rb]), name
    ramp = (b.edges.time_s == 0) & (b.edges.c == 1)
    r = kw["rate_pps"] * kw["rtt_s"]
    # at most floor(r) packets per ramp, the last of them at exactly L + RTT
    assert ramp.any() and b.edges.n[ramp].max() == math.floor(r + 1e-9)
    assert np.all(b.edges.j0[ramp] + b.edges.n[ramp] - 1 == 0)


def test_mean_rise_grows_with_r_squared():
    """The ramp's area per loss, m·RTT - m(m-1)/(2f), grows with r²: 8 times as much at 300
    ms (r = 15) as at 100 ms (r = 5). As p -> 0 nearly every loss is one application-limited
    fast retransmit per p packets, so the rise of the mean over count_fresh_packets alone
    tends to p times that area."""
    rise = {}
    p = 1e-5
    for rtt in (0.1, 0.3):
        hol = predict("voip", rtt_s=rtt, loss=p, hol_ramp=True)
        fresh = predict("voip", rtt_s=rtt, loss=p, count_fresh_packets=True)
        rise[rtt] = hol.mean_s - fresh.mean_s
        assert rise[rtt] / p == pytest.approx(_ramp_area_s(rtt, VOIP_F), rel=0.01)
    assert rise[0.3] > 6 * rise[0.1]
    # at a realistic loss rate too, against the paper's default
    up = {rtt: predict("voip", rtt_s=rtt, loss=0.01, hol_ramp=True).mean_s
          - predict("voip", rtt_s=rtt, loss=0.01).mean_s for rtt in (0.1, 0.3)}
    assert up[0.1] > 0 and up[0.3] > 3 * up[0.1]


def _measured_points():
    """(RTT, loss) of the committed VoIP validation points at RTT >= 100 ms."""
    pts = set()
    for name in ("validate-wide", "validate-reduced"):
        doc = json.loads((ROOT / "results" / name / "validation.json").read_text())
        pts |= {(p["rtt_s"], p["loss"]) for p in doc["points"] if p["profile"] == "voip" and p["rtt_s"] >= 0.1}
    return sorted(pts)


def _gap_script():
    spec = importlib.util.spec_from_file_location("model_gap_long_rtt", ROOT / "benchmarks" / "model_gap_long_rtt.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_reproduces_the_gap_scripts_correction_at_the_measured_points():
    """benchmarks/model_gap_long_rtt.py adds the ramp to the solved chain's mean after the
    fact (count_fresh_packets plus r packets at RTT - q/f per fast retransmit); the option
    builds it into the distribution. Their means agree at every measured point."""
    points = _measured_points()
    assert len(points) >= 8
    gap = _gap_script()
    for rtt, loss in points:
        script = gap.solve("voip", rtt, loss, {"count_fresh_packets": True})
        ours = predict("voip", rtt_s=rtt, loss=loss, hol_ramp=True)
        assert ours.mean_s == pytest.approx(script["ramp"]["mean_s"], rel=0.01), (rtt, loss)
        assert ours.mean_s == pytest.approx(script["ramp"]["mean_s"], rel=1e-6), (rtt, loss)


def test_vanishing_loss_tends_to_L():
    for p in (1e-4, 1e-6, 1e-8):
        pred = predict("voip", rtt_s=0.3, loss=p, hol_ramp=True)
        L = pred.one_way_s
        # P(D > L) is about p·(3 + r) packets per packet
        assert 1 - float(pred.cdf(L)) < 30 * p
        assert pred.mean_s - L < 2 * p * (_ramp_area_s(0.3, VOIP_F) + 3 * 0.3 + 6 / VOIP_F)
    zero = predict("voip", rtt_s=0.3, loss=0.0, hol_ramp=True)
    assert zero.support_s.tolist() == [zero.one_way_s] and zero.pmf.tolist() == [1.0]


@pytest.mark.parametrize("kw", [
    dict(profile="voip", rtt_s=0.3, loss=0.05, hol_ramp=True),
    dict(profile="voip", rtt_s=0.1, loss=0.1, hol_ramp=True, connections=2),
    dict(profile="ivideo", rtt_s=0.1, loss=0.02, hol_ramp=True, split=2, queue="bytes"),
    dict(rate_bps=64_000, packet_bytes=137, rtt_s=0.27, loss=0.03, hol_ramp=True),  # r not an integer
])
def test_a_distribution(kw):
    pred = predict(**kw)
    assert pred.pmf.sum() == pytest.approx(1.0, abs=1e-12)
    assert np.all(pred.pmf > 0) and np.all(np.diff(pred.support_s) > 0)
    assert pred.support_s[0] == pytest.approx(pred.one_way_s)
    st = pred.statistics()
    assert st["p50_s"] <= st["p95_s"] <= st["p99_s"] <= st["p999_s"]
    assert st["std_s"] > 0


def test_distribution_agrees_with_an_independent_walk():
    """The Monte Carlo walker (plain math, its own transitions) with the ramp: mean within its
    confidence interval, CDF at the model's quartiles and 99th percentile within 0.015."""
    kw = dict(rate_pps=VOIP_F, packet_bytes=174, rtt_s=0.3, loss=0.02, hol_ramp=True)
    pred = solve_params(DelayParams(**kw))
    mc = walk(DelayParams(**kw, backlog_bound_packets=pred.info["backlog_bound_packets"]),
              steps=60_000, batches=30, seed=5)
    assert abs(pred.mean_s - mc.mean_s) <= mc.mean_ci_halfwidth(z=3.0) + 0.01 * pred.mean_s
    for q in (0.5, 0.9, 0.99):
        x = float(pred.quantile(q))
        assert mc.cdf(x) == pytest.approx(float(pred.cdf(x)), abs=0.015), q


@pytest.mark.parametrize("kw, fragment", [
    (dict(hol_ramp="yes"), "hol_ramp: 'yes' is not a boolean"),
    (dict(hol_ramp=True, count_fresh_packets=False), "hol_ramp: needs count_fresh_packets"),
    (dict(count_fresh_packets=[1]), "count_fresh_packets: [1] is not a boolean"),
])
def test_bad_values(kw, fragment):
    with pytest.raises(ParameterError, match=fragment.replace("[", r"\[").replace("]", r"\]")):
        predict("voip", rtt_s=0.1, loss=0.01, **kw)


def test_params_resolve_count_fresh_packets():
    base = dict(rate_pps=50, packet_bytes=174, rtt_s=0.1, loss=0.01)
    assert DelayParams(**base).count_fresh_packets is False
    assert DelayParams(**base, hol_ramp=True).count_fresh_packets is True
    assert DelayParams(**base, hol_ramp=np.bool_(True)).hol_ramp is True
    assert DelayParams(**base, count_fresh_packets=True).hol_ramp is False


def test_cli_flag_and_json():
    def run(*extra):
        out = subprocess.run([sys.executable, "-m", "tcpdelay", "delay", "--profile", "voip", "--rtt-s", "0.3",
                              "--loss", "0.01", "--stack", "paper", "--json", *extra], capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout)
    on, off = run("--hol-ramp"), run()
    assert on["params"]["hol_ramp"] is True and on["params"]["count_fresh_packets"] is True
    assert off["params"]["hol_ramp"] is False and off["params"]["count_fresh_packets"] is False
    assert on["mean_s"] == pytest.approx(predict("voip", rtt_s=0.3, loss=0.01, hol_ramp=True).mean_s, rel=1e-12)
    assert off["mean_s"] == pytest.approx(predict("voip", rtt_s=0.3, loss=0.01).mean_s, rel=1e-12)
    assert on["mean_s"] > off["mean_s"]
