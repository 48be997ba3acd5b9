"""A bounded loopback soak of `tcpdelay recv` (issue 53, item 3): the floods of the issue, each
a few seconds at most, against the receiver as a command; its peak memory (VmHWM) and its
output folder must stay within the documented bounds (docs/transport.md, "Security"), and it
serves a real sender after each.

The bounds judge the program, not the machine: the floods are fixed amounts (not "as much as
possible for N seconds"), and the limits are the receiver's own (its QUIC window, its kept
errors), with room for the interpreter's own noise but far below what the floods took before
(a 128 MiB QUIC buffer for these four frames, a run.json that grew with every message).
"""

from __future__ import annotations

import json
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from receiver_helpers import VOIP, pkt

from tcpdelay.transport import RunParams, SenderConfig, control, run_sender
from tcpdelay.transport.framing import frame

QUIC_WINDOW_BYTES = 4 * 2**20
#: Room for the interpreter and its allocator beyond what the receiver holds on purpose.
SLACK_BYTES = 40 * 2**20


class RecvProcess:
    """`tcpdelay recv --runs 0` as a process, with small bounds."""

    def __init__(self, out: Path, *extra: str):
        self.out = out
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tcpdelay", "recv", "--listen", "127.0.0.1:0", "--out", str(out),
             "--runs", "0", "--json", "--min-free-disk-bytes", "0", "--idle-timeout-s", "5",
             "--quic-window-bytes", str(QUIC_WINDOW_BYTES), "--max-runs-per-peer-per-minute", "1000",
             *extra],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.lines: list[str] = []
        got = threading.Event()

        def read():
            for line in self.proc.stderr:
                self.lines.append(line)
                if "listening on" in line:
                    self.port = int(re.search(r":(\d+) \(", line).group(1))
                    got.set()

        threading.Thread(target=read, daemon=True).start()
        assert got.wait(60), "".join(self.lines)

    def hwm_bytes(self) -> int:
        """The process's peak resident memory so far (VmHWM)."""
        text = Path(f"/proc/{self.proc.pid}/status").read_text()
        return int(re.search(r"VmHWM:\s+(\d+) kB", text).group(1)) * 1024

    def real_run(self, tmp_path, run_id, transport="tcp"):
        assert self.proc.poll() is None, "".join(self.lines)
        res = run_sender(SenderConfig("127.0.0.1", self.port, run=RunParams(transport=transport, duration_s=0.4),
                                      out_dir=str(tmp_path / f"tx-{run_id}"), run_id=run_id), VOIP)
        assert res.status == "completed", (res.status, res.error, "".join(self.lines))

    def hello(self, run_id, **params):
        ctl = socket.create_connection(("127.0.0.1", self.port), timeout=10)
        control.send(ctl, {"type": "hello", "protocol": control.PROTOCOL, "version": control.VERSION,
                           "run_id": run_id, "params": RunParams(**params).to_dict()},
                     pad_to=control.REQUEST_PAD_BYTES)
        accept, _ = control.recv(ctl, 10)
        assert accept["type"] == "accept", accept
        return ctl, accept

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        out, _ = self.proc.communicate(timeout=30)
        return out


def _folder_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


@pytest.fixture
def recv(tmp_path):
    r = RecvProcess(tmp_path / "rx", "--max-control-messages", "1000000", "--max-errors-kept", "100")
    yield r
    if r.proc.poll() is None:
        r.stop()


