"""The stationary solution against an independent Monte Carlo walk of the same chain."""

from __future__ import annotations

import pytest

from tcpdelay.model.delay import DelayParams
from tcpdelay.model.delay.montecarlo import walk
from tcpdelay.model.delay.predict import solve_params

CASES = [
    dict(rate_pps=50, packet_bytes=174, rtt_s=0.1, loss=0.03),
    dict(rate_pps=50, packet_bytes=1448, rtt_s=0.1, loss=0.02),
    dict(rate_pps=50, packet_bytes=1448, rtt_s=0.1, loss=0.02, loss_model="correlated"),
    dict(rate_pps=50, packet_bytes=174, rtt_s=0.02, loss=0.05, queue="bytes", count_fresh_packets=True),
    dict(rate_pps=33.3, packet_bytes=724, rtt_s=0.3, loss=0.005, limited_transmit=False,
         al_fr_backlog="eq4", backlog_rounding="nearest"),
]


@pytest.mark.slow
@pytest.mark.parametrize("kw", CASES, ids=lambda kw: "-".join(f"{v}" for v in kw.values()))
def test_walk_agrees_with_stationary_solution(kw):
    pred = solve_params(DelayParams(**kw))
    # the walk uses the same (possibly grown) truncation bound
    params = DelayParams(**kw, backlog_bound_packets=pred.info["backlog_bound_packets"])
    mc = walk(params, steps=200_000, batches=40, seed=11)
    # mean: within 3 standard errors from batch means (plus 1 % for the batch-means bias)
    half = mc.mean_ci_halfwidth(z=3.0)
    assert abs(pred.mean_s - mc.mean_s) <= half + 0.01 * pred.mean_s, (pred.mean_s, mc.mean_s, half)
    # distribution: CDF at the model's 50/90/99th percentiles within 0.01 absolute
    for q in (0.5, 0.9, 0.99):
        x = float(pred.quantile(q))
        assert mc.cdf(x) == pytest.approx(float(pred.cdf(x)), abs=0.01), (q, x)
