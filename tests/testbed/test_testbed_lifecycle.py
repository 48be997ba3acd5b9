"""Everything a run creates goes away: normal exit, exception, SIGINT, SIGTERM, and SIGKILL + clean."""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from tcpdelay.testbed import LinkSpec, Testbed, TestbedSpec, find_runs
from tcpdelay.testbed.netns import list_netns, pids_in_netns, process_alive, unavailable_reason
from tcpdelay.testbed.runs import state_dir

pytestmark = [pytest.mark.testbed, pytest.mark.skipif(unavailable_reason() is not None,
                                                      reason=str(unavailable_reason()))]

TCPDELAY = [sys.executable, "-m", "tcpdelay"]

ORCHESTRATOR = textwrap.dedent("""
    import json, sys, time
    from tcpdelay.testbed import LinkSpec, Testbed, TestbedSpec
    spec = TestbedSpec.dumbbell(int(sys.argv[1]), 1, link=LinkSpec.symmetric(delay_s=0.01))
    with Testbed(spec) as tb:
        sleeper = tb.hosts["left0"].popen(["sleep", "300"])
        child = tb.hosts["right0"].spawn(time.sleep, 300)
        # A background job of a shell that has exited: no parent of ours to die with.
        orphan = int(tb.hosts["left0"].run(["sh", "-c", "sleep 300 >/dev/null 2>&1 </dev/null & echo $!"]).stdout)
        print(json.dumps({"run_id": tb.run_id, "emulator_pid": tb.emulator_pid, "sleeper": sleeper.pid,
                          "child": child.pid, "orphan": orphan,
                          "namespaces": sorted(h.netns for h in tb.hosts.values())
                          + sorted(tb.routers.values())}), flush=True)
        time.sleep(300)
""")