def test_a_flood_of_unknown_control_messages_keeps_memory_and_run_json_bounded(recv, tmp_path):
    recv.real_run(tmp_path, "warm")
    base = recv.hwm_bytes()
    ctl, accept = recv.hello("flood", duration_s=30)
    with socket.create_connection(("127.0.0.1", recv.port), timeout=10) as data:
        data.sendall(control.encode({"type": "data", "token": accept["token"], "connection": 0})
                     + frame(pkt(0)))
        burst = control.encode({"type": "unknown-" + "x" * 32}) * 1000
        for i in range(200):                    # 200,000 messages, 9 MB
            ctl.sendall(burst)
            data.sendall(frame(pkt(i + 1)))     # the flow goes on (no idle timeout)
    control.send(ctl, {"type": "end"}, pad_to=control.REQUEST_PAD_BYTES)
    summary, _ = control.recv(ctl, 30)
    ctl.close()
    assert summary["type"] == "summary"
    recv.real_run(tmp_path, "after-flood")
    assert recv.hwm_bytes() - base < SLACK_BYTES
    run_json = recv.out / "flood" / "run.json"
    assert run_json.stat().st_size < 64 * 1024          # 100 errors kept, the rest counted
    result = json.loads(run_json.read_text())["receiver"]["result"]
    assert len(result["errors"]) == 100 and result["errors_dropped"] == 200_000 - 100
    assert result["control_messages"] == 200_001


def test_quic_stream_frames_at_high_offsets_cannot_make_the_receiver_buffer_past_its_window(recv, tmp_path):
    from quic_flood import quic_high_offset_flood

    recv.real_run(tmp_path, "warm-quic", transport="quic-stream")
    base = recv.hwm_bytes()
    ctl, _ = recv.hello("high-offsets", transport="quic-stream", duration_s=30)
    w = 64 * 2**20                      # the window before: each frame right below its end
    ending = quic_high_offset_flood(recv.port, [QUIC_WINDOW_BYTES - 2000, w - 2000, 2 * w - 2000, 4 * w - 2000])
    ctl.close()
    assert "limit" in ending            # aioquic's FLOW_CONTROL_ERROR: over the fixed window
    recv.real_run(tmp_path, "after-quic", transport="quic-stream")
    assert recv.hwm_bytes() - base < QUIC_WINDOW_BYTES + SLACK_BYTES
    assert _folder_bytes(recv.out) < 4 * 2**20


# -- item 5: honest after a kill -----------------------------------------------------------------

def test_a_receiver_killed_mid_run_is_said_so_by_metrics_and_marked_by_the_next_receiver(tmp_path):
    import tempfile

    from tcpdelay.records import read_run_metadata

    rx = RecvProcess(tmp_path / "rx")
    pid = rx.proc.pid
    sent = {}
    sender = threading.Thread(target=lambda: sent.update(res=run_sender(SenderConfig(
        "127.0.0.1", rx.port, run=RunParams(transport="quic-stream", duration_s=20),
        out_dir=str(tmp_path / "tx"), run_id="killed"), VOIP)), daemon=True)
    sender.start()
    run_dir = tmp_path / "rx" / "killed"
    deadline = time.monotonic() + 60
    while not list((run_dir / "received").glob("part-*.parquet")):     # a second of records written
        assert time.monotonic() < deadline and rx.proc.poll() is None, "".join(rx.lines)
        time.sleep(0.05)
    keys = list(Path(tempfile.gettempdir()).glob(f"tcpdelay-quic-{pid}-*"))
    assert keys, "the run's QUIC key folder"
    rx.proc.kill()
    rx.proc.wait(10)
    sender.join(60)
    assert sent["res"].status != "completed"
    assert read_run_metadata(run_dir)["receiver"]["status"] == "running"

    out = subprocess.run([sys.executable, "-m", "tcpdelay", "metrics", str(run_dir), "--sent", str(tmp_path / "tx"),
                          "--json"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    (note,) = [w for w in json.loads(out.stdout)["warnings"] if "killed" in w]
    assert "missing tail of the run is not loss" in note

    again = RecvProcess(tmp_path / "rx")
    try:
        deadline = time.monotonic() + 30
        while not any("marked interrupted" in line for line in again.lines):
            assert time.monotonic() < deadline, "".join(again.lines)
            time.sleep(0.05)
        rcv = read_run_metadata(run_dir)["receiver"]
        assert rcv["status"] == "interrupted" and "killed" in rcv["interrupted"]
        assert not any(k.exists() for k in keys)
        again.real_run(tmp_path, "after-kill")
    finally:
        again.stop()
