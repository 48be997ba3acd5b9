"""Run one scenario once (one seed): plan -> backend -> record.

:func:`run_scenario` is a :data:`tcpdelay.experiments.sweep.CellRunner`. It

1. plans the run (:func:`tcpdelay.experiments.plan.plan_run`, pure): hosts, link, the placement,
   ports and seeds of every media and cross-traffic flow;
2. runs the plan on an execution backend looked up by name
   (:func:`tcpdelay.experiments.backends.get_backend`; ``"testbed"``, real Linux TCP in
   namespaces through the link emulator, :mod:`tcpdelay.experiments.backends.testbed`;
   ``"ns3"``, the same plan simulated, :mod:`tcpdelay.experiments.backends.ns3`);
3. writes the run's record into ``run_dir`` (:mod:`tcpdelay.experiments.record`): ``scenario.toml``
   and ``environment.json`` first, the per-packet records (``sent/``, ``received/``) as the run
   goes, at the end ``flows.parquet``, ``run.json`` and ``metrics.json``.

A run that loses a part is failed (:class:`RunFailed`, naming the part): what still runs is
interrupted; records, ``flows.parquet`` and ``run.json`` with ``run.failed`` are kept.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable

from tcpdelay.experiments import record
from tcpdelay.experiments.backends import BackendJob, RunFailed, get_backend, part_name
from tcpdelay.experiments.plan import (
    CROSS_TCP_PORT, CROSS_UDP_PORT, LEAD_S, MEDIA_PORT, CrossPlan, MediaPlan, RunPlan, derive_seed,
    host_tcp_settings, media_source, plan_run,
)
from tcpdelay.experiments.scenario import Scenario

__all__ = ["CROSS_TCP_PORT", "CROSS_UDP_PORT", "LEAD_S", "MEDIA_PORT", "CrossPlan", "MediaPlan", "RunFailed",
           "RunPlan", "derive_seed", "host_tcp_settings", "media_source", "part_name", "plan_run", "run_scenario"]


def run_scenario(scenario: Scenario, seed: int, run_dir: str | os.PathLike, *,
                 on_progress: Callable[[float, float], None] | None = None, backend: str = "testbed") -> dict:
    """Run ``scenario`` once with ``seed`` into ``run_dir`` on the named ``backend``; return the
    run's totals (the summary's, also in run.json). ``on_progress(elapsed_s, total_s)`` is
    called about once a second. Raises :class:`RunFailed` (after writing the record) when the
    run lost a part."""
    runner = get_backend(backend)
    runner.check()
    plan = plan_run(scenario, seed)
    if plan.timed_link and runner.lead_s(plan) != plan.lead_s:
        plan = plan_run(scenario, seed, lead_s=runner.lead_s(plan))
    runner.check_plan(plan)          # what the backend cannot run: one line, nothing written
    rd = Path(run_dir)
    rd.mkdir(parents=True, exist_ok=True)
    record.write_scenario(rd, scenario)
    outcome = runner.run(BackendJob(plan=plan, run_dir=rd, on_progress=on_progress,
                                    on_environment=lambda env: record.write_environment(rd, env)))
    summary = record.write_run_record(rd, plan, outcome)
    if outcome.lost:
        raise RunFailed(outcome.lost)
    return record.write_metrics(rd, plan, summary["totals"])
