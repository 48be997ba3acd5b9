"""Grouped media endpoints (tcpdelay.testbed.grouped_endpoints): one process for every flow's
sender and one for every receiver, a thread per flow end inside its own host's namespace. Real
namespaces, the real emulator, kernel TCP and UDP (root and /dev/net/tun).

The records a grouped run writes have the shape of a run with a process per flow end; a flow's
delays are those of the path it was given; a killed group fails the run naming it, and leaves
nothing behind.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from tcpdelay.errors import EnvironmentNotSupported, ParameterError
from tcpdelay.experiments.scenario import parse_scenario
from tcpdelay.records import read_records
from tcpdelay.native import engine
from tcpdelay.testbed.grouped_endpoints import ENDPOINTS_ENV, GROUPED_FROM_FLOWS, endpoints_mode
from tcpdelay.testbed.netns import unavailable_reason

needs_testbed = pytest.mark.skipif(unavailable_reason() is not None, reason=str(unavailable_reason()))

#: Two UDP VoIP flows and one over TCP, 30 ms one way.
SCENARIO = {"name": "grouped", "duration_s": 3.0, "seed": 5,
            "path": {"delay_s": 0.03, "rate_bps": 10e6, "queue_packets": 100},
            "flows": [{"name": "voip", "profile": "voip", "transport": "udp", "count": 2},
                      {"name": "voiptcp", "profile": "voip"}]}


def _run(tmp: Path, endpoints: str, monkeypatch, scenario: dict = SCENARIO) -> Path:
    from tcpdelay.experiments.run import run_scenario

    monkeypatch.setenv(ENDPOINTS_ENV, endpoints)
    totals = run_scenario(parse_scenario(scenario), scenario["seed"], tmp)
    assert totals["errors"] == [], totals
    env = json.loads((tmp / "environment.json").read_text())
    assert env["media_endpoints"] == endpoints
    return tmp


def _layout(rd: Path) -> dict:
    """Record kind -> {writer: the columns and types of its parts}, and the flow directories."""
    kinds: dict[str, dict[str, set]] = {}
    for part in sorted(rd.glob("*/part-*.parquet")):
        writer = re.sub(r"-\d+\.parquet$", "", part.name)
        schema = pq.read_schema(part)
        kinds.setdefault(part.parent.name, {}).setdefault(writer, set()).add(
            tuple((f.name, str(f.type)) for f in schema))
    flows = sorted(str(p.relative_to(rd)) for p in (rd / "flows").glob("*/*") if not p.name.startswith("."))
    return {"records": kinds, "flows": flows}


@needs_testbed
@pytest.mark.testbed
@pytest.mark.slow
def test_a_grouped_runs_records_have_the_shape_of_a_run_with_a_process_per_flow_end(tmp_path, monkeypatch):
    per = _run(tmp_path / "per-flow", "per-flow", monkeypatch)
    grouped = _run(tmp_path / "grouped", "grouped", monkeypatch)
    a, b = _layout(per), _layout(grouped)
    assert set(a["records"]) >= {"sent", "received", "tcp_state"}
    assert a == b
    assert pq.read_schema(per / "flows.parquet") == pq.read_schema(grouped / "flows.parquet")
    # the same source packets per flow (the sources are seeded), every one received
    for rd in (per, grouped):
        sent, received = read_records(rd, "sent"), read_records(rd, "received")
        assert sorted(set(sent.column("flow_id").to_pylist())) == [0, 1, 2]
        assert set(received.column("flow_id").to_pylist()) == {0, 1, 2}
    count = lambda rd, kind: np.bincount(read_records(rd, kind).column("flow_id").to_numpy())  # noqa: E731
    assert list(count(per, "sent")) == list(count(grouped, "sent"))
    # run.json: every flow end answered as a process of its own does, realtime included
    ma = json.loads((per / "run.json").read_text())["run"]["media"]
    mb = json.loads((grouped / "run.json").read_text())["run"]["media"]
    assert [sorted(m["sender"]) for m in ma] == [sorted(m["sender"]) for m in mb]
    assert [m["sender"]["status"] for m in mb] == ["completed"] * 3
    assert [m["sender"]["realtime"] for m in mb] == [m["sender"]["realtime"] for m in ma]
    # the TCP flow's loss-recovery counters are read in its own host's namespace (thread-self)
    assert set(mb[2]["sender"]["tcp_counters"]) == set(ma[2]["sender"]["tcp_counters"]) != set()


@needs_testbed
@pytest.mark.testbed
@pytest.mark.slow
def test_a_grouped_flows_delays_are_those_of_its_path(tmp_path, monkeypatch):
    """Each flow end on a host of its own (access links): every flow's packets left through its
    sender's access link and arrived through its receiver's (a thread outside its host's
    namespace would send from, or fail to listen in, another host); no packet arrives sooner
    than the path's 5 + 30 + 5 ms one way plus its serialization on the three 10-Mb/s links,
    and each flow's median is the path's, not twice it. Each side in two groups (at most two
    flow ends each)."""
    from tcpdelay.testbed import grouped_endpoints

    monkeypatch.setattr(grouped_endpoints, "MAX_GROUP_MEMBERS", 2)   # two groups of each side
    scenario = {**SCENARIO, "access": {"rate_bps": 10e6, "delay_s": 0.005}}
    rd = _run(tmp_path, "grouped", monkeypatch, scenario)
    sent, received = read_records(rd, "sent"), read_records(rd, "received")
    col = lambda t, c: t.column(c).to_numpy()  # noqa: E731
    sent_at = dict(zip(zip(col(sent, "flow_id").tolist(), col(sent, "seq").tolist()), col(sent, "send_time_s").tolist()))
    keys = list(zip(col(received, "flow_id").tolist(), col(received, "seq").tolist()))
    # each received packet is one its own flow's sender recorded, with the same send time
    assert [sent_at.get(k) for k in keys] == col(received, "send_time_s").tolist()
    assert set(col(received, "flow_id").tolist()) == {0, 1, 2} and len(keys) > 0.9 * sent.num_rows
    delay = col(received, "recv_time_s") - col(received, "send_time_s")
    excess = delay - (0.04 + 3 * col(received, "size_bytes") * 8 / 10e6)
    assert (excess >= 0).all(), excess.min()
    run = json.loads((rd / "run.json").read_text())["run"]
    access = run["link_counters"]["access"]
    hosts = {(m["sender_host"], m["receiver_host"]) for m in run["media"]}
    assert len(hosts) == 3 and len({h for pair in hosts for h in pair}) == 6
    for m in run["media"]:
        flow = m["flow_id"]
        assert np.median(excess[col(received, "flow_id") == flow]) < 0.04, flow
        assert access[m["sender_host"]]["a_to_b"]["packets_in"] >= (col(sent, "flow_id") == flow).sum()
        assert access[m["receiver_host"]]["b_to_a"]["packets_in"] >= (col(received, "flow_id") == flow).sum()


SCENARIO_TOML = """
name = "grouped-kill"
duration_s = 8
seed = 3
[path]
rtt_s = 0.02
rate_bps = 10e6
queue_packets = 100
[[flows]]
name = "voip"
profile = "voip"
transport = "udp"
count = 2
"""


def _wait_for_flow(proc: subprocess.Popen, run_dir: Path, timeout_s: float = 60.0) -> dict:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"the run ended before the flows started: {proc.stderr.read()}")
        env = run_dir / "environment.json"
        if env.exists() and list(run_dir.glob("flows/*/sent/part-*")):
            return json.loads(env.read_text())["testbed"]
        time.sleep(0.05)
    raise AssertionError("the media flows wrote no records")


@needs_testbed
@pytest.mark.testbed
@pytest.mark.slow
@pytest.mark.parametrize("side,host", [("senders", "ltx0"), ("receivers", "rrx")])
def test_a_killed_group_fails_the_run_naming_it_and_leaves_nothing(tmp_path, side, host):
    f = tmp_path / "kill.toml"
    f.write_text(SCENARIO_TOML)
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-m", "tcpdelay", "run", str(f), "--out", str(out), "--json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, ENDPOINTS_ENV: "grouped"})
    try:
        testbed = _wait_for_flow(proc, out / "seed-3")
        ns = testbed["hosts"][host]["netns"]
        pids = [int(p) for p in subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True,
                                               check=True).stdout.split()]
        assert len(pids) == 1, (host, pids)      # the group: one process for both flows' ends
        os.kill(pids[0], signal.SIGKILL)
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 1, stderr
    error = json.loads(stdout)["failed"][0]["error"]
    assert error.startswith("RunFailed: the run lost a part: "), error
    assert f"the grouped media {side} process (pid {pids[0]}, serving 2 flow ends): killed by SIGKILL" in error
    assert not (out / "seed-3" / "complete.json").exists()
    rid = testbed["run_id"]
    assert not [n for n in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split()
                if n.startswith(f"td-{rid}-")]
    assert not Path(f"/run/tcpdelay/{rid}").exists()
    with pytest.raises(ProcessLookupError):
        os.kill(pids[0], 0)


def test_the_endpoints_choice(monkeypatch):
    monkeypatch.delenv(ENDPOINTS_ENV, raising=False)
    assert endpoints_mode(GROUPED_FROM_FLOWS - 1) == "per-flow"
    assert endpoints_mode(GROUPED_FROM_FLOWS) == "native"      # make test builds tcpdelay-endpoint
    monkeypatch.setattr(engine, "BINARY", "tcpdelay-endpoint-not-built")
    assert endpoints_mode(GROUPED_FROM_FLOWS) == "grouped"      # no endpoint: grouped on Python
    monkeypatch.setenv(engine.BINARY_ENV, "/nonexistent/tcpdelay-endpoint")
    with pytest.raises(EnvironmentNotSupported, match="is not an executable file"):
        endpoints_mode(GROUPED_FROM_FLOWS)                     # named and missing: said, not hidden
    monkeypatch.delenv(engine.BINARY_ENV)
    monkeypatch.setenv(ENDPOINTS_ENV, "grouped")
    assert endpoints_mode(1) == "grouped"
    monkeypatch.setenv(ENDPOINTS_ENV, "per-flow")
    assert endpoints_mode(500) == "per-flow"
    monkeypatch.setenv(ENDPOINTS_ENV, "some")
    with pytest.raises(ParameterError, match=f"^{ENDPOINTS_ENV}: 'some' is not one of auto, grouped, per-flow, native$"):
        endpoints_mode(3)
