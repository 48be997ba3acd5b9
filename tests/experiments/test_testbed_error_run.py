"""A testbed run says when the testbed itself was late (docs/testbed.md, "When the testbed
itself was late"; real testbed: root and /dev/net/tun).

The disturbance is made certain rather than hoped for, and it is the program's own detection
that is judged, not the machine's speed:

* the run's emulator is stopped (SIGSTOP) for 300 ms while the media flow runs (its first
  records are written): with a 200 ms one-way delay every packet the emulator holds then — ten
  of a 50 packets/s flow, 4 % of a 5 s run — is delivered up to 300 ms after its due time, so
  the emulator's own lateness counters put its p99 far above any bound, on any machine;
* a SCHED_FIFO busy loop at a priority above the emulator's is pinned, for 300 ms, to the one
  CPU the run's emulator is pinned to: the emulator, runnable at least every 20 ms, waits on its
  run queue for the rest of that time, which its schedstat shows (the run's ``machine`` part),
  and the packets it holds are late as above;
* a run of the same scenario left alone is not asserted to be on time (a busy machine may make
  it late, rightly); its section is checked for structure and consistency, and its warning for
  agreement with its own verdict.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tcpdelay.results.testbed_error import SEND_LATE_BOUND_US, bound_us
from tcpdelay.testbed.netns import unavailable_reason

pytestmark = [pytest.mark.testbed, pytest.mark.slow,
              pytest.mark.skipif(unavailable_reason() is not None, reason=str(unavailable_reason()))]

DURATION_S = 5.0
#: 200 ms each way: the emulator holds about ten of the flow's packets at any time.
SCENARIO = f"""
name = "late-testbed"
duration_s = {DURATION_S}
seed = 5
[path]
rtt_s = 0.4
rate_bps = 10e6
queue_packets = 100
[[flows]]
name = "voip"
profile = "voip"
transport = "udp"
"""
WARNING = "warning: the testbed itself was late"
STOP_S = 0.3


def _start(tmp_path: Path) -> tuple[subprocess.Popen, Path, Path]:
    f = tmp_path / "late.toml"
    f.write_text(SCENARIO)
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-m", "tcpdelay", "run", str(f), "--out", str(out), "--json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return proc, out, out / "seed-5"


def _wait_for_flow(proc: subprocess.Popen, run_dir: Path, timeout_s: float = 60.0) -> dict:
    """The testbed's description once the media flow has written records (it runs)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"the run ended before the flow started: {proc.stderr.read()}")
        env = run_dir / "environment.json"
        if env.exists() and (list(run_dir.glob("flows/0/sent/part-*")) or list(run_dir.glob("sent/part-*"))):
            return json.loads(env.read_text())["testbed"]
        time.sleep(0.02)
    raise AssertionError("the media flow wrote no records")


def _finish(proc: subprocess.Popen) -> tuple[dict, list[str]]:
    try:
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, stderr
    return json.loads(stdout), [line for line in stderr.splitlines() if WARNING in line]


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tcpdelay", *args], capture_output=True, text=True, timeout=120)


def _assert_late_everywhere(doc: dict, warnings: list[str], run_dir: Path, out: Path, tmp_path: Path) -> dict:
    """The run's warning and JSON, then metrics' and report's: one line each, naming the
    emulator's bottleneck, its value above the bound."""
    assert len(warnings) == 1, warnings
    (row,) = doc["runs"]
    te = row["testbed_error"]
    assert te["recorded"] and te["late"], te
    assert te["component"].startswith("emulator bottleneck "), te
    assert te["p99_us"] > te["bound_us"] >= 250.0
    assert f"{te['p99_us'] / 1e3:.2f} ms" in warnings[0] and te["component"] in warnings[0]
    assert warnings[0].startswith("tcpdelay run: warning:")
    metrics = _cli("metrics", str(run_dir), "--json")
    assert metrics.returncode == 0, metrics.stderr
    assert json.loads(metrics.stdout)["testbed_error"]["late"]
    assert [line for line in metrics.stderr.splitlines() if WARNING in line] == [
        warnings[0].replace("tcpdelay run:", "tcpdelay metrics:")]
    report = _cli("report", str(out), "--out", str(tmp_path / "r.html"), "--json")
    assert report.returncode == 0, report.stderr
    assert len([line for line in report.stderr.splitlines() if WARNING in line]) == 1
    assert json.loads(report.stdout)["testbed_error"]["late_cells"]
    return te["section"]


