"""A testbed run fixes its start instant once its programs are ready (tcpdelay.start_gate):
which runs do, and in a real run a program slow to start holds the start back rather than
starting late."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tcpdelay.experiments.backends import testbed as testbed_backend
from tcpdelay.experiments.plan import plan_run
from tcpdelay.experiments.scenario import load_scenario, parse_scenario
from tcpdelay.records import read_records

ROOT = Path(__file__).resolve().parents[2]


def test_runs_whose_start_is_tied_to_something_else_keep_a_margin_fixed_in_advance():
    def plan(name):
        return plan_run(load_scenario(ROOT / "experiments" / f"{name}.toml"), seed=1)

    assert testbed_backend.starts_when_ready(plan("audio-bulk"), {})
    assert testbed_backend.starts_when_ready(plan("aqm-5.3"), {})
    assert not testbed_backend.starts_when_ready(plan("voip-outage"), {})           # a timed link
    assert not testbed_backend.starts_when_ready(plan("video-tcp-variants-5b"), {})  # HTTP streams
    assert not testbed_backend.starts_when_ready(plan("audio-bulk"), {"tx:0": object()})  # a guest's end


def _testbed_unavailable() -> str | None:
    from tcpdelay.testbed.netns import unavailable_reason

    return unavailable_reason()


SLOW_S = 3.0   # past the most a fixed margin for two programs ever was (0.36 s × MAX_BUSY_FACTOR)


def _slow_bulk_client(*args, **kwargs):
    """A bulk client that takes SLOW_S to get going, as a program on a loaded machine may."""
    from tcpdelay.traffic import bulk

    time.sleep(SLOW_S)
    return bulk.client(*args, **kwargs)


@pytest.mark.skipif(_testbed_unavailable() is not None, reason=f"needs the testbed: {_testbed_unavailable()}")
@pytest.mark.testbed
def test_a_program_slow_to_start_holds_the_start_back(tmp_path, monkeypatch):
    """The run's cross-traffic client takes 3 s to be ready, past any margin fixed in advance
    would be given: the run starts after it is ready, and every flow starts on time."""
    from tcpdelay.experiments.run import run_scenario

    def start_slow_bulk(tb, c, start_at, dur):
        x = c.cross
        return tb.hosts[c.client].spawn(_slow_bulk_client, tb.hosts[c.server].address, c.port, duration_s=dur,
                                        size_bytes=x.size_bytes, start_at=start_at, drain_s=1.0)

    monkeypatch.setitem(testbed_backend.CROSS_STARTERS, "bulk", start_slow_bulk)
    sc = parse_scenario({
        "name": "slow-start", "duration_s": 1.5,
        "path": {"rtt_s": 0.04, "forward": {"rate_bps": 10e6, "queue_packets": 100}},
        "flows": [{"name": "voip", "profile": "voip", "transport": "tcp"}],
        "cross": [{"kind": "bulk", "size_bytes": 200_000, "start_s": 0.2}],
    })
    t = time.monotonic()
    totals = run_scenario(sc, 1, tmp_path)
    assert totals["errors"] == []
    run = json.loads((tmp_path / "run.json").read_text())["run"]
    t0 = run["t0_monotonic_s"]
    # the start waited for the slow client (a margin fixed in advance: 0.36 s, times the busy factor)
    assert t0 - t >= SLOW_S
    # ... which then started at its own instant, t0 + 0.2 s, and fetched its bytes
    cross = run["cross"][0]["result"]
    assert cross["bytes"] == 200_000, cross
    # the media flow's first packet left at t0, not before it
    sent = read_records(tmp_path, "sent")
    first_s = min(sent["send_time_s"].to_pylist())
    assert t0 - 1e-3 <= first_s, (first_s, t0)
