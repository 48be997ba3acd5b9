"""The scenario's ``tcp_state_period_s``: default, plan, cell id, bad values."""

import pytest

from tcpdelay.errors import ParameterError
from tcpdelay.experiments.plan import plan_run
from tcpdelay.experiments.scenario import DEFAULT_TCP_STATE_PERIOD_S, parse_scenario
from tcpdelay.experiments.sweep import cell_id

BASE = {"duration_s": 2.0, "flows": [{"profile": "voip"}]}


def test_default_period_reaches_the_plan_and_is_not_written_back():
    sc = parse_scenario(dict(BASE))
    assert sc.tcp_state_period_s is None and "tcp_state_period_s" not in sc.to_data()
    assert plan_run(sc, 1).tcp_state_period_s == DEFAULT_TCP_STATE_PERIOD_S == 0.01


@pytest.mark.parametrize("period", [0.0, 0.05])
def test_a_period_is_planned_and_does_not_change_the_cell_id(period):
    sc = parse_scenario({**BASE, "tcp_state_period_s": period})
    assert plan_run(sc, 1).tcp_state_period_s == period
    assert cell_id(sc) == cell_id(parse_scenario(dict(BASE)))


@pytest.mark.parametrize("period", [-0.01, 61, "fast"])
def test_a_bad_period_is_one_clear_error(period):
    with pytest.raises(ParameterError, match="tcp_state_period_s"):
        parse_scenario({**BASE, "tcp_state_period_s": period})
