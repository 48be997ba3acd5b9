"""A scenario planned today gives what it gave before the one-house restructuring (issue 10):
the emulator's settings file byte for byte, the same hosts and flow placement, and the same
first packets from every media source. The files under ``tests/data/plan-golden`` were written
by the code before the restructuring (the first six cells of every committed experiment, with
their first seed; scenarios added since were written when they were added); this test rebuilds
each one through today's code path."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from tcpdelay.experiments.run import media_source, plan_run
from tcpdelay.experiments.scenario import load_scenario
from tcpdelay.experiments.sweep import expand
from tcpdelay.testbed.emulator import emulator_config

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "data" / "plan-golden"
EXPERIMENTS = sorted(p.name for p in GOLDEN.iterdir())


def test_every_committed_experiment_has_its_golden_plans():
    assert EXPERIMENTS == sorted(p.stem for p in (ROOT / "experiments").glob("*.toml"))


@pytest.mark.parametrize("name", EXPERIMENTS)
def test_plan_and_emulator_file_are_unchanged(name):
    cells = expand(load_scenario(ROOT / "experiments" / f"{name}.toml"))[:6]
    expected = sorted(p.name.split(".")[0] for p in (GOLDEN / name).glob("*.link.json"))
    assert sorted(c.id for c in cells) == expected
    for cell in cells:
        seed = cell.scenario.seed_list[0]
        plan = plan_run(cell.scenario, seed)
        spec = plan.testbed_spec(seed)
        config = emulator_config(spec, ("ns-a", "tun-a"), ("ns-b", "tun-b"), "/state")
        # a trace file is named by its absolute path, which depends on where the repository lies
        text = json.dumps(config, indent=2).replace(str(ROOT), "<repo>")
        assert text == (GOLDEN / name / f"{cell.id}.link.json").read_text(), cell.id
        want = json.loads((GOLDEN / name / f"{cell.id}.plan.json").read_text())
        assert plan.hosts == want["hosts"], cell.id
        got_media = [{k: getattr(m, k) for k in ("flow_id", "name", "sender", "receiver", "port",
                                                  "start_s", "stop_s", "seed")} for m in plan.media]
        got_cross = [{k: getattr(c, k) for k in ("flow_id", "name", "kind", "server", "client", "port",
                                                  "start_s", "stop_s", "seed")} for c in plan.cross]
        assert got_media == want["media"] and got_cross == want["cross"], cell.id
        got_streams = [{k: getattr(s, k) for k in ("flow_id", "name", "server", "client", "port", "start_s", "stop_s")}
                       for s in plan.streams]
        assert got_streams == want.get("streams", []), cell.id
        for m in plan.media:
            packets = [list(p) for p in itertools.islice(media_source(m.flow).packets(m.stop_s - m.start_s, m.seed), 20)]
            assert packets == want["packets"][m.name], (cell.id, m.name)