def _start_orchestrator(left_hosts=1):
    proc = subprocess.Popen([sys.executable, "-c", ORCHESTRATOR, str(left_hosts)], stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    assert line, f"orchestrator died (exit {proc.wait()})"
    return proc, json.loads(line)


def _leftovers(run):
    rid = run["run_id"]
    procs = [p for p in (run["emulator_pid"], run["sleeper"], run["child"], run.get("orphan")) if p and process_alive(p)]
    ns = [n for n in list_netns() if n.startswith(f"td-{rid}-")]
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    return {"namespaces": ns, "processes": procs, "root_links": f"td{rid}" in links,
            "state_dir": os.path.exists(state_dir(rid))}


NOTHING = {"namespaces": [], "processes": [], "root_links": False, "state_dir": False}


def _wait_clean(run, timeout_s=10.0):
    deadline = time.monotonic() + timeout_s
    while _leftovers(run) != NOTHING and time.monotonic() < deadline:
        time.sleep(0.05)
    return _leftovers(run)


def test_exception_inside_the_block_removes_everything():
    with pytest.raises(RuntimeError, match="boom"):
        with Testbed(TestbedSpec.dumbbell(2, 2, link=LinkSpec.symmetric(delay_s=0.001))) as tb:
            rid = tb.run_id
            run = {"run_id": rid, "emulator_pid": tb.emulator_pid,
                   "sleeper": tb.hosts["left1"].popen(["sleep", "300"]).pid,
                   "child": tb.hosts["right1"].spawn(time.sleep, 300).pid}
            assert len([n for n in list_netns() if n.startswith(f"td-{rid}-")]) == 6  # 4 hosts, 2 routers
            assert process_alive(run["emulator_pid"]) and process_alive(run["sleeper"])
            raise RuntimeError("boom")
    assert _leftovers(run) == NOTHING
    assert rid not in find_runs()


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_interrupted_orchestrator_removes_everything(sig):
    proc, run = _start_orchestrator()
    assert all(n in list_netns() for n in run["namespaces"])
    proc.send_signal(sig)
    proc.wait(20)
    assert _leftovers(run) == NOTHING


@pytest.mark.alone  # `testbed clean` removes every run whose owner is dead, and this test's own killed run must
# still be there for it: a clean run by another test (or a Ray testbed unit) side by side would take it first
@pytest.mark.slow
def test_clean_after_sigkill_leaves_no_namespace_link_or_process():
    proc, run = _start_orchestrator(left_hosts=2)
    assert run["orphan"] in pids_in_netns(f"td-{run['run_id']}-left0")
    proc.kill()
    proc.wait(10)
    time.sleep(0.3)
    left = _leftovers(run)
    assert left["namespaces"] and left["state_dir"]  # killed outright: nothing removed itself
    assert run["orphan"] in left["processes"]  # outlived the orchestrator (the others die with it)
    out = subprocess.run(TCPDELAY + ["testbed", "clean", "--json"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    removed = {r["run_id"]: r for r in json.loads(out.stdout)["removed"]}
    assert removed[run["run_id"]]["namespaces"] == len(run["namespaces"]) == 5
    assert _wait_clean(run, 5.0) == NOTHING


@pytest.mark.slow
def test_clean_keeps_runs_whose_owner_lives():
    with Testbed(TestbedSpec(), start_link=False) as tb:
        out = subprocess.run(TCPDELAY + ["testbed", "clean", "--json"], capture_output=True, text=True, timeout=60)
        assert tb.run_id in json.loads(out.stdout)["kept_live"]
        assert all(h.netns in list_netns() for h in tb.hosts.values())


def test_two_runs_coexist_with_their_own_names_and_addresses():
    with Testbed(TestbedSpec(), start_link=False) as a, Testbed(TestbedSpec(), start_link=False) as b:
        assert a.run_id != b.run_id and a.subnet != b.subnet
        assert not {h.netns for h in a.hosts.values()} & {h.netns for h in b.hosts.values()}
        assert all(len(h.ifname) <= 15 for tb in (a, b) for h in tb.hosts.values())
        assert {a.run_id, b.run_id} <= set(find_runs())


@pytest.mark.slow
def test_without_root_the_cli_says_so_in_one_line_and_exits_2():
    # Everything is imported while still root: after setuid the interpreter's own files may be
    # unreadable to nobody, which is not what this test is about.
    code = ("import os, sys; from tcpdelay.cli import main; import tcpdelay.cli.testbed; "
            "os.setgroups([]); os.setgid(65534); os.setuid(65534); main(['testbed', 'status'])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 2
    assert out.stderr.strip().splitlines() == [
        "tcpdelay: error: the testbed needs root and /dev/net/tun: not running as root"]


@pytest.mark.slow
def test_cli_up_status_down_round_trip():
    up = subprocess.run(TCPDELAY + ["testbed", "up", "--delay-s", "0.005", "--loss", "0.01", "--tcp-preset",
                                    "newreno-2008", "--left", "2", "--json"], capture_output=True, text=True, timeout=90)
    assert up.returncode == 0, up.stderr
    tb = json.loads(up.stdout)
    rid = tb["run_id"]
    try:
        assert set(tb["hosts"]) == {"left0", "left1", "right0"}
        assert tb["hosts"]["left1"]["tcp"]["congestion_control"] == "reno"
        assert tb["hosts"]["left1"]["tcp"]["initcwnd_segments"] == 3
        # The testbed outlives `up`: a host reaches the other side through the emulator.
        right = tb["hosts"]["right0"]
        probe = subprocess.run(["ip", "netns", "exec", tb["hosts"]["left0"]["netns"], sys.executable, "-c",
                                f"import socket; s = socket.socket(); s.settimeout(5); "
                                f"import errno; assert s.connect_ex(({right['address']!r}, 9)) == errno.ECONNREFUSED"],
                               capture_output=True, timeout=30)
        assert probe.returncode == 0, probe.stderr  # refused by right0's kernel: a round trip
        st = subprocess.run(TCPDELAY + ["testbed", "status", rid, "--json"], capture_output=True, text=True, timeout=90)
        assert st.returncode == 0, st.stderr
        (run,) = json.loads(st.stdout)["runs"]
        assert run["owner_alive"] and run["run_id"] == rid
        assert run["counters"]["a_to_b"]["packets_in"] >= 1  # the SYN crossed the link
    finally:
        down = subprocess.run(TCPDELAY + ["testbed", "down", rid, "--json"], capture_output=True, text=True, timeout=90)
    assert down.returncode == 0, down.stderr
    assert not [n for n in list_netns() if n.startswith(f"td-{rid}-")]
    assert rid not in find_runs()
    bad = subprocess.run(TCPDELAY + ["testbed", "down", rid], capture_output=True, text=True, timeout=90)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and f"no testbed run {rid}" in bad.stderr


def _pm_qos_us():
    with open("/dev/cpu_dma_latency", "rb") as f:
        return int.from_bytes(f.read(4), sys.byteorder, signed=True)


@pytest.mark.skipif(not os.path.exists("/dev/cpu_dma_latency"), reason="no PM QoS interface (/dev/cpu_dma_latency)")
def test_low_latency_idle_request_is_held_while_open_and_only_then():
    with Testbed(TestbedSpec(), start_link=False) as tb:
        assert tb.describe()["cpu_dma_latency_us"] == 0
        assert _pm_qos_us() == 0
        fd = tb._pm_qos_fd
    with pytest.raises(OSError):
        os.fstat(fd)  # the request's file descriptor is closed: the kernel dropped the request
    with Testbed(TestbedSpec(cpu_dma_latency_us=None), start_link=False) as tb:
        assert tb.describe()["cpu_dma_latency_us"] is None
