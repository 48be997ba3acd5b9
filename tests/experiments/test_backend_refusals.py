"""What a backend cannot run is refused before anything starts, the same by ``--dry-run`` as by
the run (issue 27, defect 5), and all of it at once in one line: for every scenario file of
``experiments/`` and every backend, ``sweep --dry-run`` and ``run --dry-run`` refuse exactly when
a run of some cell would refuse its plan (the backend's ``check_plan``, which ``run_scenario``
calls before it writes), naming every problem any cell has."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tcpdelay.errors import ParameterError
from tcpdelay.experiments.backends import get_backend
from tcpdelay.experiments.plan import plan_run
from tcpdelay.experiments.run import run_scenario
from tcpdelay.experiments.scenario import load_scenario, parse_scenario
from tcpdelay.experiments.sweep import expand

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = sorted((ROOT / "experiments").glob("*.toml"))
BACKENDS = ("testbed", "ns3")


def _run_refusals(scenario, backend: str) -> tuple[list[str], set[str]]:
    """What the runs of ``scenario``'s grid refuse when they start (every cell, every seed), by
    the backend's own check: the messages (empty if every run would start), and every problem
    they name (its ``what``)."""
    runner = get_backend(backend)
    found, problems = [], set()
    for cell in expand(scenario):
        for seed in cell.scenario.seed_list:
            plan = plan_run(cell.scenario, seed)
            try:
                runner.check_plan(plan)
            except ParameterError as err:
                found.append(str(err))
                problems |= {p.what for p in runner.unsupported(plan)}
    return found, problems


def _dry(cli_exit, capsys, *args) -> tuple[int, str, str]:
    code = cli_exit(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.stem)
def test_a_dry_run_refuses_exactly_what_the_runs_refuse(path, backend, cli_exit, capsys, tmp_path):
    runs, problems = _run_refusals(load_scenario(path), backend)
    code, out, err = _dry(cli_exit, capsys, "sweep", str(path), "--backend", backend, "--dry-run",
                          "--out", str(tmp_path / "o"), "--json")
    assert not (tmp_path / "o").exists()
    if not runs:
        assert code == 0, err
        assert json.loads(out)["dry_run"] is True
        return
    assert code == 2 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    for what in problems:                # every problem of every refused run, in the one line
        assert what in lines[0], (what, lines[0])


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.stem)
def test_run_dry_run_refuses_exactly_what_the_run_refuses(path, backend, cli_exit, capsys, tmp_path):
    """``run`` runs the scenario as written (its [sweep] ignored): only that cell counts."""
    sc = load_scenario(path, sweep=False).model_copy(update={"sweep": {}})
    runs, problems = _run_refusals(sc, backend)
    code, out, err = _dry(cli_exit, capsys, "run", str(path), "--backend", backend, "--dry-run",
                          "--out", str(tmp_path / "o"), "--json")
    assert not (tmp_path / "o").exists()
    assert (code == 2) == bool(runs), err
    if runs:
        assert len(err.strip().splitlines()) == 1 and all(what in err for what in problems)
    else:
        doc = json.loads(out)
        assert doc["command"] == "run" and doc["cells"] == 1 and {r["status"] for r in doc["runs"]} == {"planned"}


def test_westwood_on_ns3_is_refused_by_the_dry_run_naming_its_cells(cli_exit, capsys, tmp_path):
    path = ROOT / "experiments" / "mpeg4-4.2-westwood-reduced.toml"
    code, out, err = _dry(cli_exit, capsys, "sweep", str(path), "--backend", "ns3", "--dry-run",
                          "--out", str(tmp_path / "o"))
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1
    assert "congestion control 'westwood' is not in ns-3 3.44" in err
    assert "3 of 6 cells: those with flows[0].tcp.congestion_control='westwood'" in err
    assert "westwood+" in err                                  # what ns-3 has, said once
    assert err.count("ns-3 3.44 has:") == 1


def test_pulled_streams_on_ns3_are_refused_by_the_dry_run(cli_exit, capsys, tmp_path):
    path = ROOT / "experiments" / "video-tcp-variants-5a-reduced.toml"
    code, _, err = _dry(cli_exit, capsys, "sweep", str(path), "--backend", "ns3", "--dry-run",
                        "--out", str(tmp_path / "o"))
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "pulled streams" in err
    for cc in ("compound", "ccp", "ccpd"):                     # and every variant ns-3 lacks, at once
        assert f"congestion control '{cc}' is not in ns-3 3.44" in err


@pytest.mark.parametrize("dry", [True, False])
@pytest.mark.parametrize("command", ["run", "sweep"])
def test_every_feature_ns3_lacks_is_named_at_once(command, dry, cli_exit, capsys, tmp_path):
    """voip-outage's linux-default stack asks for RACK and TLP: both in one line, not one per
    attempt; the same whether a dry run or the real command meets it (nothing is written)."""
    path = ROOT / "experiments" / "voip-outage.toml"
    code, _, err = _dry(cli_exit, capsys, command, str(path), "--backend", "ns3", "--out", str(tmp_path / "o"),
                        *(["--dry-run"] if dry else []))
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "rack: ns-3 3.44 has no RACK" in err and "tlp: ns-3 3.44 has no tail loss probe" in err
    assert not (tmp_path / "o").exists()


def test_a_run_refuses_every_problem_of_its_plan_at_once_and_writes_nothing(tmp_path):
    sc = parse_scenario({
        "duration_s": 5, "path": {"rtt_s": 0.1, "forward": {"aqm": {"discipline": "codel", "ecn": True},
                                                           "outages": [{"at_s": 1.0, "duration_s": 0.5}]}},
        "flows": [{"name": "a", "profile": "voip",
                   "tcp": {"congestion_control": "westwood", "rack": True, "tlp": True, "ecn": True,
                           "notsent_lowat_bytes": 16384}},
                  {"name": "b", "profile": "voip", "heuristics": {"keepalive": True}}],
    })
    with pytest.raises(ParameterError) as err:
        run_scenario(sc, 1, tmp_path / "run", backend="ns3")
    text = str(err.value)
    assert "\n" not in text
    for what in ("'westwood' is not in ns-3 3.44", "has no RACK", "has no tail loss probe",
                 "flow 'a': tcp.notsent_lowat_bytes", "flow 'b': heuristics.keepalive",
                 "link: a_to_b.aqm codel with outages"):
        assert what in text, what
    assert not (tmp_path / "run").exists()


def test_a_problem_of_many_hosts_is_said_once():
    from tcpdelay.experiments.backends import Unsupported, refusal

    text = refusal("ns3", [Unsupported("rack: no", f"host h{i}") for i in range(5)] + [Unsupported("x", "link")])
    assert text.startswith("backend ns3 cannot run this: hosts h0, h1, h2 and 2 more: rack: no; link: x")
