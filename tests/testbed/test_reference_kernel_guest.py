"""Reference-kernel hosts: a QEMU guest booting Debian's Linux 6.1 as a testbed host's endpoint.

The guest replaces the left host's endpoint behind its TUN device, so its traffic crosses the real
emulator; `tcpdelay testbed exec` reaches it and the namespace host alike."""

import json
import signal
import subprocess
import sys
import textwrap

import pytest

from tcpdelay.errors import ParameterError
from tcpdelay.testbed import LinkSpec, Testbed, TestbedSpec
from tcpdelay.testbed.guest import attach_guest, guest_congestion_control, guest_request, unavailable_reason
from tcpdelay.testbed.netns import list_netns, process_alive
from tcpdelay.testbed.netns import unavailable_reason as netns_unavailable
from tcpdelay.testbed.reference_kernel import CpioWriter, get_kernel
from tcpdelay.testbed.spec import NEWRENO_2008

TCPDELAY = [sys.executable, "-m", "tcpdelay"]
RATE_BPS = 10e6

_REASON = unavailable_reason()


def needs_guest(test):
    """A test that boots a guest: testbed and slow; skipped (one line) only where QEMU or the
    kernel package cannot be had."""
    for mark in (pytest.mark.testbed, pytest.mark.slow, pytest.mark.skipif(_REASON is not None, reason=str(_REASON))):
        test = mark(test)
    return test


def test_guest_names_the_kernels_congestion_controls():
    assert guest_congestion_control("westwood+") == "westwood"   # tcp_westwood.c is Westwood+
    assert guest_congestion_control("vegas") == "vegas"
    assert guest_congestion_control("highspeed") == "highspeed"  # a kernel name tcpdelay lacks
    with pytest.raises(ParameterError, match="only as tcpdelay's BPF port"):
        guest_congestion_control("westwood")                     # the 2001 Westwood: no module


def test_guest_request_refuses_bad_input():
    with pytest.raises(ParameterError, match="allowed: debian-6.1"):
        get_kernel("debian-9")
    with pytest.raises(ParameterError, match="allowed: left, right, both"):
        guest_request("debian-6.1", "middle")
    with pytest.raises(ParameterError, match="allowed: tcg, kvm"):
        guest_request("debian-6.1", "left", "xen")


@pytest.mark.testbed
@pytest.mark.skipif(netns_unavailable() is not None, reason=str(netns_unavailable()))
def test_testbed_up_refuses_an_unknown_host_kernel_in_one_line():
    proc = subprocess.run([*TCPDELAY, "testbed", "up", "--host-kernel", "debian-9"], capture_output=True, text=True)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "allowed: debian-6.1" in proc.stderr


def test_cpio_archive_is_newc_with_a_trailer():
    c = CpioWriter()
    c.file("etc/a.conf", b"x=1\n")
    data = c.bytes()
    assert data.startswith(b"070701") and len(data) % 512 == 0
    assert data.count(b"070701") == 3   # etc, etc/a.conf, the trailer
    assert b"etc/a.conf\x00" in data and b"TRAILER!!!\x00" in data and b"x=1\n" in data


@pytest.fixture(scope="module")
def guest_bed():
    spec = TestbedSpec.dumbbell(link=LinkSpec.symmetric(delay_s=0.01, rate_bps=RATE_BPS))
    with Testbed(spec) as tb:
        guest = attach_guest(tb, "left0", tcp=NEWRENO_2008)
        yield tb, guest


def _exec(tb, host, *cmd):
    proc = subprocess.run([*TCPDELAY, "testbed", "exec", "--run", tb.run_id, "--json", host, "--", *cmd],
                          capture_output=True, text=True, timeout=300)
    return proc.returncode, json.loads(proc.stdout) if proc.stdout.startswith("{") else proc.stderr


@needs_guest
def test_exec_on_the_guest_shows_its_kernel_and_settings(guest_bed):
    tb, guest = guest_bed
    rc, out = _exec(tb, "left0", "cat", "/proc/sys/net/ipv4/tcp_available_congestion_control")
    assert rc == 0 and out["kind"] == "guest", out
    assert {"vegas", "westwood", "reno"} <= set(out["stdout"].split())
    rc, out = _exec(tb, "left0", "cat", "/proc/sys/net/ipv4/tcp_recovery")
    assert (rc, out["stdout"].strip()) == (0, "0")
    rc, out = _exec(tb, "left0", "uname", "-r")
    assert out["stdout"].startswith("6.1.")
    assert guest.tcp_applied["rack_in_effect"] is False and guest.tcp_applied["initcwnd_segments"] == 3
    assert guest.tcp_applied["congestion_control"] == "reno"
    rc, out = _exec(tb, "left0", "ls", "/no-such-file")
    assert rc == 1 and out["returncode"] == 1 and "No such file" in out["stderr"]


