"""A plan the testbed cannot hold is refused in one line (issue 53, item 6): ports past 65,535 or
shared by two flows, and a scenario name that is not one folder inside out/."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tcpdelay.errors import ParameterError
from tcpdelay.experiments.plan import plan_run
from tcpdelay.experiments.scenario import parse_scenario


def _scenario(count: int, **extra) -> dict:
    """``count`` VoIP flows, in entries of at most 200 (a flow entry's own bound)."""
    entries = [{"profile": "voip", "transport": "udp", "count": min(200, count - k)} for k in range(0, count, 200)]
    return {"name": "many", "duration_s": 10, "path": {"rtt_s": 0.05}, "flows": entries, **extra}


def test_media_ports_past_65535_are_refused():
    with pytest.raises(ParameterError, match="past 65,535"):
        plan_run(parse_scenario(_scenario(66_000)), 1)


def test_media_ports_that_reach_another_roles_port_are_refused():
    cross = {"cross": [{"kind": "bulk", "count": 1}]}
    with pytest.raises(ParameterError, match="would give port 30000 to both"):
        plan_run(parse_scenario(_scenario(10_200, **cross)), 1)
    plan_run(parse_scenario(_scenario(100, **cross)), 1)       # a plan that fits is planned


@pytest.mark.parametrize("name", ["../../../tmp/x", "..", ".", "a/b", ".hidden", "-x", "x\n"])
def test_a_scenario_name_that_is_not_one_folder_inside_out_is_refused(name):
    with pytest.raises(ParameterError, match="names the output folder"):
        parse_scenario(_scenario(1) | {"name": name})


def test_dry_run_refuses_a_plan_past_the_ports_in_one_line(tmp_path):
    path = tmp_path / "big.toml"
    path.write_text('name = "big"\nduration_s = 10\n[path]\nrtt_s = 0.05\n'
                    + '[[flows]]\nprofile = "voip"\ntransport = "udp"\ncount = 200\n' * 330)
    out = subprocess.run([sys.executable, "-m", "tcpdelay", "run", str(path), "--dry-run", "--out",
                          str(tmp_path / "out")], capture_output=True, text=True, timeout=300)
    assert out.returncode == 2 and "past 65,535" in out.stderr, out.stderr
    assert "Traceback" not in out.stderr and len(out.stderr.strip().splitlines()) == 1
