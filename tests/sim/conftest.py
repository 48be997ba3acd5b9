"""The ns-3 tests use the session's shared ns-3 worker (tests/conftest.py: ns-3 is imported once per run of pytest)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tcpdelay.sim.job import Job, MediaJob, host_tcp


@pytest.fixture(scope="session")
def worker():
    from tcpdelay.sim.worker import shared_worker

    return shared_worker()


@pytest.fixture
def simulate(worker, tmp_path):
    """Run a job (``Job`` with its out_dir under tmp_path); returns (result dict, out dir)."""
    def run(job: Job) -> tuple[dict, Path]:
        out = Path(job.out_dir)
        out.mkdir(parents=True, exist_ok=True)
        path = out / "job.json"
        path.write_text(json.dumps(job.to_dict()))
        answer = worker.run(path)
        assert answer["exit"] == 0, (out / "error.txt").read_text() if (out / "error.txt").exists() else answer
        return json.loads((out / "result.json").read_text()), out
    return run


@pytest.fixture
def udp_job():
    return make_udp_job


def make_udp_job(tmp_path: Path, name: str, link: dict, at_s, size_bytes, *, seed: int = 1, duration_s: float | None = None,
            t0_s: float = 1.0) -> Job:
    """One UDP flow of the given packets (times after t0) from a left host to a right host."""
    out = tmp_path / name
    out.mkdir(parents=True, exist_ok=True)
    at_s = np.asarray(at_s, float)
    np.savez(out / "packets.npz", at_s=at_s, size_bytes=np.asarray(size_bytes, np.int64))
    tcp = host_tcp({}).__dict__
    return Job(seed=seed, duration_s=duration_s or float(at_s.max()) + 1.0, t0_s=t0_s, link=link, out_dir=str(out),
               hosts=[{"name": "ltx", "side": "left", "tcp": tcp}, {"name": "rrx", "side": "right", "tcp": tcp}],
               media=[MediaJob(0, "ltx", "rrx", "udp", 20000, 0.0, float(at_s.max()) + 0.5, str(out / "packets.npz"))],
               tcp_state_period_s=0.0, queue_period_s=0.001)
