"""The cc_state reader against a real socket-storage map: a test-only BPF congestion control
(tests/data/bpf/publish_reno.bpf.c) registered with bpftool, selected per socket on loopback.

Needs clang, bpftool and root (CAP_BPF/CAP_SYS_ADMIN); CI has them. The registration is always
removed again, and the tcp_congestion_control sysctl is never touched (per socket only).
"""

import json
import os
import shutil
import subprocess
import threading
from pathlib import Path

import numpy as np
import pytest

from tcpdelay.errors import ParameterError
from tcpdelay.records import read_records
from tcpdelay.traffic import CbrSource
from tcpdelay.transport import ReceiverConfig, RunParams, SenderConfig, TcpOptions, run_receiver, run_sender
from tcpdelay.transport.cc_state import CcStateMap

ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT / "tests" / "data" / "bpf" / "publish_reno.bpf.c"
NAME = "tdcct_publish"           # the ops' .name in the source
PROG_PREFIX = "tdcct_pub_cong"   # its cong_avoid program (names are cut to 15 characters)

# Registered with bpftool (a legacy registration, which outlives its process): to `testbed clean`
# it is a leftover, so a clean side by side (another test's, a Ray testbed unit's) would unregister it
# mid-test. These tests run in make test's second pass, with the machine to themselves.
pytestmark = pytest.mark.alone


def _missing() -> str | None:
    for tool in ("clang", "bpftool", "llvm-strip"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed"
    if os.geteuid() != 0:
        return "registering a BPF congestion control needs root"
    if not Path("/sys/kernel/btf/vmlinux").exists():
        return "the kernel has no BTF (/sys/kernel/btf/vmlinux)"
    return None


def _bpftool_json(*args) -> list:
    out = subprocess.run(["bpftool", "-j", *args], check=True, capture_output=True, text=True).stdout
    return json.loads(out or "[]")


def _struct_ops_ids() -> list[int]:
    return [m["id"] for m in _bpftool_json("struct_ops", "show") if m.get("name") == NAME]


@pytest.fixture(scope="module")
def publishing_cc(tmp_path_factory):
    """Build and register the test congestion control; yield the id of its tdcc_state map."""
    reason = _missing()
    if reason:
        pytest.skip(reason)
    build = tmp_path_factory.mktemp("bpf")
    with open(build / "vmlinux.h", "w") as f:
        subprocess.run(["bpftool", "btf", "dump", "file", "/sys/kernel/btf/vmlinux", "format", "c"],
                       check=True, stdout=f)
    obj = build / "publish_reno.bpf.o"
    subprocess.run(["clang", "-target", "bpf", "-O2", "-g", f"-I{build}", f"-I{ROOT / 'bpf' / 'cc'}",
                    "-c", str(SOURCE), "-o", str(obj)], check=True)
    subprocess.run(["llvm-strip", "-g", str(obj)], check=True)
    assert not _struct_ops_ids(), f"{NAME} is already registered (a leftover of an earlier run?)"
    try:
        subprocess.run(["bpftool", "struct_ops", "register", str(obj)], check=True, capture_output=True)
        progs = [p for p in _bpftool_json("prog", "show") if p.get("name", "").startswith(PROG_PREFIX)]
        assert len(progs) == 1, progs
        maps = [m for m in _bpftool_json("map", "show") if m["id"] in progs[0].get("map_ids", [])
                and m.get("name") == "tdcc_state"]
        assert len(maps) == 1, maps
        yield maps[0]["id"]
    finally:
        for i in _struct_ops_ids():
            subprocess.run(["bpftool", "struct_ops", "unregister", "id", str(i)], check=False)
        assert not _struct_ops_ids()


def _receiver():
    cfg = ReceiverConfig(listen_host="127.0.0.1", idle_timeout_s=5.0)
    ready, box = threading.Event(), {}
    t = threading.Thread(target=lambda: run_receiver(cfg, on_ready=lambda a: (box.update(port=a[1]),
                                                                                ready.set())), daemon=True)
    t.start()
    assert ready.wait(10)
    return t, box["port"]


def test_the_sampler_reads_what_the_congestion_control_publishes(tmp_path, publishing_cc):
    thread, port = _receiver()
    cfg = SenderConfig("127.0.0.1", port, run=RunParams(duration_s=1.0), out_dir=str(tmp_path),
                       tcp=TcpOptions(congestion=NAME), tcp_state_period_s=0.01,
                       cc_state_map_id=publishing_cc)
    res = run_sender(cfg, CbrSource(1400, 0.001))
    thread.join(20)
    assert res.status == "completed"
    t = read_records(tmp_path, "tcp_state")
    assert t.num_rows > 50
    published = t.filter(t.column("cc_state_1").is_valid())
    assert published.num_rows > 0.8 * t.num_rows          # from the first ACK on
    calls = published.column("cc_state_1").to_numpy()
    assert np.all(np.diff(calls) >= 0) and calls[-1] > calls[0]      # the counter follows the ACKs
    # value[0] is snd_cwnd as of the last ACK: what TCP_INFO reports, unless an ACK fell between
    cwnd = published.column("cwnd_segments").to_numpy()
    assert np.mean(published.column("cc_state_0").to_numpy() == cwnd) > 0.9
    assert set(published.column("cc_state_2").to_pylist()) == {7}
    assert set(published.column("cc_state_3").to_pylist()) == {2**64 - 1}   # full unsigned range


def test_a_socket_without_an_entry_reads_none(publishing_cc):
    import socket
    with CcStateMap(publishing_cc) as m, socket.socket() as s:
        assert m.read(s.fileno()) is None


def test_a_map_id_that_does_not_exist_is_a_parameter_error():
    with pytest.raises(ParameterError, match="cannot be opened"):
        CcStateMap(2**31 - 1)
