"""Nothing is lost silently: a run whose disk fills up is failed with its failed.json written and
the JSON consistent; an orchestrator killed outright leaves no process behind once `testbed
clean` ran (real testbed and a real small tmpfs: root and /dev/net/tun)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tcpdelay.testbed.netns import pids_in_netns, process_alive, unavailable_reason
from tcpdelay.testbed.runs import read_state

pytestmark = [pytest.mark.testbed, pytest.mark.slow,
              pytest.mark.skipif(unavailable_reason() is not None, reason=str(unavailable_reason()))]

TCPDELAY = [sys.executable, "-m", "tcpdelay"]

SCENARIO = """
name = "full"
duration_s = {duration}
seed = 4
[path]
rtt_s = 0.02
rate_bps = 10e6
queue_packets = 100
[[flows]]
name = "voip"
profile = "voip"
[[cross]]
kind = "bulk"
tcp = {{ congestion_control = "cubic" }}
[[cross]]
kind = "web_onoff"
[[cross]]
kind = "udp"
rate_bps = 200e3
{extra}
"""


def _wait_for(path_glob, root: Path, proc: subprocess.Popen, timeout_s: float = 60.0) -> list[Path]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = list(root.glob(path_glob))
        if found:
            return found
        assert proc.poll() is None, f"the run ended early: {proc.stderr.read()}"
        time.sleep(0.05)
    raise AssertionError(f"{path_glob} never appeared under {root}")


def test_a_disk_that_fills_up_mid_run_still_gets_failed_json_and_a_consistent_json(tmp_path, tmpfs):
    f = tmp_path / "full.toml"
    f.write_text(SCENARIO.format(duration=4, extra=""))
    with tmpfs.mounted(tmp_path / "disk") as disk:
        out = disk / "out"
        proc = subprocess.Popen(TCPDELAY + ["run", str(f), "--out", str(out), "--json"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            _wait_for("seed-4/environment.json", out, proc)
            tmpfs.fill(disk)  # from here on every write of the run fails
            stdout, stderr = proc.communicate(timeout=120)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        assert proc.returncode == 1, stderr
        assert "Traceback" not in stderr
        doc = json.loads(stdout)
        run_dir = out / "seed-4"
        assert len(doc["failed"]) == 1 and "No space left on device" in doc["failed"][0]["error"], (doc["failed"], (out / "seed-4" / "failed.json").read_text() if (out / "seed-4" / "failed.json").exists() else None)
        row = doc["runs"][0]
        assert row["status"] == "failed" and row["error"] == doc["failed"][0]["error"]
        assert row["failed_marker"] is True
        marker = json.loads((run_dir / "failed.json").read_text())
        assert "No space left on device" in marker["error"] and marker["seed"] == 4
        assert not (run_dir / "complete.json").exists()
        # No empty temporary file, no reserved room left (the flows' run.json locks are no data).
        assert not [p.name for p in run_dir.rglob(".*") if p.name != ".run.json.lock"]
        env = json.loads((run_dir / "environment.json").read_text())
        rid = env["testbed"]["run_id"]
        assert not Path(f"/run/tcpdelay/{rid}").exists()
        # A rerun with room again measures it (the failed run is not taken as measured).
        (disk / "filler").unlink()
        again = subprocess.run(TCPDELAY + ["run", str(f), "--out", str(out), "--json"],
                               capture_output=True, text=True, timeout=120)
        assert again.returncode == 0, again.stderr
        assert json.loads(again.stdout)["runs"][0]["status"] == "complete"


def test_a_full_disk_before_the_run_is_one_line(tmp_path, tmpfs):
    f = tmp_path / "full.toml"
    f.write_text(SCENARIO.format(duration=2, extra=""))
    with tmpfs.mounted(tmp_path / "disk", "64k") as disk:
        tmpfs.fill(disk)
        proc = subprocess.run(TCPDELAY + ["run", str(f), "--out", str(disk / "out")],
                              capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tcpdelay run: error: --out ") and "No space left" in lines[0]


# --------------------------------------------------------------------------- SIGKILL + clean


def _descendants(pid: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    out, todo = set(), [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            out.add(c)
            todo.append(c)
    return out


def _run_ids(out: Path) -> list[str]:
    return sorted(json.loads(p.read_text())["testbed"]["run_id"] for p in out.rglob("environment.json"))


def _processes_of(run_ids: list[str]) -> set[int]:
    pids: set[int] = set()
    for rid in run_ids:
        pids.update(int(p["pid"]) for p in (read_state(rid) or {}).get("processes", []))
        for ns in os.listdir("/run/netns"):
            if ns.startswith(f"td-{rid}-"):
                pids.update(pids_in_netns(ns))
    return pids


def _alive_after(pids: set[int], timeout_s: float = 10.0) -> set[int]:
    deadline = time.monotonic() + timeout_s
    left = {p for p in pids if process_alive(p)}
    while left and time.monotonic() < deadline:
        time.sleep(0.05)
        left = {p for p in left if process_alive(p)}
    return left


@pytest.mark.alone  # `testbed clean` removes every run whose owner is dead, and this test's own killed run must
# still be there for it: a clean run by another test (or a Ray testbed unit) side by side would take it first
@pytest.mark.parametrize("command", [["run"], ["sweep", "--jobs", "2"]])
def test_clean_after_sigkill_of_the_orchestrator_leaves_no_process(tmp_path, command):
    f = tmp_path / "kill.toml"
    extra = '[sweep]\n"cross.2.rate_bps" = [100e3, 200e3]\n' if command[0] == "sweep" else ""
    f.write_text(SCENARIO.format(duration=20, extra=extra))
    out = tmp_path / "out"
    proc = subprocess.Popen(TCPDELAY + command + [str(f), "--out", str(out)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        want = 2 if command[0] == "sweep" else 1
        deadline = time.monotonic() + 60
        while len(list(out.rglob("sent/part-*")) + list(out.rglob("flows/0/sent/part-*"))) < want \
                or len(_run_ids(out)) < want:
            assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read() if proc.poll() else "slow"
            time.sleep(0.05)
        run_ids = _run_ids(out)
        ours = _descendants(proc.pid) | _processes_of(run_ids)
        assert ours
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    # Killed outright: what does not die with it is removed by `clean` (of orphaned runs only).
    cleaned = subprocess.run(TCPDELAY + ["testbed", "clean", "--json"], capture_output=True, text=True, timeout=60)
    assert cleaned.returncode == 0, cleaned.stderr
    assert _alive_after(ours, 30.0) == set()  # a sweep worker tears its testbed down, then exits
    for rid in run_ids:
        assert not [n for n in os.listdir("/run/netns") if n.startswith(f"td-{rid}-")]
        assert not Path(f"/run/tcpdelay/{rid}").exists()


ESCAPER = """
import json, os, time
from tcpdelay.testbed import LinkSpec, Testbed, TestbedSpec
with Testbed(TestbedSpec.dumbbell(1, 1, link=LinkSpec.symmetric(delay_s=0.01))) as tb:
    # Started in a host, then moved back to the root namespace, and not tied to our life.
    p = tb.hosts["left0"].popen(["nsenter", f"--net=/proc/{os.getpid()}/ns/net", "sleep", "300"], preexec_fn=None)
    while open(f"/proc/{p.pid}/cmdline", "rb").read().split(b"\\0")[0] != b"sleep":
        assert p.poll() is None, "nsenter failed"
        time.sleep(0.01)
    print(json.dumps({"run_id": tb.run_id, "escaper": p.pid}), flush=True)
    time.sleep(300)
