"""`tcpdelay recv` serves a real sender while a crowd of idle and slow connections is held.

The crowd: 1000 loopback connections to the receiver, half of them silent, half sending one
byte of a 256-byte control message every half second (slow loris). A receiver that reads
handshakes one after another, each with its own timeout, keeps the sender waiting behind the
crowd for minutes; this one reads them concurrently, holds at most ``--max-pending`` of them and
gives each ``--handshake-timeout-s`` in all. Nothing here depends on the machine's speed: the
sender's own connect timeout (20 s for one loopback handshake) is the only clock, and the
crowd is held until the receiver has closed every connection of it.
"""

import errno
import json
import os
import re
import resource
import select
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest

from tcpdelay.transport import RunParams, control

TCPDELAY = [sys.executable, "-m", "tcpdelay"]
CROWD = 1000
MAX_PENDING = 64


def _readable(sock) -> bool:
    """Whether ``sock`` has something to read (poll, not select: the test process holds over a
    thousand sockets, and select() refuses descriptors from 1024 on)."""
    p = select.poll()
    p.register(sock, select.POLLIN)
    return bool(p.poll(0))


@pytest.fixture
def many_files():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    need = CROWD + 512
    if soft < need:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (need, max(hard, need)))
        except (ValueError, OSError):
            pytest.skip(f"RLIMIT_NOFILE cannot be raised to {need} (hard limit {hard})")
    yield
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


class Crowd:
    """``CROWD`` non-blocking connections; the odd ones trickle a never-ending hello."""

    def __init__(self, port: int):
        self.socks = []
        for i in range(CROWD):
            s = socket.socket()
            s.setblocking(False)
            err = s.connect_ex(("127.0.0.1", port))
            assert err in (0, errno.EINPROGRESS), os.strerror(err)
            self.socks.append(s)
        self.slow = self.socks[1::2]
        self.sent = {s: 0 for s in self.slow}
        self.gone: set = set()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._trickle, daemon=True)
        self.thread.start()

    def _trickle(self):
        while not self.stop.wait(0.5):
            for s in self.slow:
                if s.fileno() < 0:
                    continue
                byte = b"\x01" if self.sent[s] == 0 else b"\x00" if self.sent[s] == 1 else b" "
                try:
                    self.sent[s] += s.send(byte)       # the length says 256 bytes follow
                except (BlockingIOError, InterruptedError, OSError):
                    pass

    def connected(self) -> int:
        n = 0
        for s in self.socks:
            if s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == 0:
                try:
                    s.getpeername()
                    n += 1
                except OSError:
                    pass
        return n

    def closed_by_peer(self) -> int:
        """How many the receiver has closed so far (EOF or reset); it never sends them a byte."""
        for s in self.socks:
            if s in self.gone or not _readable(s):
                continue
            try:
                data = s.recv(1)
            except (ConnectionResetError, BrokenPipeError):
                data = b""
            except (BlockingIOError, InterruptedError):
                continue
            assert data == b"", "the receiver wrote to a connection that never identified itself"
            self.gone.add(s)
        return len(self.gone)

    def close(self):
        self.stop.set()
        self.thread.join(5)
        for s in self.socks:
            s.close()


def _fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def test_a_sender_gets_in_beside_1000_idle_and_slow_connections(tmp_path, many_files):
    rx = subprocess.Popen([*TCPDELAY, "recv", "--listen", "127.0.0.1:0", "--out", str(tmp_path / "rx"),
                           "--runs", "2", "--handshake-timeout-s", "5", "--max-pending", str(MAX_PENDING),
                           "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    crowd = None
    try:
        port = int(re.search(r"listening on 127\.0\.0\.1:(\d+)", rx.stderr.readline()).group(1))
        crowd = Crowd(port)
        # the crowd is in: every connection completed its TCP handshake (the receiver drains
        # its accept queue however busy it is with the others)
        deadline = time.monotonic() + 60
        while crowd.connected() < CROWD and time.monotonic() < deadline:
            time.sleep(0.1)
        assert crowd.connected() == CROWD
        # bounded in count: the receiver holds at most MAX_PENDING of them (+ its own sockets)
        assert _fds(rx.pid) <= MAX_PENDING + 32

        # a sender that says hello and leaves: no run, nothing written
        with socket.create_connection(("127.0.0.1", port)) as ctl:
            control.send(ctl, {"type": "hello", "protocol": control.PROTOCOL, "version": control.VERSION,
                               "run_id": "abandoned", "params": RunParams(duration_s=5).to_dict()},
                         pad_to=control.REQUEST_PAD_BYTES)
            accept, _ = control.recv(ctl, 20)
            assert accept["type"] == "accept"

        # a real sender gets in, one loopback handshake within its connect timeout
        tx = subprocess.run([*TCPDELAY, "send", "--to", f"127.0.0.1:{port}", "--duration-s", "1",
                             "--connect-timeout-s", "20", "--run-id", "real", "--out", str(tmp_path / "tx"),
                             "--json"], capture_output=True, text=True, timeout=120)
        assert tx.returncode == 0, tx.stderr
        sent = json.loads(tx.stdout)
        assert sent["status"] == "completed" and sent["receiver"]["received_packets"] == sent["packets"] == 50

        # bounded in time: every crowd connection, the trickling ones too, is closed by the
        # receiver (which is still running) although none has finished its message
        deadline = time.monotonic() + 60
        while crowd.closed_by_peer() < CROWD and time.monotonic() < deadline:
            time.sleep(0.2)
        assert rx.poll() is None
        assert crowd.closed_by_peer() == CROWD
        assert _fds(rx.pid) <= 32
    finally:
        if crowd is not None:
            crowd.close()
        rx.send_signal(signal.SIGTERM)
        out, err = rx.communicate(timeout=60)
    runs = json.loads(out)["runs"]
    assert [(r["run_id"], r["status"], r["received_packets"]) for r in runs] == [("real", "completed", 50)]
    assert "run abandoned" in err and "not counted" in err
    assert sorted(p.name for p in (tmp_path / "rx").iterdir()) == ["real"]