@needs_guest
def test_exec_on_a_namespace_host_and_bad_host(guest_bed):
    tb, _ = guest_bed
    rc, out = _exec(tb, "right0", "cat", "/proc/sys/net/ipv4/ip_forward")
    assert rc == 0 and out["kind"] == "netns" and out["stdout"].strip() in ("0", "1")
    proc = subprocess.run([*TCPDELAY, "testbed", "exec", "--run", tb.run_id, "nohost", "--", "true"],
                          capture_output=True, text=True)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "nohost" in proc.stderr


@needs_guest
def test_iperf3_from_the_guest_crosses_the_emulator(guest_bed):
    tb, guest = guest_bed
    server = tb.hosts["right0"]
    srv = server.popen(["iperf3", "-s", "-1", "-p", "5299"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    before = tb.link_counters()["a_to_b"]["packets_in"]
    res = guest.exec(f"iperf3 -c {server.address} -p 5299 -t 4 -C westwood -J", timeout_s=240)
    srv.wait(30)
    report = json.loads(res.stdout)
    received = report["end"]["sum_received"]
    assert report["end"]["sender_tcp_congestion"] == "westwood"
    assert received["bytes"] > 100_000
    # Through the emulator: its packets carry the transfer and its rate bounds the goodput.
    assert tb.link_counters()["a_to_b"]["packets_in"] - before >= received["bytes"] / 1500
    assert received["bits_per_second"] <= RATE_BPS


@needs_guest
def test_a_bpf_port_registers_on_the_61_guest_and_carries_a_flow(guest_bed):
    """tcpdelay's BPF Vegas on the guest's 6.1 kernel (no struct_ops links there: the loader
    registers it by the map update), beside the kernel's own module: a flow runs on it."""
    tb, guest = guest_bed
    with pytest.raises(ParameterError, match="no BPF port of it"):
        guest.register_bpf_port("cubic", "tdx")
    with pytest.raises(ParameterError, match="1 to 15 characters"):
        guest.register_bpf_port("vegas", "a-name-far-too-long")
    answer = guest.register_bpf_port("vegas", "tdgvegas")
    assert answer["name"] == "tdgvegas" and answer["link_id"] == 0 and answer["map_id"] > 0
    assert {"tdgvegas", "vegas"} <= set(guest.sysctl("net.ipv4.tcp_available_congestion_control").split())
    server = tb.hosts["right0"]
    srv = server.popen(["iperf3", "-s", "-1", "-p", "5298"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    res = guest.exec(f"iperf3 -c {server.address} -p 5298 -t 2 -C tdgvegas -J", timeout_s=240)
    srv.wait(30)
    report = json.loads(res.stdout)
    assert report["end"]["sender_tcp_congestion"] == "tdgvegas"
    assert report["end"]["sum_received"]["bytes"] > 50_000


ORPHAN = textwrap.dedent("""
    import json, time
    from tcpdelay.testbed import LinkSpec, Testbed, TestbedSpec
    from tcpdelay.testbed.guest import attach_guest
    with Testbed(TestbedSpec.dumbbell(link=LinkSpec.symmetric(delay_s=0.01))) as tb:
        g = attach_guest(tb, "right0")
        print(json.dumps({"run_id": tb.run_id, "qemu": g.proc.pid}), flush=True)
        time.sleep(600)
""")


@needs_guest
def test_guest_dies_with_its_owner_and_clean_removes_the_run():
    proc = subprocess.Popen([sys.executable, "-c", ORPHAN], stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    assert line, f"orchestrator died (exit {proc.wait()})"
    run = json.loads(line)
    assert process_alive(run["qemu"])
    from tcpdelay.testbed import runs

    def virtiofsd():   # the guest's file server, by the socket in the run's state directory
        out = subprocess.run(["pgrep", "-f", f"{runs.state_dir(run['run_id'])}/virtiofs-"], capture_output=True, text=True)
        return out.stdout.split()

    assert virtiofsd()
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    runs.clean(run_ids=[run["run_id"]])
    assert not process_alive(run["qemu"]) and not virtiofsd()
    assert not [n for n in list_netns() if n.startswith(f"td-{run['run_id']}-")]



@needs_guest
def test_the_guests_clock_offset_agrees_with_its_uptime_and_is_recorded(guest_bed):
    """The offset of the guest's CLOCK_MONOTONIC (tdclock's NTP-style exchange) against an
    independent reading: /proc/uptime (CLOCK_BOOTTIME, which is CLOCK_MONOTONIC in a guest that
    never suspends; 10-ms steps) read through the command server between two host instants."""
    import time

    from tcpdelay.testbed.guest import read_guests
    from tcpdelay.testbed.guest_clock import MAX_ERROR_S

    tb, guest = guest_bed
    booted = guest.clock
    assert booted is not None and 0 < booted.answered <= booted.probes
    assert booted.error_s == pytest.approx(booted.delay_s / 2) and booted.error_s > 0
    assert booted.usable_for_delays() == (booted.error_s <= MAX_ERROR_S)
    recorded = read_guests(tb.state_dir)["left0"]["clock"]
    assert recorded["offset_s"] == booted.offset_s and recorded["clock"] == "CLOCK_MONOTONIC"

    t_a = time.monotonic()
    uptime_s = float(guest.exec("cat /proc/uptime").stdout.split()[0])
    t_b = time.monotonic()
    now = guest.measure_clock()
    slack = 0.011 + now.error_s     # uptime's 10-ms step, and the estimate's own error
    assert uptime_s - t_b - slack <= now.offset_s <= uptime_s - t_a + slack, (uptime_s, t_a, t_b, now)
    # the guest's emulated timer drifts, slowly: well under 1000 ppm between the two measurements
    span_s = now.measured_at_s - booted.measured_at_s
    assert abs(now.offset_s - booted.offset_s) < 1e-3 * span_s + booted.error_s + now.error_s


@needs_guest
def test_the_guest_runs_this_machines_tcpdelay_on_its_own_kernel(guest_bed):
    """This machine's file system is the guest's /host (virtiofs, read-only): tcpdelay's own Python
    runs there on the guest's 6.1 kernel, and sees the guest's TCP settings."""
    import tcpdelay

    tb, guest = guest_bed
    assert guest.has_host_fs
    res = guest.exec_host(f"{sys.executable} -c 'import os, tcpdelay; print(os.uname().release, tcpdelay.__version__)'"
                          " && cat /proc/sys/net/ipv4/tcp_recovery", timeout_s=300)
    release, version, recovery = res.stdout.split()
    assert release.startswith("6.1.") and version == tcpdelay.__version__ and recovery == "0"
    # read-only: the guest cannot write this machine's files
    assert guest.exec_host(f"touch {tb.state_dir}/from-the-guest", check=False).returncode != 0


def test_counters_in_words_with_every_drop_reason_and_the_ce_marks():
    """Issue 54, item 6: ``testbed status`` printed the link's drops as a Python dict, without
    the CE marks."""
    from tcpdelay.cli.testbed import counters_text

    x = {"packets_in": 1200, "packets_out": 1180, "ce_marks": 7,
         "drops": {"aqm": 3, "loss": 17, "memory": 0, "queue": 0, "total": 20}}
    assert counters_text(x) == "1200 packets in, 1180 out, 20 dropped (aqm 3, loss 17), 7 CE-marked"


@needs_guest
def test_up_and_status_name_the_guest_and_its_congestion_control():
    """Issue 54, item 6: ``testbed up --host-kernel debian-6.1`` listed the guest host as
    ``cc=bbr`` (its namespace's) and then ``cc=cubic`` (the guest's, which ``testbed exec``
    shows); ``testbed status`` never mentioned the guest."""
    import os
    import re

    env = {**os.environ, "COLUMNS": "80"}
    up = subprocess.run([*TCPDELAY, "testbed", "up", "--delay-s", "0.01", "--rate-bps", "10e6", "--host-kernel",
                         "debian-6.1"], capture_output=True, text=True, timeout=300, env=env)
    assert up.returncode == 0, up.stderr
    run_id = up.stdout.split()[1]
    try:
        rc, res = _exec(type("Run", (), {"run_id": run_id}), "left0", "cat", "/proc/sys/net/ipv4/tcp_congestion_control")
        assert rc == 0, res
        cc = res["stdout"].strip()
        text = " ".join(up.stdout.split())
        assert re.search(rf"left0 10\.\S+ cc={cc} initcwnd=\S+ a QEMU guest \(below\)", text), text  # the host's line
        assert f", cc={cc}); tcpdelay testbed exec left0" in text                       # the guest's line
        assert text.count("cc=") == 3 and "a QEMU guest (below)" in text
        status = subprocess.run([*TCPDELAY, "testbed", "status", run_id], capture_output=True, text=True,
                                timeout=120, env=env)
        assert status.returncode == 0, status.stderr
        words = " ".join(status.stdout.replace("│", " ").split())
        assert "left0" in words and "a QEMU guest: Linux 6.1" in words and f"cc {cc})" in words
        assert f"{run_id} a_to_b: " in status.stdout and "CE-marked" in status.stdout and "{" not in status.stdout
        doc = json.loads(subprocess.run([*TCPDELAY, "testbed", "status", run_id, "--json"], capture_output=True,
                                        text=True, timeout=120).stdout)
        (run,) = doc["runs"]
        assert run["guests"]["left0"]["alive"] is True and run["guests"]["left0"]["congestion_control"] == cc
    finally:
        subprocess.run([*TCPDELAY, "testbed", "down", run_id], capture_output=True, timeout=120)