"""


@pytest.mark.alone  # `testbed clean` removes every run whose owner is dead, and this test's own killed run must
# still be there for it: a clean run by another test (or a Ray testbed unit) side by side would take it first
def test_clean_ends_a_recorded_process_that_left_the_run_s_namespaces():
    import shutil

    if shutil.which("nsenter") is None:
        pytest.skip("needs nsenter (util-linux)")
    proc = subprocess.Popen([sys.executable, "-c", ESCAPER], stdout=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        assert line, f"the orchestrator died (exit {proc.wait()})"
        run = json.loads(line)
    finally:
        proc.kill()  # SIGKILL: it removes nothing itself
        proc.wait(10)
    pid = run["escaper"]
    assert process_alive(pid)
    assert os.stat(f"/proc/{pid}/ns/net").st_ino == os.stat("/proc/self/ns/net").st_ino  # in no run namespace
    cleaned = subprocess.run(TCPDELAY + ["testbed", "clean", "--json"], capture_output=True, text=True, timeout=60)
    assert cleaned.returncode == 0, cleaned.stderr
    assert run["run_id"] in [r["run_id"] for r in json.loads(cleaned.stdout)["removed"]]
    left = _alive_after({pid}, 5.0)
    for p in left:  # do not leave it behind when the test fails
        os.kill(p, signal.SIGKILL)
    assert left == set()
