"""A run that loses a part is failed, never complete: the link emulator, the media sender, the
media receiver or a cross-traffic process killed mid-run (real testbed: root and /dev/net/tun).

Each test starts `tcpdelay run` on a short scenario, waits until the media flow has written its
first records (so the kill lands while the flow runs, however fast the machine is), SIGKILLs one
part and checks that the run is failed with a reason naming that part, that nothing of it is
left on the machine, and that a rerun measures it again.
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

import pytest

from tcpdelay.experiments.plan import MEDIA_PORT
from tcpdelay.testbed.netns import unavailable_reason

pytestmark = [pytest.mark.testbed, pytest.mark.slow,
              pytest.mark.skipif(unavailable_reason() is not None, reason=str(unavailable_reason()))]

# ltx0: the media sender (its own TCP settings); ltx1: the bulk flow's server; ltx2: the UDP
# cross-traffic sender; rrx: the media receiver, the bulk client and the UDP sink.
SCENARIO = """
name = "lost-part"
duration_s = {duration}
seed = 3
[path]
rtt_s = 0.02
rate_bps = 10e6
queue_packets = 100
[[flows]]
name = "voip"
profile = "voip"
tcp = {{ preset = "newreno-2008" }}
[[cross]]
kind = "bulk"
tcp = {{ congestion_control = "cubic" }}
[[cross]]
kind = "udp"
rate_bps = 200e3
"""


def _tcpdelay_run(scenario: Path, out: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "tcpdelay", "run", str(scenario), "--out", str(out), "--json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _wait_for_flow(proc: subprocess.Popen, run_dir: Path, timeout_s: float = 60.0) -> dict:
    """The testbed's description once the media flow has written records (it is running)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"the run ended before the flow started: {proc.stderr.read()}")
        env = run_dir / "environment.json"
        if env.exists() and (list(run_dir.glob("flows/0/sent/part-*")) or list(run_dir.glob("sent/part-*"))):
            return json.loads(env.read_text())["testbed"]
        time.sleep(0.05)
    raise AssertionError("the media flow wrote no records")


def _netns_pids(netns: str) -> list[int]:
    out = subprocess.run(["ip", "netns", "pids", netns], capture_output=True, text=True, check=True).stdout
    return [int(p) for p in out.split()]


def _listener_pid(netns: str, port: int) -> int:
    out = subprocess.run(["ip", "netns", "exec", netns, "ss", "-Htlnp", f"sport = :{port}"],
                         capture_output=True, text=True, check=True).stdout
    pids = {int(p) for p in re.findall(r"pid=(\d+)", out)}
    assert len(pids) == 1, out
    return pids.pop()


def _part_pid(part: str, testbed: dict) -> int:
    hosts = testbed["hosts"]
    if part == "emulator":
        return testbed["emulator_pid"]
    if part == "receiver":
        return _listener_pid(hosts["rrx"]["netns"], MEDIA_PORT)
    host = {"sender": "ltx0", "cross-traffic server": "ltx1", "cross-traffic UDP sender": "ltx2"}[part]
    pids = _netns_pids(hosts[host]["netns"])
    assert len(pids) == 1, (host, pids)
    return pids[0]


NAMED = {"emulator": "link emulator tcpdelay-link", "sender": "media sender of flow 0 'voip'",
         "receiver": "media receiver of flow 0 'voip'", "cross-traffic server": "cross-traffic server on host ltx1",
         "cross-traffic UDP sender": "cross-traffic UDP sender of flow 2"}


def _run_and_kill(tmp_path: Path, part: str, duration_s: float = 8.0, extra: str = "") -> tuple[Path, Path, dict, dict]:
    f = tmp_path / "lost.toml"
    f.write_text(SCENARIO.format(duration=duration_s) + extra)
    out = tmp_path / "out"
    proc = _tcpdelay_run(f, out)
    try:
        testbed = _wait_for_flow(proc, out / "seed-3")
        os.kill(_part_pid(part, testbed), signal.SIGKILL)
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 1, stderr
    return f, out, testbed, json.loads(stdout)


@pytest.mark.parametrize("part", ["emulator", "sender", "receiver", "cross-traffic server",
                                  "cross-traffic UDP sender"])
def test_a_run_that_lost_a_part_is_failed_with_the_part_named(tmp_path, part):
    _, out, testbed, doc = _run_and_kill(tmp_path, part)
    run_dir = out / "seed-3"
    assert doc["ran"] == 0 and len(doc["failed"]) == 1
    error = doc["failed"][0]["error"]
    assert error.startswith("RunFailed: the run lost a part: ") and NAMED[part] in error
    assert "killed by SIGKILL" in error
    assert [r["status"] for r in doc["runs"]] == ["failed"] and doc["runs"][0]["error"] == error
    # Recorded as failed, never as complete; what was measured until then is kept.
    assert not (run_dir / "complete.json").exists()
    assert json.loads((run_dir / "failed.json").read_text())["error"] == error
    meta = json.loads((run_dir / "run.json").read_text())
    assert any(NAMED[part] in reason for reason in meta["run"]["failed"])
    assert list(run_dir.glob("sent/part-*"))
    assert not list(run_dir.glob(".*"))  # no temporary file or reserved room left
    # Nothing of the run is left on the machine.
    rid = testbed["run_id"]
    assert not [n for n in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split()
                if n.startswith(f"td-{rid}-")]
    assert not Path(f"/run/tcpdelay/{rid}").exists()


def test_the_one_emulator_serving_access_links_killed_fails_the_run_naming_it(tmp_path):
    """With access links the bottleneck and every host's link are one emulator process: its
    death fails the run, named, with the links it served."""
    _, out, testbed, doc = _run_and_kill(tmp_path, "emulator", extra="[access]\ndelay_s = 0.002\n")
    assert set(testbed["access_links"]) and {a["emulator_pid"] for a in testbed["access_links"].values()} == {
        testbed["emulator_pid"]}
    error = doc["failed"][0]["error"]
    assert error.startswith("RunFailed: the run lost a part: ") and NAMED["emulator"] in error
    assert "killed by SIGKILL" in error and "access links" in error, error
    assert not (out / "seed-3" / "complete.json").exists()


def test_a_failed_run_is_measured_again_by_a_rerun(tmp_path):
    f, out, _, _ = _run_and_kill(tmp_path, "emulator", duration_s=4.0)
    again = subprocess.run([sys.executable, "-m", "tcpdelay", "run", str(f), "--out", str(out), "--json"],
                           capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stderr
    doc = json.loads(again.stdout)
    assert (doc["ran"], doc["skipped"], doc["failed"]) == (1, 0, [])
    assert doc["runs"][0]["status"] == "complete"
    assert (out / "seed-3" / "complete.json").exists() and not (out / "seed-3" / "failed.json").exists()