def test_an_emulator_stopped_mid_run_is_reported_late(tmp_path):
    proc, out, run_dir = _start(tmp_path)
    try:
        testbed = _wait_for_flow(proc, run_dir)
        pid = testbed["emulator_pid"]
        os.kill(pid, signal.SIGSTOP)
        try:
            time.sleep(STOP_S)
        finally:
            os.kill(pid, signal.SIGCONT)
    finally:
        doc, warnings = _finish(proc)
    sec = _assert_late_everywhere(doc, warnings, run_dir, out, tmp_path)
    worst = max(v["max"] for k, v in sec["emulator_lateness_us"].items() if k.startswith("bottleneck"))
    assert worst >= 0.5 * STOP_S * 1e6          # a packet held through most of the stop


@pytest.mark.alone       # its hog holds one of the machine's CPUs for 300 ms: no other test beside it
def test_a_real_time_cpu_hog_beside_the_emulator_is_reported_late(tmp_path):
    """SCHED_FIFO 50 (above the emulator's 20) on the emulator's one CPU for 300 ms."""
    proc, out, run_dir = _start(tmp_path)
    hog = None
    try:
        testbed = _wait_for_flow(proc, run_dir)
        pid = testbed["emulator_pid"]
        cpu = min(os.sched_getaffinity(pid))
        for tid in os.listdir(f"/proc/{pid}/task"):
            os.sched_setaffinity(int(tid), {cpu})
        hog = subprocess.Popen([sys.executable, "-c", (
            "import os, time\n"
            f"os.sched_setaffinity(0, {{{cpu}}})\n"
            "os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(50))\n"
            f"end = time.monotonic() + {STOP_S}\n"
            "while time.monotonic() < end:\n"
            "    pass\n")])
        assert hog.wait(timeout=30) == 0
    finally:
        if hog is not None and hog.poll() is None:
            hog.kill()
        doc, warnings = _finish(proc)
    sec = _assert_late_everywhere(doc, warnings, run_dir, out, tmp_path)
    # the emulator was runnable and kept waiting while the hog held its CPU: its schedstat says so
    wait = sec["machine"]["throttling"]["processes"]["emulator"]
    assert wait["runqueue_wait_us"] >= 0.5 * STOP_S * 1e6, wait


def test_a_run_left_alone_records_a_consistent_section_and_warns_only_by_its_verdict(tmp_path):
    proc, out, run_dir = _start(tmp_path)
    doc, warnings = _finish(proc)
    (row,) = doc["runs"]
    te = row["testbed_error"]
    sec = te["section"]
    meta = json.loads((run_dir / "run.json").read_text())
    assert meta["testbed_error"] == sec
    assert json.loads((run_dir / "complete.json").read_text())["format_version"] >= 3
    # the emulator's every link and direction, each p99 at most its max
    lat = sec["emulator_lateness_us"]
    assert set(lat) == {"bottleneck a_to_b", "bottleneck b_to_a"}
    for v in lat.values():
        assert v["p99"] is not None and 0 <= v["p99"] <= v["max"] + 1e-9
    # the sender timed every packet it produced against its schedule
    tx = meta["run"]["media"][0]["sender"]
    send = sec["send_lateness_us"]["0"]
    assert send == tx["send_lateness_us"] and send["count"] == tx["packets"] == 250
    assert 0 <= send["p99"] <= send["max"]
    assert sec["recv_lag_us"] == {}              # the Python receiver does not measure it
    # the machine over the run's span
    m = sec["machine"]
    assert DURATION_S - 0.5 <= m["span_s"] <= DURATION_S + 30
    if m["cpu_pressure"] is not None:
        p = m["cpu_pressure"]
        assert 0 <= p["full_stall_us"] <= p["some_stall_us"] <= m["span_s"] * 1e6 * (os.cpu_count() or 1)
    assert m["throttling"]["processes"]["emulator"]["runqueue_wait_us"] >= 0
    # the bound's scale: the smallest delay measured, at least the configured 200 ms one way
    assert 0.2 <= sec["smallest_delay_s"] < 0.3 and te["bound_us"] in (bound_us(sec["smallest_delay_s"]),
                                                                         SEND_LATE_BOUND_US)
    # one warning line exactly when the verdict is late
    assert len(warnings) == (1 if te["late"] else 0), (te, warnings)
